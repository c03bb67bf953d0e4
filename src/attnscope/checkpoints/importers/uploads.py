"""Uploaded files (a folder's files together, or one zip of it) as a folder on disk, then imported.

Names are reduced to their last component, so no upload writes outside its temporary folder, and the
folder is removed when the import ends, whether it worked or not.
"""
from __future__ import annotations

import tempfile
import zipfile
from io import BytesIO
from pathlib import Path
from typing import Any, Sequence

from attnscope.checkpoints.boundary import boundary
from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.importers import route
from attnscope.checkpoints.importers.hf_files import unzipped
from attnscope.checkpoints.importers.parts import Imported

MAX_BYTES = 4 * 2**30  # all files together
FOLDER = "uploaded-model"  # the upload's folder, as errors and the model's default name show it


def import_uploaded(files: Sequence[tuple[str, bytes]], **kw: Any) -> Imported:
    """Import uploaded (name, bytes) pairs: a zip of a folder, a Hugging Face folder's files (config.json among
    them), or a fairseq / OpenNMT-py checkpoint with the files beside it (dict.*.txt)."""
    if not files:
        raise CheckpointError("upload the model's files, or one zip of its folder")
    if sum(len(data) for _, data in files) > MAX_BYTES:
        raise CheckpointError(f"the uploaded files hold more than {MAX_BYTES // 2**30} GB")
    with boundary(files[0][0] if len(files) == 1 else f"the {len(files)} uploaded files"):
        if len(files) == 1 and zipfile.is_zipfile(BytesIO(files[0][1])):
            with unzipped(files[0][1], files[0][0]) as folder:
                return route(folder, **kw)
        with tempfile.TemporaryDirectory(prefix="attnscope-upload-") as tmp:
            folder = Path(tmp) / FOLDER
            folder.mkdir()
            return route(_written(files, folder), **kw)


def _written(files: Sequence[tuple[str, bytes]], folder: Path) -> Path:
    """Write the files into `folder`; what to import: the folder (config.json among them) or the one checkpoint."""
    names = []
    for name, data in files:
        safe = Path(name).name
        if not safe or safe in (".", ".."):
            raise CheckpointError(f"{name!r} is not a file name")
        (folder / safe).write_bytes(data)
        names.append(safe)
    if "config.json" in names:
        return folder
    checkpoints = [n for n in names if n.endswith((".pt", ".pth", ".bin", ".ckpt"))]
    if len(checkpoints) != 1:
        raise CheckpointError("upload a Hugging Face folder's files (with config.json), a zip of the folder, or one "
                              f"fairseq / OpenNMT-py checkpoint with its dictionaries (got {', '.join(names[:6])})")
    return folder / checkpoints[0]

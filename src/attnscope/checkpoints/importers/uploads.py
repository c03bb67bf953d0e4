"""Uploaded files (a folder's files together, or one zip of it) as a folder on disk, then imported.

Names are reduced to their last component, so no upload writes outside its temporary folder.
"""
from __future__ import annotations

import tempfile
import zipfile
from io import BytesIO
from pathlib import Path
from typing import Any, Sequence

from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.importers import import_any
from attnscope.checkpoints.importers.hf_files import unzip
from attnscope.checkpoints.importing import Imported

MAX_BYTES = 4 * 2**30  # all files together


def import_uploaded(files: Sequence[tuple[str, bytes]], **kw: Any) -> Imported:
    """Import uploaded (name, bytes) pairs: a zip of a folder, a Hugging Face folder's files (config.json among
    them), or a fairseq / OpenNMT-py checkpoint with the files beside it (dict.*.txt)."""
    if not files:
        raise CheckpointError("upload the model's files, or one zip of its folder")
    if sum(len(data) for _, data in files) > MAX_BYTES:
        raise CheckpointError(f"the uploaded files hold more than {MAX_BYTES // 2**30} GB")
    if len(files) == 1 and zipfile.is_zipfile(BytesIO(files[0][1])):
        return import_any(unzip(files[0][1], files[0][0]), **kw)
    folder = Path(tempfile.mkdtemp(prefix="attnscope-upload-"))
    names = []
    for name, data in files:
        safe = Path(name).name
        if not safe or safe in (".", ".."):
            raise CheckpointError(f"{name!r} is not a file name")
        (folder / safe).write_bytes(data)
        names.append(safe)
    if "config.json" in names:
        return import_any(folder, **kw)
    checkpoints = [n for n in names if n.endswith((".pt", ".pth", ".bin", ".ckpt"))]
    if len(checkpoints) != 1:
        raise CheckpointError("upload a Hugging Face folder's files (with config.json), a zip of the folder, or one "
                              f"fairseq / OpenNMT-py checkpoint with its dictionaries (got {', '.join(names[:6])})")
    return import_any(folder / checkpoints[0], **kw)

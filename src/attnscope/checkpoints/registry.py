"""Where checkpoints live: shipped (read-only), shared user models, and one session's uploads.

Uploads are validated completely (header, config, shapes, weights) from a temporary file
before they are kept, and stored under a sanitised name that can never escape its folder
or replace a shipped checkpoint.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Literal

from attnscope.checkpoints import checkpoint
from attnscope.checkpoints.boundary import cause
from attnscope.checkpoints.checkpoint import Bundle, CheckpointError
from attnscope.checkpoints.importers.torch_files import NOT_TORCH, is_torch_file

CHECKPOINTS_ENV = "ATTNSCOPE_CHECKPOINTS"
DEFAULT_CHECKPOINT = "multi30k-en-de.safetensors"


def checkout() -> Path:
    """The source checkout this package runs from: the nearest folder above it with app.py and checkpoints/
    (an editable install), else the current directory (an ordinary install, run from the checkout)."""
    here = Path(__file__).resolve()
    return next((p for p in here.parents if (p / "app.py").is_file() and (p / "checkpoints").is_dir()), Path.cwd())


def shipped_dir() -> Path:
    """The checkout's checkpoints/ folder (or $ATTNSCOPE_CHECKPOINTS)."""
    return Path(os.environ.get(CHECKPOINTS_ENV) or checkout() / "checkpoints")


def default_checkpoint() -> Path:
    return shipped_dir() / DEFAULT_CHECKPOINT


USER_MODELS_ENV = "ATTNSCOPE_USER_MODELS"
MAX_UPLOAD_BYTES = 200 * 1024 * 1024  # also streamlit's server.maxUploadSize (MB) in .streamlit/config.toml
Origin = Literal["shipped", "user", "session"]


def user_dir() -> Path:
    """Shared folder of trained and saved uploaded models ($ATTNSCOPE_USER_MODELS, or the checkout's user_models/)."""
    return Path(os.environ.get(USER_MODELS_ENV) or checkout() / "user_models")


@dataclass(frozen=True)
class Entry:
    """A checkpoint file and what its header says."""

    name: str
    path: Path
    origin: Origin
    bundle: Bundle
    size: int

    @property
    def parameters(self) -> int:
        return self.bundle.config.parameter_count()

    def sha256(self) -> str:
        digest = hashlib.sha256()
        with self.path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()


def entry(path: Path, origin: Origin) -> Entry:
    bundle, _ = checkpoint.read_bundle(path)
    return Entry(path.stem, path, origin, bundle, path.stat().st_size)


def scan(folder: Path, origin: Origin) -> tuple[list[Entry], list[str]]:
    """Valid checkpoints in `folder` and one message per file that is not."""
    entries, problems = [], []
    if not folder.is_dir():
        return entries, problems
    for path in sorted(folder.glob("*.safetensors")):
        try:
            entries.append(entry(path, origin))
        except CheckpointError as err:
            problems.append(str(err))
    return entries, problems


def safe_name(filename: str) -> str:
    """A file stem made only of letters, digits, '-', '_' and '.', without any directory part."""
    stem = Path(filename.replace("\\", "/")).name
    stem = stem[: -len(".safetensors")] if stem.endswith(".safetensors") else Path(stem).stem
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip(".-")[:80]
    if not stem:
        raise CheckpointError(f"the file name {filename} has no usable characters; rename it and upload again")
    return stem


def identical(data: bytes, entries: Iterable[Entry]) -> Entry | None:
    """The installed checkpoint whose file holds exactly `data` (same size and SHA-256), if any:
    uploading it again means "use that one", not a second copy under another name."""
    same_size = [e for e in entries if e.size == len(data)]
    digest = hashlib.sha256(data).hexdigest() if same_size else ""
    return next((e for e in same_size if e.sha256() == digest), None)


def validate_upload(data: bytes, filename: str) -> Path:
    """Write the bytes to a temporary file and load them fully; return the temp path if valid."""
    if len(data) > MAX_UPLOAD_BYTES:
        raise CheckpointError(f"{filename} is {len(data) / 1e6:.0f} MB; the limit is {MAX_UPLOAD_BYTES / 1e6:.0f} MB")
    if filename.lower().endswith((".pt", ".pth", ".bin", ".ckpt")):
        if not is_torch_file(data):
            raise CheckpointError(NOT_TORCH.format(name=filename))
        raise CheckpointError(f"{filename} is not a .safetensors file but a PyTorch file: import it with its vocabularies "
                              "under 'Import a model trained elsewhere' below")
    if not filename.lower().endswith(".safetensors"):
        raise CheckpointError(f"{filename} is not a .safetensors file; attnscope checkpoints are safetensors bundles")
    fd, tmp = tempfile.mkstemp(suffix=".safetensors")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    try:
        checkpoint.load(tmp, check_finite=True)  # a file from outside: its record of its own weights is not trusted
    except Exception as err:  # the upload's boundary: the temporary file goes, the user gets one sentence
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, CheckpointError):
            raise CheckpointError(str(err).replace(Path(tmp).name, filename)) from None
        raise CheckpointError(f"{filename} could not be opened ({cause(err)})") from err
    return Path(tmp)


def store(tmp: Path, filename: str, folder: Path, taken: set[str]) -> Path:
    """Move a validated file into `folder` under a safe name that is not taken (or shipped)."""
    name = safe_name(filename)
    reserved = {p.stem for p in shipped_dir().glob("*.safetensors")} | taken
    if name in reserved:
        raise CheckpointError(f"a checkpoint named {name} already exists; rename the file and upload again")
    folder.mkdir(parents=True, exist_ok=True)
    target = (folder / f"{name}.safetensors").resolve()
    if target.parent != folder.resolve():
        raise CheckpointError(f"refusing to store {filename} outside the models folder")
    checkpoint.atomic_write(target, lambda out: shutil.copyfile(tmp, out))
    tmp.unlink(missing_ok=True)
    return target


def delete(path: Path) -> None:
    """Delete a user checkpoint; shipped ones are read-only."""
    if path.resolve().parent == shipped_dir().resolve():
        raise CheckpointError(f"{path.stem} is a shipped checkpoint and cannot be deleted")
    path.unlink()

"""A session's own folder of uploaded checkpoints (an upload can be 300 MB), removed when it is no longer anyone's.

The folder is named after the server process that made it (`attnscope-session-<pid>-...`). Its holder lives in
the session's state: when the session ends, its state is dropped and the holder's finalizer removes the folder;
when the server stops, the interpreter runs the finalizers still pending. A killed server runs nothing, so a
server that starts removes the folders whose process is gone (sweep).
"""
from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path

PREFIX = "attnscope-session-"


@dataclass(eq=False)
class SessionFolder:
    """A folder that lasts as long as this object (kept in one session's state) or the process, whichever is shorter."""

    path: Path

    def __post_init__(self) -> None:
        weakref.finalize(self, shutil.rmtree, str(self.path), True)  # also at exit; must not hold `self`


def new_folder(root: Path | None = None) -> SessionFolder:
    """A fresh session folder under `root` (default: the system's temporary folder), named after this process."""
    return SessionFolder(Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=root)))


def alive(pid: int) -> bool:
    """Whether process `pid` exists (one of another user counts: it is not ours to clean up after)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep(root: Path | None = None) -> list[Path]:
    """Remove the session folders under `root` whose server process is gone; the folders removed."""
    removed = []
    for folder in Path(root or tempfile.gettempdir()).glob(f"{PREFIX}*"):
        pid = folder.name[len(PREFIX):].split("-", 1)[0]
        if folder.is_dir() and pid.isdigit() and not alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed

"""Session folders of uploads go with their session, their server, or, after a kill, at the next server's start."""
from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

from attnscope.checkpoints.session_files import PREFIX, new_folder, sweep


def test_a_folder_goes_with_its_holder(tmp_path: Path) -> None:
    folder = new_folder(tmp_path)
    (folder.path / "upload.safetensors").write_bytes(b"x" * 1000)
    assert folder.path.name.startswith(f"{PREFIX}{os.getpid()}-")
    path = folder.path
    del folder
    gc.collect()
    assert not path.exists()


def test_a_folder_goes_when_its_process_exits(tmp_path: Path) -> None:
    """The finalizer also runs at interpreter exit (a server stopped with Ctrl+C or SIGTERM)."""
    code = ("import sys; from pathlib import Path; from attnscope.checkpoints.session_files import new_folder; "
            "f = new_folder(Path(sys.argv[1])); (f.path / 'u').write_text('x'); print(f.path)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True,
                         env=os.environ | {"PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.stdout.strip() and not Path(out.stdout.strip()).exists()


def test_the_sweep_removes_only_the_folders_of_processes_that_are_gone(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a killed server: its pid is free
    orphan = tmp_path / f"{PREFIX}{dead.pid}-abc"
    (orphan / "sub").mkdir(parents=True)
    mine = new_folder(tmp_path)
    other = tmp_path / f"{PREFIX}notapid"  # not named by this scheme: not ours to judge
    other.mkdir()
    assert sweep(tmp_path) == [orphan]
    assert not orphan.exists() and mine.path.is_dir() and other.is_dir()

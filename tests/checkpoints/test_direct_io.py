"""Files written in aligned chunks: the bytes are on the disk as written, whatever their length and however they
come, and a file system that refuses O_DIRECT gets the same file through the page cache."""
from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from attnscope.checkpoints import direct_io
from attnscope.checkpoints.direct_io import CHUNK, Sink

DATA = bytes(range(256)) * ((2 * CHUNK + 5000) // 256) + b"odd"  # two chunks and a part of a page


def _write(path: Path, pieces: list[bytes]) -> None:
    with Sink(path) as sink:
        for piece in pieces:
            sink.put(memoryview(piece))
        sink.finish()


def test_the_file_holds_the_bytes_as_written_and_has_their_length(tmp_path: Path) -> None:
    path = tmp_path / "data.bin"
    _write(path, [DATA[:10], DATA[10:CHUNK + 7], DATA[CHUNK + 7:]])
    assert path.stat().st_size == len(DATA) and path.read_bytes() == DATA
    _write(path, [b"short"])  # one part of a page: padded, then cut back
    assert path.read_bytes() == b"short"


@pytest.mark.parametrize("refuses", ["open", "write"])
def test_a_file_system_that_refuses_direct_io_gets_the_same_file_through_the_page_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refuses: str) -> None:
    """tmpfs refuses O_DIRECT when a file is opened, some file systems only when it is written."""
    direct = direct_io.DIRECT or 0x4000  # a flag this test can recognise on any system
    monkeypatch.setattr(direct_io, "DIRECT", direct)
    real_open, real_write, direct_fds = os.open, os.write, set()

    def opened(path: str, flags: int, *mode: int) -> int:
        if refuses == "open" and flags & direct:
            raise OSError(errno.EINVAL, "Invalid argument")
        fd = real_open(path, flags & ~direct, *mode)
        (direct_fds.add if flags & direct else direct_fds.discard)(fd)
        return fd

    def written(fd: int, data: memoryview) -> int:
        if fd in direct_fds:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_write(fd, data)

    monkeypatch.setattr(os, "open", opened)
    monkeypatch.setattr(os, "write", written)
    path = tmp_path / "cached.bin"
    _write(path, [DATA])
    assert path.read_bytes() == DATA

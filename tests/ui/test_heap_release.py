"""ui/memory.py: the app server gives freed heap back to the system after each script run (glibc)."""
from __future__ import annotations

import platform
import re
from pathlib import Path

import pytest
import torch

from attnscope.ui import memory
from tests.support import ROOT


def resident_anon_kb() -> int:
    return int(re.search(r"RssAnon:\s*(\d+)", Path("/proc/self/status").read_text()).group(1))  # type: ignore[union-attr]


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_release_returns_freed_heap_pages() -> None:
    """Many mid-sized blocks (below glibc's mmap threshold, so they live on the heap) freed while a small one
    allocated after them stays: the heap cannot shrink from the top, only malloc_trim hands the pages back."""
    memory.limit_arenas()
    blocks = [torch.empty(16_000) for _ in range(2_000)]  # 64 KB each, ~128 MB in all
    for b in blocks:
        b.fill_(1.0)  # touched: resident
    pinned = torch.ones(16)  # noqa: F841 (keeps the heap's top in use)
    del blocks
    before = resident_anon_kb()
    memory.release()
    assert resident_anon_kb() < before - 32_000


def test_the_app_releases_after_every_run_and_limits_arenas() -> None:
    app = (ROOT / "app.py").read_text()
    assert "memory.limit_arenas()" in app
    assert app.rstrip().endswith("memory.release()")

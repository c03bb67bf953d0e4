"""Fixtures for every test: one CPU thread, and the compute device a test runs on (CPU always, CUDA when present)."""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

import pytest
import torch

# Tests run tiny models, which gain nothing from intra-op threads; on a busy machine the thread hand-offs
# cost far more than the arithmetic (a 1-epoch toy run measured 200 s with 2 threads under load).
# Subprocesses (the CLI, torchrun, the browser tests' server) read this; this process is set below.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# cuBLAS is only deterministic with a fixed workspace; it reads this when CUDA starts (no effect on a CPU).
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

HAS_CUDA = torch.cuda.is_available()
CUDA = pytest.param("cuda", marks=[pytest.mark.cuda, pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU on this machine")])


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread() -> Iterator[None]:
    """Every test runs torch on one intra-op thread (see OMP_NUM_THREADS above); restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextmanager
def deterministic_cuda() -> Iterator[None]:
    """Deterministic kernels and full fp32 matmuls (no TF32) while a CUDA test runs; settings restored after."""
    before = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark, torch.are_deterministic_algorithms_enabled(),
              torch.is_deterministic_algorithms_warn_only_enabled(), torch.get_float32_matmul_precision())
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    torch.use_deterministic_algorithms(True, warn_only=True)  # warn (not fail) where an op has no deterministic kernel
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = before[0], before[1]
        torch.use_deterministic_algorithms(before[2], warn_only=before[3])
        torch.set_float32_matmul_precision(before[4])


@pytest.fixture(params=["cpu", CUDA])
def device(request: pytest.FixtureRequest) -> Iterator[torch.device]:
    """The device a model test runs on: the CPU, and CUDA (marked `cuda`) where a GPU is present."""
    if request.param == "cpu":
        yield torch.device("cpu")
        return
    with deterministic_cuda():
        yield torch.device("cuda")


"""PyTorch files read from disk: torch.save's zip format memory-mapped (never its bytes and then its tensors), the
legacy pickle read whole, both without running code."""
from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch

from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.importers.torch_files import read_state_dict

STATE = {"encoder.weight": torch.randn(64, 32), "encoder.bias": torch.randn(64)}


def _mapped_from(path: Path, tensor: torch.Tensor) -> bool:
    """Whether the tensor's memory lies in a mapping of `path` (/proc/self/maps)."""
    address = tensor.data_ptr()
    for line in Path("/proc/self/maps").read_text().splitlines():
        if line.endswith(str(path.resolve())):
            low, high = (int(n, 16) for n in line.split()[0].split("-"))
            if low <= address < high:
                return True
    return False


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads the process's mappings (Linux)")
def test_a_zip_format_file_is_memory_mapped_and_its_bytes_never_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "pytorch_model.bin"
    torch.save(STATE, path)
    read = read_state_dict(path, path.name)
    assert all(torch.equal(read[k], v) for k, v in STATE.items())
    assert _mapped_from(path, read["encoder.weight"])
    assert read_state_dict(path.read_bytes(), path.name).keys() == STATE.keys()  # an upload's bytes still read


def test_a_legacy_pickle_is_read_whole_and_other_files_are_refused_as_before(tmp_path: Path) -> None:
    legacy = tmp_path / "old.pt"
    torch.save(STATE, legacy, _use_new_zipfile_serialization=False)
    assert torch.equal(read_state_dict(legacy, legacy.name)["encoder.bias"], STATE["encoder.bias"])
    text = tmp_path / "notes.pt"
    text.write_text("hello")
    with pytest.raises(CheckpointError, match="notes.pt is not a PyTorch checkpoint"):
        read_state_dict(text, text.name)
    buffer = io.BytesIO()
    torch.save(torch.nn.Linear(2, 2), buffer)
    pickled = tmp_path / "whole.pt"
    pickled.write_bytes(buffer.getvalue())
    with pytest.raises(CheckpointError, match="whole pickled model"):
        read_state_dict(pickled, pickled.name)

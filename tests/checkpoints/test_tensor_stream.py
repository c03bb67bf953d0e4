"""Safetensors read and written one tensor at a time: the same files as safetensors' own functions, damaged files
refused in one sentence, and no second copy of the weights in memory (measured in a child process)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from attnscope.checkpoints.tensor_stream import ROWS, read_header, read_tensors, write_tensors

TENSORS = {"w": torch.randn(3, 5), "half": torch.randn(7).half(), "brain": torch.randn(2, 3).bfloat16(),
           "ids": torch.arange(6).reshape(2, 3), "mask": torch.tensor([True, False, True]), "scalar": torch.tensor(2.5),
           "empty": torch.zeros(0, 4)}


def test_files_round_trip_with_safetensors_own_reader_and_writer(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours.safetensors", tmp_path / "theirs.safetensors"
    write_tensors(ours, TENSORS, {"note": "hi"})
    save_file(TENSORS, str(theirs), metadata={"note": "hi"})
    for read in (load_file(str(ours)), read_tensors(ours), read_tensors(theirs)):
        assert read.keys() == TENSORS.keys()
        for name, tensor in TENSORS.items():
            assert read[name].dtype == tensor.dtype and torch.equal(read[name], tensor), name
    entries, meta, start = read_header(ours)
    assert meta == {"note": "hi"} and start % 8 == 0 and entries["w"].shape == (3, 5) and entries["w"].elements == 15


def test_floating_point_tensors_are_cast_on_writing_and_on_reading(tmp_path: Path) -> None:
    path = tmp_path / "half.safetensors"
    write_tensors(path, TENSORS, {}, cast=torch.float16)
    stored = load_file(str(path))
    assert stored["w"].dtype == stored["brain"].dtype == torch.float16 and stored["ids"].dtype == torch.int64
    back = read_tensors(path, ["w", "ids"], dtype=torch.float32)
    assert back.keys() == {"w", "ids"} and back["w"].dtype == torch.float32 and back["ids"].dtype == torch.int64
    assert torch.allclose(back["w"], TENSORS["w"], atol=1e-2)


def test_tensors_named_in_columns_are_read_column_major_with_their_values(tmp_path: Path) -> None:
    """A 2-d tensor of more rows than one block (ROWS), stored as float16 and read as float32, comes back with the
    same values in column-major memory; the others, and a 1-d tensor named in columns, come back as ever."""
    tall = torch.randn(ROWS * 2 + 5, 3)
    path = tmp_path / "t.safetensors"
    write_tensors(path, TENSORS | {"tall": tall}, {}, cast=torch.float16)
    back = read_tensors(path, dtype=torch.float32, columns={"tall", "half", "w"})
    assert back["tall"].dtype == torch.float32 and back["tall"].stride() == (1, tall.shape[0])
    assert torch.equal(back["tall"], tall.half().float()) and back["w"].stride() == (1, 3)
    assert torch.equal(back["w"], TENSORS["w"].half().float()) and back["half"].stride() == (1,)
    assert torch.equal(back["ids"], TENSORS["ids"]) and back["ids"].is_contiguous()


def _header(path: Path, header: object) -> Path:
    text = json.dumps(header).encode()
    path.write_bytes(len(text).to_bytes(8, "little") + text + bytes(16))
    return path


@pytest.mark.parametrize("damage, message", [
    (lambda p: p.write_bytes(b"12"), "header length"),
    (lambda p: p.write_bytes((10**12).to_bytes(8, "little") + b"{}"), "header length"),
    (lambda p: p.write_bytes((4).to_bytes(8, "little") + b"{{{{"), "not JSON"),
    (lambda p: _header(p, [1]), "not a JSON object"),
    (lambda p: _header(p, {"t": {"dtype": "F8", "shape": [2], "data_offsets": [0, 2]}}), "no dtype attnscope reads"),
    (lambda p: _header(p, {"t": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}), "negative"),
    (lambda p: _header(p, {"t": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}), "do not fit its shape"),
    (lambda p: _header(p, {"t": {"dtype": "F32", "shape": [8], "data_offsets": [0, 32]}}), "do not fit its shape"),
])
def test_a_damaged_header_is_refused_in_one_sentence_before_anything_is_read(tmp_path: Path, damage,
                                                                            message: str) -> None:
    path = tmp_path / "bad.safetensors"
    damage(path)
    with pytest.raises(ValueError, match=message):
        read_tensors(path)


PEAK = r"""
import re, sys, torch
from attnscope.checkpoints.tensor_stream import read_tensors, write_tensors
peak = lambda: int(re.search(r"VmHWM:\s*(\d+)", open("/proc/self/status").read()).group(1)) * 1024
read_tensors(sys.argv[1], ["small"], torch.float32)  # everything imported and warmed up
before = peak()
tensors = read_tensors(sys.argv[1], dtype=torch.float32)
read = peak() - before
write_tensors(sys.argv[2], tensors, {}, cast=torch.float16)
print(read, peak() - before - read)
"""


def test_reading_and_writing_hold_the_weights_once_and_one_tensor_more(tmp_path: Path) -> None:
    """A float16 file of 48 MB read as float32 (96 MB) grows the peak by about the float32 weights and one float16
    tensor (mapping the file beside the copies would add the file's 48 MB); writing them back as float16 converts one
    tensor at a time (converting all first would add 48 MB). Each peak is the process's own (VmHWM: an exec'd
    child's rusage starts from its parent's peak), the least of three runs (one run's allocator once held 38 MB more)."""
    tensors = {f"t{i}": torch.randn(1000, 1000).half() for i in range(24)} | {"small": torch.zeros(4).half()}
    source, out = tmp_path / "half.safetensors", tmp_path / "out.safetensors"
    write_tensors(source, tensors, {})
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"), "PATH": ""}
    runs = [subprocess.run([sys.executable, "-c", PEAK, str(source), str(out)], capture_output=True, text=True,
                           check=True, env=env).stdout.split() for _ in range(3)]
    read, written = (min(int(run[i]) for run in runs) for i in (0, 1))  # a copy made every time shows in the least
    weights, one = 24 * 4_000_000, 2_000_000
    assert read < weights + 2 * one + 8 * 2**20, read / 2**20
    assert written < 2 * one + 8 * 2**20, written / 2**20
    assert torch.equal(load_file(str(out))["t3"], tensors["t3"])

"""Finiteness and fp16 overflow: exact whatever the sum does (NaN, infinities of either sign, finite values whose
sum overflows), and a big model built on the meta device without importing torch._dynamo."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attnscope.checkpoints.finite import all_finite, first_not_finite, half_overflow

BIG = torch.finfo(torch.float32).max


@pytest.mark.parametrize("values, finite", [
    ([1.0, -2.0], True), ([BIG, BIG, -1.0], True), ([-BIG, -BIG], True), ([1.0, float("nan")], False),
    ([float("inf"), 1.0], False), ([float("-inf"), float("inf")], False), ([], True)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_all_finite_is_exact_even_where_the_sum_overflows(values: list[float], finite: bool,
                                                          dtype: torch.dtype) -> None:
    tensor = torch.tensor(values, dtype=torch.float32).to(dtype)
    assert all_finite(tensor) is finite
    assert all_finite(torch.tensor([65504.0, 65504.0], dtype=torch.float16))  # a float16 sum that overflows
    assert all_finite(torch.tensor([3, 4]))  # integers are always finite


def test_first_not_finite_names_the_tensor_and_half_overflow_counts_the_weights() -> None:
    state = {"a": torch.zeros(3), "b": torch.tensor([1.0, float("nan")]), "c": torch.tensor([7e4, -7e4, 1.0])}
    assert first_not_finite(state) == "b" and first_not_finite({"a": state["a"]}) is None
    said = half_overflow(state)
    assert said is not None and "2 weights infinite" in said and "first in c" in said
    assert half_overflow({"a": torch.tensor([65504.0, -65504.0])}) is None


BUILD = """
import sys
from attnscope.checkpoints.checkpoint import assemble, unique_state
from attnscope.model.config import ModelConfig
from attnscope.model.transformer import Transformer
config = ModelConfig(src_vocab_size=40, tgt_vocab_size=40, d_model=16, n_heads=2, n_encoder_layers=1,
                     n_decoder_layers=1, d_ff=32, positional="learned")
model = assemble(config, unique_state(Transformer(config)), on_meta=True)
print("torch._dynamo" in sys.modules, model.tgt_embed.weight.device)
"""


def test_building_on_the_meta_device_does_not_import_torch_dynamo() -> None:
    """Its meta kernel for normal_ (nn.Embedding's initialisation) would: 1.2-1.5 s of CPU a big import."""
    run = subprocess.run([sys.executable, "-c", BUILD], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"), "PATH": ""})
    assert run.stdout.split() == ["False", "cpu"]

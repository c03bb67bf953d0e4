"""Costs the app pays on every start or step, kept away: no pandas at import, contiguous cached K/V."""
from __future__ import annotations

import subprocess
import sys

import torch

from attnscope.model.config import BOS_ID
from attnscope.model.transformer import DecoderCache
from tests.engine_fixtures import random_source, tiny_model
from tests.support import ROOT


def test_recording_and_translating_do_not_import_pandas() -> None:
    code = ("import sys, attnscope, attnscope.engine.record, attnscope.engine.translator, attnscope.ui.state, "
            "attnscope.ui.widgets, attnscope.ui.compare; print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip().splitlines()[-1] == "False", out.stderr


def test_cached_cross_attention_keys_and_values_are_contiguous() -> None:
    model = tiny_model(0)
    memory, mask = model.encode(torch.tensor([random_source(0)]))
    cache = DecoderCache.empty(len(model.decoder))
    model.next_logits(torch.tensor([[BOS_ID]]), memory, mask, cache)
    assert all(layer.cross_k.is_contiguous() and layer.cross_v.is_contiguous() for layer in cache.layers)

"""Costs the app pays on every start or step, kept away: no pandas at import, contiguous cached K/V."""
from __future__ import annotations

import subprocess
import sys

import torch

from attnscope.model.config import BOS_ID
from attnscope.model.transformer import DecoderCache
from tests.engine_fixtures import random_source, tiny_model
from tests.support import CEILING, ROOT

# Modules on the way to every page and step (recording, translating, the step fragment's figures), and the
# modules that build tables only on request: none may import pandas (~70 MB, ~0.5 s) when imported.
# Streamlit itself imports pandas only when a table is drawn, so the ui modules are checked too.
NO_PANDAS = ("attnscope", "attnscope.records.attention", "attnscope.engine.decoding.translator",
             "attnscope.engine.recording.capture", "attnscope.engine.analysis.heads",
             "attnscope.engine.inside.anatomy", "attnscope.engine.attribution.agreement",
             "attnscope.engine.analysis.dataset", "attnscope.viz.attribution", "attnscope.ui.query", "attnscope.ui.cache",
             "attnscope.ui.models", "attnscope.ui.results", "attnscope.ui.persist", "attnscope.ui.url",
             "attnscope.ui.values_switch", "attnscope.ui.widgets", "attnscope.ui.state", "attnscope.ui.translate_page",
             "attnscope.ui.figures", "attnscope.ui.step_page", "attnscope.ui.attribution.sentence",
             "attnscope.ui.attribution.samples", "attnscope.ui.attribution.page", "attnscope.ui.sample_runs",
             "attnscope.ui.heads_page", "attnscope.ui.records",
             "attnscope.ui.train.form", "attnscope.ui.train.runs", "attnscope.ui.train.progress", "attnscope.ui.navigation",
             "attnscope.ui.tables")


def test_recording_translating_and_stepping_do_not_import_pandas() -> None:
    code = ("import importlib, sys\n"
            f"for name in {NO_PANDAS!r}:\n"
            "    importlib.import_module(name)\n"
            "    if 'pandas' in sys.modules:\n"
            "        print(name)\n"
            "        break\n"
            "else:\n"
            "    print('none')\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=CEILING,
                         env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip().splitlines()[-1] == "none", f"importing this pulled in pandas: {out.stdout} {out.stderr}"


def test_cached_cross_attention_keys_and_values_are_contiguous() -> None:
    model = tiny_model(0)
    source = model.encode(torch.tensor([random_source(0)]))
    cache = DecoderCache.empty(len(model.decoder))
    model.next_logits(torch.tensor([[BOS_ID]]), source, cache)
    assert all(layer.cross_k.is_contiguous() and layer.cross_v.is_contiguous() for layer in cache.layers)

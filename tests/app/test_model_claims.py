"""Every page's statements about the model are true of the model: each page runs on imported models of the
layouts attnscope reads (Marian: [sin | cos] halves, here with unscaled embeddings; BART: learned positions
with an offset and a LayerNorm on the embeddings; NLLB: fairseq's [sin | cos] frequencies, pre-LN; nn.Transformer:
the paper's interleaved sinusoids), and
the test reads what the page says (text, captions, HTML views, chart titles and legends) and checks it."""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from attnscope.checkpoints import checkpoint
from attnscope.checkpoints.importers.huggingface import import_hf
from attnscope.checkpoints.importers.state_dict import import_module
from attnscope.model.config import ModelConfig
from tests.byom_models import WORDS, Seq2SeqTransformer, m1_vocab
from tests.checkpoints import hf_fixtures
from tests.support import CEILING, ROOT, page_script, page_scripts, shown

PAGES = page_scripts(leave_out=("Head atlas", "Train", "Checkpoints"))
SENTENCES = {"marian": "A man rides a red bike.", "bart": "A man rides a red bike.", "nllb": "A man rides a red bike.",
             "torch": "Zwei Hunde laufen ."}


def _hf(family: str, folder: Path, **changes: object) -> tuple:
    hf_fixtures.FAMILIES[family](folder)
    imported = import_hf(folder, src_lang=hf_fixtures.LANGS[family][0], tgt_lang=hf_fixtures.LANGS[family][1])
    return imported.model, dataclasses.replace(imported.bundle, config=dataclasses.replace(imported.bundle.config, **changes))


def _torch() -> tuple:
    import torch

    torch.manual_seed(0)
    model = Seq2SeqTransformer(2, 2, 32, 4, len(m1_vocab(WORDS)), len(m1_vocab(WORDS)), 64, dropout=0.0).eval()
    imported = import_module(model, m1_vocab(WORDS), m1_vocab(WORDS), source_framing="bos-eos")
    return imported.model, imported.bundle


@pytest.fixture(scope="module", params=["marian", "bart", "nllb", "torch"])
def imported(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A folder with one imported checkpoint; Marian's embeddings unscaled (opus-mt models exist both ways)."""
    folder = tmp_path_factory.mktemp(request.param)
    if request.param == "torch":
        model, bundle = _torch()
    else:
        model, bundle = _hf(request.param, folder, **({"embed_scale": False} if request.param == "marian" else {}))
    out = tmp_path_factory.mktemp("checkpoints")
    checkpoint.save(model, bundle, out / f"{request.param}.safetensors")
    return request.param, out


def page_text(app: AppTest) -> str:
    """Everything the page says in words: text elements, HTML views, chart titles, axis titles and legends."""
    parts = [shown(e) for kind in ("title", "header", "subheader", "markdown", "caption", "info", "success", "warning")
             for e in getattr(app, kind)]
    parts += [e.proto.body for e in app.get("html")]
    for chart in app.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        layout = spec["layout"]
        parts += [str(layout.get("title", {}).get("text", ""))]
        parts += [str(v.get("title", {}).get("text", "")) for k, v in layout.items() if k.startswith(("xaxis", "yaxis"))]
        parts += [str(trace.get("name", "")) for trace in spec["data"]]
    for frame in app.dataframe:
        parts += [frame.value.to_string()]
    return "\n".join(parts)


def false_claims(text: str, c: ModelConfig) -> list[str]:
    """The statements in `text` that this model's config contradicts."""
    wrong = []
    scaled = re.findall(r"[^\n]{0,40}(?:× ?√d_model|scaled by √)[^\n]{0,20}", text)
    if not c.embed_scale and scaled:
        wrong += [f"says embeddings are scaled: {s}" for s in scaled]
    if c.embed_scale and "not scaled" in text:
        wrong.append("says embeddings are not scaled")
    for diff in re.findall(r"Identical to the table above \(max difference ([0-9.e+-]+)\)", text):
        if float(diff) > 1e-4:
            wrong.append(f"says 'identical' with a difference of {diff}")
    for error in re.findall(r"max error ([0-9.e+-]+) \(float32 rounding\)", text):
        if float(error) > 1e-3:
            wrong.append(f"calls an error of {error} float32 rounding")
    used = re.search(r"This checkpoint uses \*\*(\w+)\*\*", text)
    if used and used.group(1) != c.positional:
        wrong.append(f"says {used.group(1)} positions, the model has {c.positional}")
    if c.positional == "learned" and re.search(r"\(sin, cos\) pair of PE", text):
        wrong.append("rotates sin/cos pairs of a learned table")
    if c.embed_norm and "sum: the first layer's input" in text:
        wrong.append("calls the sum the first layer's input, but a LayerNorm comes between")
    layers = re.search(r"(\d+)\+(\d+) layers · (\d+) heads · d_model (\d+)", text)
    if layers and tuple(map(int, layers.groups())) != (c.n_encoder_layers, c.n_decoder_layers, c.n_heads, c.d_model):
        wrong.append(f"sidebar says {layers.group(0)}")
    return wrong


def test_every_page_says_only_what_is_true_of_the_model(imported: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    family, folder = imported
    monkeypatch.setenv("ATTNSCOPE_CHECKPOINTS", str(folder))
    st.cache_data.clear()
    st.cache_resource.clear()
    config = checkpoint.read_bundle(next(folder.glob("*.safetensors")))[0].config
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=CEILING)
    app.session_state["sentence"] = SENTENCES[family]
    app.session_state["max_len"] = 6
    app.run()
    wrong: dict[str, list[str]] = {}
    for page in PAGES:
        app.switch_page(page).run()
        assert not app.exception, (page, [e.value for e in app.exception])
        text = page_text(app) + "\n" + "\n".join(shown(c) for c in app.sidebar.caption)
        if page == page_script("Inside one head"):
            app.session_state["inside_tab"] = "6 · Positional encodings (section 3.5)"
            text += "\n" + page_text(app.run())
            app.session_state["inside_tab"] = "1–5 · The head, step by step"
        wrong.update({page: found} if (found := false_claims(text, config)) else {})
    assert not wrong, "\n".join(f"{page}: {claim}" for page, claims in wrong.items() for claim in claims)

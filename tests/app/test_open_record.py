"""A record saved from the user's own code (M3, recorded with record_attention) opens in the app without a model."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from attnscope.engine.analysis.heads import head_stats
from attnscope.engine.recording.capture import record_attention
from attnscope.engine.recording.record_files import read_record
from tests.byom_models import M3Seq2Seq, m3_greedy
from tests.support import explorers, page_script, readable_tables, shown, translation_shown


def m3_record():  # noqa: ANN201
    torch.manual_seed(0)
    model = M3Seq2Seq(12, 12).eval()
    src = torch.tensor([[1, 5, 6, 7, 2]])
    with record_attention(model) as rec:
        ids = m3_greedy(model, src, 1, 2, 5)
    return rec.to_record(["<bos>", "Zwei", "Hunde", "laufen", "<eos>"], ["<bos>", *[f"y{i}" for i in ids[:-1]]])


@pytest.mark.parametrize("as_json", [False, True])
def test_a_saved_record_is_shown_on_translate_until_closed(checkpoints_page: AppTest, as_json: bool) -> None:
    record = m3_record()
    data = record.to_json({"model": "M3"}).encode() if as_json else record.to_npz({"model": "M3"})
    assert read_record(data, "r").source_tokens == record.source_tokens
    checkpoints_page.file_uploader(key="open_record_file").upload("m3.json" if as_json else "m3.npz", data).run()
    assert any("Opened m3" in shown(s) for s in checkpoints_page.success)
    checkpoints_page.switch_page(page_script("Translate")).run()
    assert not checkpoints_page.exception
    assert any("Showing the saved record" in shown(i) for i in checkpoints_page.info)
    (sent,) = explorers(checkpoints_page)  # every kind in the browser, none drawn twice
    assert not checkpoints_page.get("plotly_chart")
    assert sent.header["source"] == list(record.source_tokens)  # the record's tokens, not a translation
    assert all(np.allclose(sent.arrays[k], record.array(k), rtol=0, atol=1e-6)  # JSON keeps 6 decimals
               for k in ("encoder", "decoder", "cross"))
    assert translation_shown(checkpoints_page).text == " ".join(record.target_tokens)  # no text: its tokens, headlined
    checkpoints_page.switch_page(page_script("Positional encoding")).run()  # a view that needs a model says so
    assert not checkpoints_page.exception and any("runs the active checkpoint" in shown(c) for c in checkpoints_page.caption)
    checkpoints_page.switch_page(page_script("Translate")).run()
    checkpoints_page.button(key="close_record").click().run()
    assert not any("Showing the saved record" in shown(i) for i in checkpoints_page.info)


def test_a_saved_record_follows_the_sidebars_kind_and_headlines_its_translation(checkpoints_page: AppTest) -> None:
    record = m3_record()
    data = record.to_npz({"sentence": "Zwei Hunde laufen", "translation": "two dogs run", "tgt_lang": "en"})
    checkpoints_page.file_uploader(key="open_record_file").upload("m3.npz", data).run()
    checkpoints_page.session_state["kind"] = "cross"  # the sidebar says cross-attention
    page = checkpoints_page.switch_page(page_script("Translate")).run()
    shown_now = translation_shown(page)
    assert shown_now.text == "two dogs run" and ">Translation (en)<" in shown_now.markup
    assert explorers(page)[0].selection["kind"] == "cross"  # cross-attention, not the encoder's
    page.session_state["kind"] = "encoder"
    page.run()
    assert explorers(page)[0].selection["kind"] == "encoder"


def test_a_file_that_is_not_a_record_is_refused_in_one_sentence(checkpoints_page: AppTest) -> None:
    checkpoints_page.file_uploader(key="open_record_file").upload("x.json", b'{"source_tokens": []}').run()
    assert any("Record rejected" in shown(e) and "lacks target_tokens" in shown(e) for e in checkpoints_page.error)
    checkpoints_page.file_uploader(key="open_record_file").upload("y.npz", b"PK\x03\x04broken").run()
    assert any("not an attnscope attention record" in shown(e) for e in checkpoints_page.error)


def test_an_opened_record_is_stepped_through_and_its_heads_read_without_a_model(checkpoints_page: AppTest) -> None:
    record = m3_record()
    checkpoints_page.file_uploader(key="open_record_file").upload("m3.npz", record.to_npz()).run()
    app = checkpoints_page.switch_page(page_script("Step through decoding")).run()
    assert not app.exception
    assert any("Showing the saved record m3.npz (step by step, read-only)" in shown(i) and "need a live model" in shown(i)
               for i in app.info)
    (sent,) = explorers(app)
    assert sent.header["mode"] == "step" and sent.header["steps"] is None  # no probabilities: the record has none
    for kind in ("encoder", "decoder", "cross"):
        assert np.array_equal(sent.arrays[kind], record.array(kind))
    assert not app.get("plotly_chart")  # no probabilities, no forcing, no beam tree: those need a model

    app.switch_page(page_script("Heads & layers")).run()
    assert not app.exception
    assert any("(heads and layers, read-only)" in shown(i) for i in app.info)
    assert len(explorers(app)) == 1 and explorers(app)[0].header["mode"] == "heatmap"
    table = app.dataframe[0].value
    want = head_stats(record).round(3)
    assert list(table["attention"]) == list(want["kind"]) and np.allclose(table["entropy (nats)"], want["entropy"])
    assert readable_tables(app)  # shown in words, each column explained
    assert len(table) == sum(record.n_layers(k) * record.n_heads for k in ("encoder", "decoder", "cross"))

    app.button(key="close_record_heads").click().run()  # closed: the page runs the active checkpoint again
    assert not any("Showing the saved record" in shown(i) for i in app.info)
    assert "Ablation" in [t.label for t in app.tabs]


def test_a_record_whose_weights_cannot_be_attention_is_refused(checkpoints_page: AppTest) -> None:
    from attnscope.records.attention import AttentionRecord
    record = m3_record()
    cross = record.cross.copy()
    cross[0, 0, 0, 0] = np.nan
    odd = AttentionRecord(record.source_tokens, record.target_tokens, record.encoder, record.decoder, cross)
    checkpoints_page.file_uploader(key="open_record_file").upload("odd.npz", odd.to_npz()).run()
    assert not checkpoints_page.success and not checkpoints_page.exception
    assert [shown(e) for e in checkpoints_page.error] == [
        "Record rejected: odd.npz is not attention: its cross weights hold 1 NaN or infinite values (attention weights "
        "are softmax outputs, finite and from 0 to 1)"]


@pytest.mark.parametrize("as_json", [False, True])
def test_an_opened_translation_labels_cross_rows_by_the_token_each_step_produced(checkpoints_page: AppTest,
                                                                                  as_json: bool) -> None:
    """As the live page does (y1 .. <eos>), not by the decoder's input (<bos> y1 ..): the NPZ's meta carries the
    produced tokens, the JSON its steps."""
    record = m3_record()
    produced = [*record.target_tokens[1:], "<eos>"]
    if as_json:
        payload = json.loads(record.to_json({"translation": "t"}))
        payload["steps"] = [{"step": i, "token": t} for i, t in enumerate(produced)]
        data, name = json.dumps(payload).encode(), "m3.json"
    else:
        data, name = record.to_npz({"translation": "t", "output_tokens": produced}), "m3.npz"
    checkpoints_page.file_uploader(key="open_record_file").upload(name, data).run()
    checkpoints_page.session_state["kind"] = "cross"
    page = checkpoints_page.switch_page(page_script("Translate")).run()
    (sent,) = explorers(page)
    assert sent.header["output"] == produced  # the explorer labels cross-attention rows by them
    assert not any("output_tokens" in shown(c) for c in page.caption)


def test_a_record_nested_thousands_of_levels_deep_is_refused_in_one_sentence(checkpoints_page: AppTest) -> None:
    deep = b'{"source_tokens": ["a"], "target_tokens": ["b"], "encoder": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    checkpoints_page.file_uploader(key="open_record_file").upload("deep.json", deep).run()
    assert not checkpoints_page.exception
    (error,) = [shown(e) for e in checkpoints_page.error]
    assert error == "Record rejected: deep.json is not an attention record: its JSON is nested 5,001 levels deep, " \
                    "more than the 64 attnscope reads"

"""AppTest journeys on the Attribution page (toy reversal checkpoint). Only the open tab is computed, so a
journey opens the tab it looks at (session_state['attr_tab'], as a click on the tab sets it)."""
from __future__ import annotations

import base64
import json
import re

import numpy as np
from streamlit.testing.v1 import AppTest

from tests.support import explorers, page_script, readable_tables, shown, translation_shown

PAGE = page_script("Attribution")


def figures(app: AppTest) -> dict[str, dict]:
    out = {}
    for chart in app.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        out[spec["layout"].get("title", {}).get("text", "")] = spec
    return out


def values(data: object) -> np.ndarray:
    """A figure array from its JSON: a list, or plotly's typed-array form {"dtype", "bdata"}."""
    if isinstance(data, dict):
        return np.frombuffer(base64.b64decode(data["bdata"]), dtype=data["dtype"]).astype(float)
    return np.asarray(data, dtype=float)


def open_page(app: AppTest, sentence: str = "a b c d", tab: str | None = None) -> AppTest:
    app.session_state["sentence"] = sentence
    app.session_state["ig_points"] = 16  # the fewest path points: keeps the page quick on the toy model
    if tab:
        app.session_state["attr_tab"] = tab
    app.run()
    return app.switch_page(PAGE).run()


def open_tab(app: AppTest, tab: str) -> AppTest:
    app.session_state["attr_tab"] = tab
    return app.run()


def toy_translation(toy_checkpoint_dir, sentence: str = "a b c d"):
    from attnscope.checkpoints import checkpoint
    from attnscope.engine.decoding.translator import Translator

    tr = Translator(*checkpoint.load(next(toy_checkpoint_dir.glob("*.safetensors"))))
    return tr, tr.translate(sentence)


def test_page_shows_every_measure_for_the_translation(app: AppTest, toy_checkpoint_dir) -> None:
    from attnscope.engine.attribution.alti import alti_plus

    open_page(app)
    assert not app.exception
    headline = translation_shown(app)  # the headline every page shows, not a small quote
    assert headline is not None and (headline.source, headline.text) == ("a b c d", "d c b a")
    assert not any(m.value.startswith("> ") for m in app.markdown)
    split = figures(app)["Where each generated token came from (ALTI+, rolled out)"]
    source, prefix = (values(trace["y"]) for trace in split["data"][:2])
    np.testing.assert_allclose(source + prefix, 1.0, atol=1e-9)
    tr, result = toy_translation(toy_checkpoint_dir)
    np.testing.assert_allclose(source, alti_plus(tr, result).source_share, atol=1e-12)
    open_tab(app, "Source tokens by method")
    methods = next(spec for title, spec in figures(app).items() if "source tokens by method" in title)
    rows = methods["layout"]["yaxis"]["ticktext"]
    assert rows == ["attention", "norm-based", "ALTI+", "value zeroing", "gradient × input", "integrated gradients"]
    figs = figures(open_tab(app, "Agreement"))
    assert "Mean Spearman over tokens" in figs and "Top-1 agreement (same top source token)" in figs
    text = " ".join(shown(m) for m in app.markdown)
    for paper in ("Kobayashi et al.", "Ferrando et al.", "Mohebbi et al.", "Sundararajan et al."):
        assert paper in text


def test_the_page_says_how_complete_integrated_gradients_are(app: AppTest, toy_checkpoint_dir) -> None:
    from attnscope.engine.attribution.quadrature import IGSettings
    from attnscope.engine.attribution.saliency import saliency

    open_page(app, tab="Source tokens by method")
    tr, result = toy_translation(toy_checkpoint_dir)
    with tr.inference():
        ig = saliency(tr.model, result.source_ids, result.target_ids, IGSettings(max_points=16))
    said = " ".join([shown(c) for c in app.caption] + [shown(w) for w in app.warning])
    assert f"Integrated gradients used {ig.points} path points" in said
    change = np.abs(ig.score - ig.baseline_score)
    large, small = change >= 1, change < 1
    if large.any():
        rel = ig.relative_gap[large]
        assert f"within {float(np.median(rel)):.1%} at the median and {float(rel.max()):.1%} at worst" in said
    if small.any():
        assert f"within {float(ig.gap[small].max()):.3f} nats for the {int(small.sum())} whose" in said
    if ig.complete.all():
        assert "Every token met the tolerance (5.0% of the change, or 0.05 nats)" in said
    else:
        assert f"{int((~ig.complete).sum())} of {len(ig.complete)} tokens missed the tolerance" in said
        assert "allow more path points" in said


def test_the_default_budget_meets_the_tolerance_and_a_small_one_is_a_warning(app: AppTest, toy_checkpoint_dir) -> None:
    from attnscope.engine.attribution.quadrature import IGSettings
    from attnscope.engine.attribution.saliency import saliency

    tr, result = toy_translation(toy_checkpoint_dir)
    with tr.inference():
        full = saliency(tr.model, result.source_ids, result.target_ids, IGSettings())
        short = saliency(tr.model, result.source_ids, result.target_ids, IGSettings(max_points=16))
    assert full.complete.all() and not short.complete.all()  # the toy model needs more than 16 path points
    app.session_state["sentence"] = "a b c d"
    app.session_state["attr_tab"] = "Source tokens by method"
    app.run()
    app.switch_page(PAGE).run()  # the page's defaults: 5%, at most 256 path points
    assert not app.warning
    assert any(f"Integrated gradients used {full.points} path points" in shown(c) and "Every token met the tolerance"
               in shown(c) for c in app.caption)
    app.number_input(key="ig_points").set_value(16).run()
    warned = " ".join(shown(w) for w in app.warning)
    assert f"{int((~short.complete).sum())} of {len(short.complete)} tokens missed the tolerance" in warned
    assert "within the budget of 16 path points: allow more path points to close the gap" in warned


def test_source_share_by_position_over_the_sample(app: AppTest, toy_checkpoint_dir) -> None:
    from attnscope.engine.analysis.dataset import shares_by_position
    from attnscope.training.data import sample_pairs

    open_page(app)
    app.number_input(key="split_n").set_value(10).run()
    app.button(key="split_go").click().run()
    assert not app.exception
    fig = figures(app)["Source share by target position · 10 sentences"]
    tr, _ = toy_translation(toy_checkpoint_dir)
    want = shares_by_position(tr, [s for s, _ in sample_pairs("en", "en", "test_2016_flickr", 10)])
    keep = np.flatnonzero(want.counts >= 10)
    lines = {trace["name"]: trace for trace in fig["data"]}
    np.testing.assert_allclose(values(lines["ALTI+"]["y"]), want.mean["ALTI+"][keep], atol=1e-12)
    np.testing.assert_allclose(values(lines["value zeroing"]["y"]), want.mean["value zeroing"][keep], atol=1e-12)
    assert "Voita et al." in fig["layout"]["annotations"][0]["text"]
    assert any("Voita et al." in shown(c) and "falls as the target prefix grows" in shown(c) for c in app.caption)


def test_alignment_is_shown_and_exported_in_pharaoh_format(app: AppTest) -> None:
    open_page(app, tab="Alignment")
    pharaoh = app.get("code")[0].value
    assert re.fullmatch(r"\d+-\d+( \d+-\d+)*", pharaoh), pharaoh
    assert any(title.endswith("links") for title in figures(app))
    app.selectbox(key="align_layer").set_value(0).run()
    app.multiselect(key="align_heads").set_value([1]).run()
    assert not app.exception
    assert re.fullmatch(r"(\d+-\d+( \d+-\d+)*)|\(no links\)", app.get("code")[0].value)


def test_dataset_comparison_over_pasted_sentences(app: AppTest) -> None:
    open_page(app, tab="Dataset")
    app.text_area(key="attr_pasted").set_value("a b c\nd e f g\nh i").run()
    label = app.button(key="attr_go").label
    assert re.fullmatch(r"Compare layers \((about \d+|under 1) s for 3 sentences\)", label), label  # said before it starts
    assert not any(b.key in ("attr_go", "attr_stats_go") for c in app.columns for b in c.button)  # full width
    app.button(key="attr_go").click().run()
    assert not app.exception
    figs = figures(app)
    assert "Cross-attention by layer against each attribution (Spearman rank correlation)" in figs
    assert any("Over 3 sentences" in shown(m) for m in app.markdown)
    label = app.button(key="attr_stats_go").label
    assert re.fullmatch(r"Head statistics \((about \d+|under 1) s for 3 sentences\)", label), label
    app.button(key="attr_stats_go").click().run()
    assert any("Head statistics over 3 sentences" in shown(c) for c in app.caption)
    agreement, stats = readable_tables(app)[-2:]  # words a student reads, each explained
    assert list(agreement) == ["layer", "measure", "against", "rank correlation (Spearman)", "same top token", "tokens"]
    assert "largest weight" in stats and "share on <eos>" in stats


def test_dataset_comparison_works_offline_on_the_default_split(app: AppTest, monkeypatch, tmp_path) -> None:
    """The default split ships inside the package: no corpus directory is needed (an empty one is set here)."""
    monkeypatch.setenv("ATTNSCOPE_DATA", str(tmp_path))
    open_page(app, tab="Dataset")
    app.number_input(key="attr_n").set_value(3).run()
    app.button(key="attr_go").click().run()
    assert not app.exception and not any("missing corpus" in shown(w) for w in app.warning)
    assert any("Over 3 sentences" in shown(m) for m in app.markdown)


def test_dataset_comparison_on_a_split_outside_the_sample_says_what_is_missing(app: AppTest, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("ATTNSCOPE_DATA", str(tmp_path))
    open_page(app, tab="Dataset")
    app.selectbox(key="attr_split").set_value("test_2017_flickr").run()  # said as soon as the split is picked
    assert not app.exception
    assert any("missing corpus file" in shown(w) for w in app.warning)


def test_translate_and_step_explorers_switch_to_weighted_value_norms(app: AppTest, toy_checkpoint_dir) -> None:
    from attnscope.checkpoints import checkpoint
    from attnscope.engine.attribution.norms import weighted_value_norms
    from attnscope.engine.decoding.translator import Translator

    tr = Translator(*checkpoint.load(next(toy_checkpoint_dir.glob("*.safetensors"))))
    expected = weighted_value_norms(tr, tr.translate("a b c d"))
    app.session_state["sentence"] = "a b c d"
    app.run()
    (weights,) = explorers(app)
    assert weights.header["value"] == "weight"
    for page in (page_script("Translate"), page_script("Step through decoding")):
        app.switch_page(page).run()
        app.segmented_control(key="attn_values").set_value("weighted value norms").run()
        assert not app.exception
        (norms,) = explorers(app)
        assert norms.header["value"] == "‖a·f(x)‖" and norms.header["id"] != weights.header["id"]
        for kind in ("encoder", "decoder", "cross"):
            np.testing.assert_allclose(norms.arrays[kind], expected.array(kind), rtol=1e-5, atol=1e-7)
        assert not np.allclose(weights.arrays["cross"], expected.cross)
        app.segmented_control(key="attn_values").set_value("weights").run()


def test_bad_input_gets_a_sentence_not_a_traceback(app: AppTest) -> None:
    for text in ("   ", "<b>" * 3000, "\x00 a [x](javascript:1)"):
        open_page(app, text)
        assert not app.exception, [e.value for e in app.exception]
        for element in (*app.markdown, *app.info, *app.warning):  # our own templates use neither < nor [
            assert not re.search(r"(?<!\\)[<\[`]", element.value), element.value


def test_the_first_view_computes_only_the_split_and_each_tab_what_it_shows(app: AppTest, monkeypatch) -> None:
    """Integrated gradients (most of the page's cost) run only when a tab that shows them is opened, once;
    the IG settings survive a visit to another tab."""
    from attnscope.ui.attribution import sentence as attribution_tools

    calls: list[int] = []  # the IG budget of every full attribution computed (0: without IG)
    real = attribution_tools.attribute
    monkeypatch.setattr(attribution_tools, "attribute", lambda tr, result, ig, *rest: calls.append(ig.max_points if ig else 0)
                        or real(tr, result, ig, *rest))
    open_page(app)
    assert not app.exception and calls == []
    assert set(figures(app)) == {"Where each generated token came from (ALTI+, rolled out)"}
    open_tab(app, "Source tokens by method")
    assert calls == [16] and any("source tokens by method" in title for title in figures(app))
    assert not app.get("progress")  # the bar went when the attributions were done
    app.number_input(key="ig_points").set_value(32).run()
    open_tab(app, "Source vs prefix")
    open_tab(app, "Agreement")
    assert not app.exception and not app.get("progress")  # a cached attribution replays its bar's removal too
    assert "Mean Spearman over tokens" in figures(app)
    assert app.number_input(key="ig_points").value == 32 and calls == [16, 32]  # kept, and the attribution reused
    open_tab(app, "Alignment")
    assert app.get("code") and calls == [16, 32]  # the best layer needs value zeroing only, no gradients


def test_alignment_picks_the_layer_the_full_comparison_would(app: AppTest, toy_checkpoint_dir, monkeypatch) -> None:
    from attnscope.engine.attribution.agreement import best_layer, layer_agreement
    from attnscope.engine.attribution.sentence import attribute
    from attnscope.ui.attribution import sentence as attribution_tools

    monkeypatch.setattr(attribution_tools, "attribute", None)  # the tab computes no gradients at all
    open_page(app, tab="Alignment")
    assert not app.exception
    tr, result = toy_translation(toy_checkpoint_dir)
    best = best_layer(layer_agreement([attribute(tr, result)]), "value zeroing")
    assert f"best by agreement with value zeroing on this sentence (layer {best})" in app.selectbox(key="align_layer").options[0]


def split_figure(app: AppTest) -> tuple[str, dict] | None:
    return next(((title, spec) for title, spec in figures(app).items() if title.startswith("Source share by target")), None)


def test_a_sample_average_says_its_cost_first_stops_keeping_what_finished_and_continues(app: AppTest, monkeypatch,
                                                                                       toy_checkpoint_dir) -> None:
    """A click during the run (here: a rerun after five sentences, as Streamlit's own on any click) ends it; the
    average over the finished sentences is shown as such, Continue computes only the rest, and more sentences
    reuse the finished ones; every number equals the engine's over the same sentences."""
    import streamlit as st

    from attnscope.engine.analysis.dataset import shares_by_position
    from attnscope.training.data import sample_pairs
    from attnscope.ui.attribution import samples as attribution_samples

    computed: list[str] = []
    stop_after = [5]  # sentences before the simulated click (then none)
    real = attribution_samples.shares_each

    def counted(tr, sentences, batch_size=64):
        for i, shares in real(tr, sentences, batch_size):
            if len(computed) == stop_after[0]:
                stop_after[0] = -1
                st.rerun()
            computed.append(sentences[i])
            yield i, shares

    def check(sentences: list[str]) -> None:
        title, fig = split_figure(app)
        assert title == f"Source share by target position · {len(sentences)} sentences"
        want = shares_by_position(tr, sentences)
        keep = np.flatnonzero(want.counts >= 10)
        lines = {trace["name"]: trace for trace in fig["data"]}
        np.testing.assert_allclose(values(lines["ALTI+"]["y"]), want.mean["ALTI+"][keep], atol=1e-12)

    monkeypatch.setattr(attribution_samples, "shares_each", counted)
    tr, _ = toy_translation(toy_checkpoint_dir)
    texts = [s for s, _ in sample_pairs("en", "en", "test_2016_flickr", 30)]
    open_page(app)
    label = app.button(key="split_go").label
    assert re.fullmatch(r"Average over the sample \((about \d+|under 1) s for 20 sentences\)", label), label  # before
    assert not any(b.key == "split_go" for c in app.columns for b in c.button)  # full width: the label is not cut off
    assert split_figure(app) is None and computed == []  # estimated from the page's own sentence: nothing computed yet
    app.button(key="split_go").click().run()
    assert not app.exception and len(computed) == 5
    check(sorted(computed, key=texts.index))  # the five that finished, not abandoned
    assert any(shown(c).startswith("Over 5 of 20 sentences") for c in app.caption)
    assert re.fullmatch(r"Continue: 15 more sentences \((about \d+|under 1) s\)", app.button(key="split_go").label)
    app.button(key="split_go").click().run()
    assert sorted(computed, key=texts.index) == texts[:20]  # each sentence once
    check(texts[:20])
    assert any(shown(c).startswith("Over 20 sentences") for c in app.caption)
    app.number_input(key="split_n").set_value(30).run()
    app.button(key="split_go").click().run()
    assert sorted(computed, key=texts.index) == texts  # asking for more computed only the ten more
    check(texts)

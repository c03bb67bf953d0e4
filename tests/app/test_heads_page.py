"""AppTest journeys on Heads & layers, Positional encoding and Model anatomy."""
from __future__ import annotations

import gzip
import json

import numpy as np
from streamlit.testing.v1 import AppTest

from attnscope.engine.analysis.heads import ablate_sentence
from tests.app.conftest import APP
from tests.support import CEILING, Explored, explorers, page_script, readable_tables, shown, tensors_and_meta

HEADS = page_script("Heads & layers")


def titles(app: AppTest) -> list[str]:
    return [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in app.get("plotly_chart")]


def open_page(app: AppTest, page: str, sentence: str = "a b c d", tab: str | None = None) -> AppTest:
    """`page` on `sentence`; on Heads, with its tab `tab` open (only the open tab is drawn)."""
    app.session_state["sentence"] = sentence
    if tab is not None:
        app.session_state["heads_tab"] = tab
    app.run()
    return app.switch_page(page).run()


def test_head_statistics_table_has_a_row_per_head(app: AppTest) -> None:
    open_page(app, HEADS)
    assert any(shown(c).startswith("Encoder self-attention, decoder masked self-attention and cross-attention heads for "
                                   "this sentence.") for c in app.caption)  # capitals only where a sentence starts
    table = app.dataframe[0].value
    assert len(table) == 3 * 2 * 4  # kinds x layers x heads of the toy model
    assert {"entropy (nats)", "weight on itself", "share on <eos>"} <= set(table.columns)


def compared(app: AppTest) -> Explored:
    """What the Compare tab's explorer was sent (the Heads page's own explorer comes first)."""
    return next(e for e in explorers(app) if e.header["mode"] == "compare")


def test_compare_starts_on_the_sidebars_choice(app: AppTest) -> None:
    """A is the sidebar's kind, layer and head; B and the difference are picked and drawn in the browser
    (tests/e2e/test_compare_journey.py)."""
    app.session_state["layer"], app.session_state["head"] = 1, 0
    open_page(app, HEADS, tab="Compare")
    assert not app.exception
    sent = compared(app)
    assert sent.selection["layer"] == 1 and sent.selection["head"] == 0 and sent.selection["kind"] == "cross"
    assert sent.header["compare"] == {"what": "heads", "a": "this sentence", "b": None}  # B: another head of A's record


def test_compare_follows_the_sidebar_when_it_changes(app: AppTest) -> None:
    app.session_state["layer"], app.session_state["head"] = 1, 0
    open_page(app, HEADS, tab="Compare")
    epoch = compared(app).header["epoch"]
    app.session_state["layer"], app.session_state["head"] = 0, 2  # the sidebar moves while on Heads
    app.run()
    sent = compared(app)
    assert (sent.selection["layer"], sent.selection["head"]) == (0, 2) and sent.header["epoch"] == epoch + 1


def test_the_grid_of_a_long_sentence_is_coloured_per_head_as_on_translate(app: AppTest) -> None:
    """A long sentence (every T5 sentence with its task prefix) is scaled per head on Translate: Heads follows."""
    open_page(app, HEADS, " ".join("abcdefghij"[i % 10] for i in range(45)))
    (sent,) = explorers(app)
    assert sent.header["per_head_scale"] and any("scaled to its own maximum" in shown(c) for c in app.caption)
    open_page(app, HEADS, "a b c d")
    assert not explorers(app)[0].header["per_head_scale"]


def test_compare_starts_on_the_sidebars_mean_of_heads(app: AppTest) -> None:
    open_page(app, HEADS, tab="Compare")
    assert compared(app).selection["head"] is None and compared(app).selection["layer"] == 0


def test_the_tab_is_in_the_url(app: AppTest) -> None:
    fresh = AppTest.from_file(APP, default_timeout=CEILING)  # a fresh browser: nothing but the URL
    fresh.query_params.update({"sentence": "a b c d", "heads_tab": "Ablation"})
    fresh.run()
    fresh.switch_page(HEADS).run()
    assert fresh.session_state["heads_tab"] == "Ablation"


def test_compare_two_sentences_whose_tokens_differ(app: AppTest) -> None:
    open_page(app, HEADS, tab="Compare")
    app.radio(key="cmp_mode").set_value("two sentences").run()
    app.text_input(key="cmp_sentence").set_value("a b e d").run()
    assert not app.exception
    sent = compared(app)
    b = sent.header["compare"]["b"]
    assert sent.header["compare"]["what"] == "sentences" and b["source"][:4] == ["a", "b", "e", "d"]
    assert sent.header["source"][:4] == ["a", "b", "c", "d"]  # A's own: the browser labels position 2 "c / e"
    assert np.array_equal(sent.arrays["cross"].shape[:2], [2, 4])


def test_checkpoints_of_another_language_pair_are_not_compared(app: AppTest, toy_checkpoint_dir, tmp_path, monkeypatch) -> None:
    from safetensors.torch import save_file
    folder = tmp_path / "pairs"
    folder.mkdir()
    (folder / "toy-reverse.safetensors").write_bytes((toy_checkpoint_dir / "toy-reverse.safetensors").read_bytes())
    tensors, meta = tensors_and_meta(toy_checkpoint_dir / "toy-reverse.safetensors")
    save_file(tensors, str(folder / "toy-en-de.safetensors"), metadata=meta | {"tgt_lang": "de"})
    monkeypatch.setenv("ATTNSCOPE_CHECKPOINTS", str(folder))
    app.session_state["checkpoint"] = "toy-reverse"
    open_page(app, HEADS, tab="Compare")
    app.radio(key="cmp_mode").set_value("two checkpoints").run()
    assert not app.exception
    assert any("No other checkpoint translates en→en" in shown(i) for i in app.info)


def test_head_statistics_columns_are_readable_and_explained(app: AppTest) -> None:
    from attnscope.engine.analysis.heads import STAT_DEFINITIONS
    open_page(app, HEADS)
    (stats,) = readable_tables(app)
    assert list(stats) == ["attention", "layer", "head", "entropy (nats)", "largest weight", "weight on itself",
                           "weight on previous token", "weight on next token", "share on <bos>", "share on <eos>",
                           "share on punctuation", "mean distance (tokens)"]
    assert stats["largest weight"] == STAT_DEFINITIONS["max_weight"]
    assert stats["share on <bos>"] == STAT_DEFINITIONS["bos_share"]


def test_ablation_tables_are_readable(app: AppTest, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("ATTNSCOPE_DATA", str(tmp_path))
    open_page(app, HEADS, tab="Ablation")
    app.multiselect(key="ablate_heads").set_value([("cross", 0, 0)]).run()
    app.number_input(key="ablate_n").set_value(2)
    app.button(key="ablate_go").click().run()
    tables = readable_tables(app)
    assert list(tables[0]) == ["step", "token", "probability with all heads", "probability without them", "change"]
    assert list(tables[1]) == ["BLEU with all heads", "BLEU without them", "BLEU change", "sentences"]


def test_ablating_every_cross_head_changes_the_translation(app: AppTest) -> None:
    open_page(app, HEADS, tab="Ablation")
    heads = [("cross", layer, head) for layer in range(2) for head in range(4)]
    app.multiselect(key="ablate_heads").set_value(heads).run()
    assert not app.exception
    text = next(shown(m) for m in app.markdown if shown(m).startswith("**With all heads:**"))
    before, after = text.split("  \n")
    assert before == "**With all heads:** d c b a"
    assert after != "**Without them:** d c b a"


def test_an_ablation_is_computed_once_and_then_read_from_the_results_cache(app: AppTest, monkeypatch) -> None:
    from attnscope.ui import heads_page

    calls = []
    monkeypatch.setattr(heads_page, "ablate_sentence", lambda *args: calls.append(args) or ablate_sentence(*args))
    open_page(app, HEADS, "c a b d e", tab="Ablation")  # a sentence no other test ablates
    app.multiselect(key="ablate_heads").set_value([("cross", 1, 2)]).run()
    app.run()
    assert not app.exception and len(calls) == 1
    app.multiselect(key="ablate_heads").set_value([("cross", 1, 3)]).run()
    assert len(calls) == 2  # other heads: another result


def test_ablating_every_head_says_the_output_is_empty(app: AppTest) -> None:
    open_page(app, HEADS, tab="Ablation")
    heads = [(kind, layer, head) for kind in ("encoder", "decoder", "cross") for layer in range(2) for head in range(4)]
    app.multiselect(key="ablate_heads").set_value(heads).run()
    text = next(shown(m) for m in app.markdown if shown(m).startswith("**With all heads:**"))
    assert text.split("  \n")[1] == "**Without them:** *(empty: the output has no words)*"


def test_an_ablation_bleu_is_never_shown_for_other_heads(app: AppTest, monkeypatch, tmp_path) -> None:
    for lang, lines in (("en", ["a b c", "d e f g"]), ("de", ["c b a", "g f e d"])):
        with gzip.open(tmp_path / f"val.{lang}.gz", "wt") as f:
            f.write("\n".join(lines) + "\n")
    monkeypatch.setenv("ATTNSCOPE_DATA", str(tmp_path))
    open_page(app, HEADS, tab="Ablation")
    app.multiselect(key="ablate_heads").set_value([("cross", 0, 0)]).run()
    app.number_input(key="ablate_n").set_value(2).run()
    app.button(key="ablate_go").click().run()
    assert not app.exception
    bleu = [d.value for d in app.dataframe if "BLEU change" in d.value.columns]
    assert len(bleu) == 1 and int(bleu[0]["sentences"][0]) == 2
    app.multiselect(key="ablate_heads").set_value([("cross", 0, 0), ("cross", 1, 3)]).run()
    assert not any("BLEU change" in d.value.columns for d in app.dataframe)  # the old heads' score is gone
    assert any("measure again" in c.value for c in app.caption)
    app.multiselect(key="ablate_heads").set_value([("cross", 0, 0)]).run()
    assert any("BLEU change" in d.value.columns for d in app.dataframe)  # back to the heads it was measured for


def test_rollout_views_render(app: AppTest) -> None:
    open_page(app, HEADS, tab="Rollout")
    assert any(t.startswith("Encoder rollout") for t in titles(app))
    assert any(t.startswith("Decoder source alignment") for t in titles(app))


def test_split_statistics_work_offline_from_the_embedded_sample(app: AppTest, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("ATTNSCOPE_DATA", str(tmp_path))
    open_page(app, HEADS)
    tables = len(app.dataframe)
    app.number_input(key="stats_n").set_value(3)
    app.button(key="stats_go").click().run()
    assert not app.exception and not app.warning
    assert any("3 sentences of val" in c.value for c in app.caption)
    bar = app.get("progress")[0].proto  # batched capture reports its progress to the end
    assert (bar.value, bar.text) == (100, "3/3 sentences")
    assert len(app.dataframe) == tables + 1


def test_a_split_outside_the_sample_says_what_is_missing_in_plain_words(app: AppTest, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("ATTNSCOPE_DATA", str(tmp_path))
    open_page(app, HEADS)
    app.selectbox(key="stats_split").set_value("test_2017_flickr")
    app.button(key="stats_go").click().run()
    assert not app.exception
    message = next(shown(w) for w in app.warning if "missing corpus file" in shown(w))
    assert "`" not in message


def test_ablation_bleu_change_works_offline(app: AppTest, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("ATTNSCOPE_DATA", str(tmp_path))
    open_page(app, HEADS, tab="Ablation")
    app.multiselect(key="ablate_heads").set_value([("cross", 0, 0)]).run()
    app.number_input(key="ablate_n").set_value(3)
    app.button(key="ablate_go").click().run()
    assert not app.exception and not app.warning
    assert "ablate_bleu" in app.session_state


def test_positional_page_shows_sinusoids_and_the_models_own(app: AppTest) -> None:
    open_page(app, page_script("Positional encoding"))
    assert any(t.startswith("Sinusoidal encoding") for t in titles(app))
    assert any("Identical to the table above" in c.value for c in app.caption)
    assert "Norms of token embeddings × √d_model vs positional encodings" in titles(app)


def test_the_norms_title_of_an_unscaled_model_is_plural_on_its_noun() -> None:
    from attnscope.ui.positional_page import norms_title
    assert norms_title(False) == "Norms of token embeddings (not scaled) vs positional encodings"


def test_anatomy_counts_every_parameter(app: AppTest) -> None:
    open_page(app, page_script("Model anatomy"))
    assert app.table and not any(column.table for column in app.columns)  # the config's meanings get the full width
    shapes = app.dataframe[1].value
    assert "cross-attn: weights" in list(shapes["stage"])
    assert not app.exception


def test_compare_two_checkpoints(app: AppTest, toy_checkpoint_dir, tmp_path, monkeypatch) -> None:
    import shutil
    folder = tmp_path / "two"
    folder.mkdir()
    for name in ("toy-reverse", "toy-reverse-copy"):
        shutil.copy(toy_checkpoint_dir / "toy-reverse.safetensors", folder / f"{name}.safetensors")
    monkeypatch.setenv("ATTNSCOPE_CHECKPOINTS", str(folder))
    open_page(app, HEADS, tab="Compare")
    app.radio(key="cmp_mode").set_value("two checkpoints").run()
    assert not app.exception
    assert any(shown(m).startswith("**toy-reverse-copy:**") for m in app.markdown)
    delta = app.dataframe[-1].value
    change = "entropy (nats): change"
    assert change in delta.columns and float(delta[change].abs().max()) < 1e-6
    readable_tables(app)
    b = compared(app).header["compare"]
    assert b["what"] == "checkpoints" and b["b"]["label"] in {"toy-reverse", "toy-reverse-copy"} - {b["a"]}

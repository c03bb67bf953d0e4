"""The summary line of a checkpoint says which file each score belongs to."""
from __future__ import annotations

from attnscope.ui.checkpoints.manage import training_facts


def test_scores_name_their_file() -> None:
    facts = training_facts({"best_val_bleu": 52.24, "val_bleu": "54.04", "averaged_from": ["a", "b", "c"],
                            "scored_with": "sacreBLEU 13a cased, beam 4", "train_config": {"lr": 1}})
    assert facts == ["best val BLEU during training (greedy, best single training checkpoint): 52.24",
                     "val BLEU of this file: 54.04", "this file scored with: sacreBLEU 13a cased, beam 4",
                     "this file averages: 3 checkpoints"]


def test_the_table_keeps_one_type_per_column_whatever_the_summaries_hold() -> None:
    import dataclasses

    import pyarrow as pa

    from attnscope.checkpoints import registry
    from attnscope.ui.checkpoints.manage import table
    from tests.support import TOY_CHECKPOINT

    trained = registry.entry(TOY_CHECKPOINT, "shipped")
    summaries = {"imported": {"data": "imported nn.Transformer state_dict"},  # no steps, no BLEU
                 "odd": {"steps": "", "best_val_bleu": "n/a", "date": 20261125, "data": ["a", "b"]},
                 "half": {"steps": 12.5, "best_val_bleu": True, "test_2016_bleu": float("nan")}}
    entries = {"toy-reverse": trained} | {
        name: dataclasses.replace(trained, name=name, bundle=dataclasses.replace(trained.bundle, summary=summary))
        for name, summary in summaries.items()}
    frame = table(entries).set_index("name")
    assert str(frame["steps"].dtype) == "Int64" and str(frame["val BLEU"].dtype) == "Float64"
    assert frame.loc["toy-reverse", "steps"] == trained.bundle.summary["steps"]
    assert frame.loc["toy-reverse", "val BLEU"] == trained.bundle.summary["best_val_bleu"]
    for name in summaries:  # what is not a number of its kind is left empty, not shown as text in a number column
        assert frame.isna().loc[name, ["steps", "val BLEU", "test BLEU"]].all(), name
    assert frame.loc["odd", "date"] == "20261125"
    pa.Table.from_pandas(frame)  # what st.dataframe does first: this raised ArrowInvalid on a column mixing 638 and ""


def test_the_table_shows_the_scores_model_anatomy_shows() -> None:
    """The shipped en-de file records its own scores as text ("40.48") beside training's best validation (40.1):
    the table showed 40.1 and no test score while Model anatomy showed 40.82 and 40.48."""
    from attnscope.checkpoints import registry
    from attnscope.ui.checkpoints.manage import table
    from tests.support import ROOT

    entry = registry.entry(ROOT / "checkpoints" / "multi30k-en-de.safetensors", "shipped")
    row = table({entry.name: entry}).set_index("name").loc[entry.name]
    facts = training_facts(entry.bundle.summary)
    assert f"val BLEU of this file: {row['val BLEU']}" in facts
    assert f"test 2016 BLEU of this file: {row['test BLEU']}" in facts


def test_the_long_data_text_comes_after_the_scores_and_the_test_score_names_its_split() -> None:
    """An import's "data" (where it came from) is a long sentence: in the middle it pushed BLEU and date off-screen."""
    from attnscope.checkpoints import registry
    from attnscope.ui.checkpoints.manage import table
    from attnscope.ui.tables import CHECKPOINTS
    from tests.support import TOY_CHECKPOINT

    columns = list(table({"toy": registry.entry(TOY_CHECKPOINT, "shipped")}).columns)
    assert columns[-1] == "data" and columns.index("date") < columns.index("data")
    assert "test_2016_flickr" in CHECKPOINTS["test BLEU"].label

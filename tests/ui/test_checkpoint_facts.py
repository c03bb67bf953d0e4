"""The summary line of a checkpoint says which file each score belongs to."""
from __future__ import annotations

from attnscope.ui.checkpoint_tools import training_facts


def test_scores_name_their_file() -> None:
    facts = training_facts({"best_val_bleu": 52.24, "val_bleu": "54.04", "averaged_from": ["a", "b", "c"],
                            "scored_with": "sacreBLEU 13a cased, beam 4", "train_config": {"lr": 1}})
    assert facts == ["best val BLEU during training (greedy, best single training checkpoint): 52.24",
                     "val BLEU of this file: 54.04", "this file scored with: sacreBLEU 13a cased, beam 4",
                     "this file averages: 3 checkpoints"]

"""Corpora, toy tasks and token-count batching."""
from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from attnscope.model.config import BOS_ID, EOS_ID, PAD_ID
from attnscope.training.data import DataError, collate, load_pairs, make_example, token_batches, toy_pairs


def write(folder: Path, name: str, lines: list[str]) -> None:
    with gzip.open(folder / name, "wt", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def test_load_pairs_from_a_fixture_corpus(tmp_path: Path) -> None:
    write(tmp_path, "train.en.gz", ["A dog.", "Two cats."])
    write(tmp_path, "train.de.gz", ["Ein Hund.", "Zwei Katzen."])
    assert load_pairs(tmp_path, "train", "en", "de") == [("A dog.", "Ein Hund."), ("Two cats.", "Zwei Katzen.")]


def test_missing_split_names_the_file_and_where_to_get_it(tmp_path: Path) -> None:
    write(tmp_path, "val.en.gz", ["x"])
    with pytest.raises(DataError) as err:
        load_pairs(tmp_path, "val", "en", "fr")
    assert str(tmp_path / "val.fr.gz") in str(err.value)
    assert "https://github.com/multi30k/dataset/raw/master/data/task1/raw/val.fr.gz" in str(err.value)


def test_mismatched_line_counts(tmp_path: Path) -> None:
    write(tmp_path, "val.en.gz", ["a", "b"])
    write(tmp_path, "val.de.gz", ["a"])
    with pytest.raises(DataError, match="2 lines but"):
        load_pairs(tmp_path, "val", "en", "de")


@pytest.mark.parametrize("task,check", [("copy", lambda s, t: s == t), ("reverse", lambda s, t: s.split()[::-1] == t.split()),
                                        ("sort", lambda s, t: sorted(s.split()) == t.split())])
def test_toy_tasks(task: str, check) -> None:
    pairs = toy_pairs(task, 50, seed=3)
    assert all(check(s, t) for s, t in pairs)
    assert pairs == toy_pairs(task, 50, seed=3) and pairs != toy_pairs(task, 50, seed=4)


def test_token_batches_respect_the_budget_and_cover_everything() -> None:
    examples = [make_example(list(range(4, 4 + n % 17 + 1)), list(range(4, 4 + n % 13 + 1)), 64) for n in range(300)]
    batches = token_batches(examples, 200, shuffle=True, seed=1)
    assert sorted(i for b in batches for i in b) == list(range(300))
    for b in batches:
        longest = max(max(len(examples[i].src), len(examples[i].tgt)) for i in b)
        assert longest * len(b) <= 200 or len(b) == 1
    assert batches == token_batches(examples, 200, shuffle=True, seed=1)


def test_collate_shifts_the_target() -> None:
    batch = collate([make_example([5, 6], [7, 8, 9], 16), make_example([5], [7], 16)])
    assert batch.src.tolist() == [[5, 6, EOS_ID], [5, EOS_ID, PAD_ID]]
    assert batch.tgt_in.tolist() == [[BOS_ID, 7, 8, 9], [BOS_ID, 7, PAD_ID, PAD_ID]]
    assert batch.tgt_out.tolist() == [[7, 8, 9, EOS_ID], [7, EOS_ID, PAD_ID, PAD_ID]]
    assert batch.n_target_tokens == 6


def test_make_example_truncates_to_fit() -> None:
    ex = make_example(list(range(4, 30)), list(range(4, 30)), 10)
    assert len(ex.src) == 10 and ex.src[-1] == EOS_ID
    assert len(ex.tgt) == 10 and ex.tgt[0] == BOS_ID and ex.tgt[-1] == EOS_ID

"""Corpora, toy tasks and token-count batching."""
from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from attnscope.model.config import BOS_ID, EOS_ID, PAD_ID
from attnscope.training.data import (
    SAMPLE_DIR,
    DataError,
    collate,
    load_pairs,
    make_example,
    sample_pairs,
    token_batches,
    toy_pairs,
    toy_split,
)
from attnscope.training.evaluate import exact_match
from tests.support import ROOT

IDS = {"pad": PAD_ID, "bos": BOS_ID, "eos": EOS_ID}  # attnscope's own vocabularies' ids


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
    examples = [make_example(list(range(4, 4 + n % 17 + 1)), list(range(4, 4 + n % 13 + 1)), 64, IDS)
                for n in range(300)]
    batches = token_batches(examples, 200, shuffle=True, seed=1)
    assert sorted(i for b in batches for i in b) == list(range(300))
    for b in batches:
        longest = max(max(len(examples[i].src), len(examples[i].tgt)) for i in b)
        assert longest * len(b) <= 200 or len(b) == 1
    assert batches == token_batches(examples, 200, shuffle=True, seed=1)


def test_collate_shifts_the_target() -> None:
    batch = collate([make_example([5, 6], [7, 8, 9], 16, IDS), make_example([5], [7], 16, IDS)], PAD_ID)
    assert batch.src.tolist() == [[5, 6, EOS_ID], [5, EOS_ID, PAD_ID]]
    assert batch.tgt_in.tolist() == [[BOS_ID, 7, 8, 9], [BOS_ID, 7, PAD_ID, PAD_ID]]
    assert batch.tgt_out.tolist() == [[7, 8, 9, EOS_ID], [7, EOS_ID, PAD_ID, PAD_ID]]
    assert batch.n_target_tokens == 6


def test_make_example_truncates_to_fit() -> None:
    ex = make_example(list(range(4, 30)), list(range(4, 30)), 10, IDS)
    assert len(ex.src) == 10 and ex.src[-1] == EOS_ID
    assert len(ex.tgt) == 10 and ex.tgt[0] == BOS_ID and ex.tgt[-1] == EOS_ID


def test_the_embedded_sample_works_without_any_corpus_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTNSCOPE_DATA", str(tmp_path / "nothing"))
    val = sample_pairs("en", "de")
    assert len(val) == 1014 and val[0][0].startswith("A group of men")
    en_fr = sample_pairs("en", "fr", "test_2016_flickr", n=5)
    assert sample_pairs("fr", "en", "test_2016_flickr", n=5) == [(f, e) for e, f in en_fr]
    assert len(sample_pairs("de", "fr", "test_2016_flickr")) == 1000


def test_only_evaluation_splits_ship() -> None:
    assert sorted(p.name for p in SAMPLE_DIR.iterdir()) == sorted(
        f"{split}.{lang}.gz" for split in ("val", "test_2016_flickr") for lang in ("en", "de", "fr"))


def test_splits_outside_the_sample_come_from_the_corpus_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTNSCOPE_DATA", str(tmp_path))
    with pytest.raises(DataError) as err:
        sample_pairs("en", "de", "test_2017_flickr")
    assert str(tmp_path / "test_2017_flickr.en.gz") in str(err.value) and "`" not in str(err.value)
    write(tmp_path, "val.en.gz", ["A dog."])
    write(tmp_path, "val.cs.gz", ["Pes."])
    assert sample_pairs("en", "cs") == [("A dog.", "Pes.")]


def test_toy_validation_sequences_are_never_training_sequences() -> None:
    train, val = toy_split("reverse", 3000, 200, seed=1, max_len=5)
    assert len(val) == 200 and not {s for s, _ in train} & {s for s, _ in val}
    assert len({s for s, _ in val}) == 200


def test_exact_match_counts_whole_sequences_only() -> None:
    assert exact_match(["c b a", "d c  b", "x"], ["c b a", "d c b", "y"]) == pytest.approx(2 / 3)
    assert exact_match(["c b"], ["c b a"]) == 0.0
    with pytest.raises(ValueError):
        exact_match(["a"], [])


def test_the_sample_is_package_data_of_a_built_wheel(tmp_path: Path) -> None:
    """A fresh install carries the sample: build a wheel from a copy of the sources and look inside."""
    import shutil
    import subprocess
    import sys
    import zipfile
    root = ROOT
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(root / name, tmp_path / name)
    shutil.copytree(root / "src", tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist"),
                    str(tmp_path)], check=True, capture_output=True)
    names = zipfile.ZipFile(next((tmp_path / "dist").glob("*.whl"))).namelist()
    shipped = sorted(n.rsplit("/", 1)[1] for n in names if n.endswith(".gz"))
    assert shipped == sorted(p.name for p in SAMPLE_DIR.iterdir())


def test_examples_and_batches_use_the_vocabularys_own_ids() -> None:
    batch = collate([make_example([5], [7, 8], 16, {"pad": 9, "bos": 3, "eos": 0})], 9)
    assert (batch.src.tolist(), batch.tgt_in.tolist(), batch.tgt_out.tolist()) == ([[5, 0]], [[3, 7, 8]], [[7, 8, 0]])
    assert collate([make_example([5], [7], 16, {"bos": 3, "eos": 0}), make_example([5, 6], [7, 8], 16,
                                                                                  {"bos": 3, "eos": 0})], 9).n_target_tokens == 5

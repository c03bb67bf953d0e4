"""Parallel corpora (Multi30k task 1 and synthetic toy tasks) and token-count batching."""
from __future__ import annotations

import gzip
import os
import random
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import torch
from torch import Tensor

from attnscope.model.batch import pad

LANGUAGES = ("en", "de", "fr", "cs")
SPLITS = ("train", "val", "test_2016_flickr", "test_2017_flickr")
DATA_ENV = "ATTNSCOPE_DATA"
MULTI30K_URL = "https://github.com/multi30k/dataset/raw/master/data/task1/raw/{name}"
TOY_TASKS = ("copy", "reverse", "sort")
# The embedded evaluation sample shipped inside the package (Multi30k val and test_2016_flickr in
# three languages, ~135 KB), so dataset features work offline on a fresh install. Never other splits.
SAMPLE_DIR = Path(__file__).with_name("sample")
SAMPLE_SPLITS = ("val", "test_2016_flickr")
SAMPLE_LANGUAGES = ("en", "de", "fr")
TOY_SYMBOLS = tuple("abcdefghijklmnopqrstuvwxyz")

Pair = tuple[str, str]


class DataError(FileNotFoundError):
    """A corpus file is missing or unreadable; the message says which and where to get it."""


def data_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The Multi30k directory: an explicit path, else $ATTNSCOPE_DATA, else ./data/multi30k."""
    return Path(explicit or os.environ.get(DATA_ENV) or "data/multi30k")


def corpus_file(directory: Path, split: str, lang: str) -> Path:
    path = directory / f"{split}.{lang}.gz"
    if not path.is_file():
        raise DataError(f"missing corpus file {path}: download it from "
                        f"{MULTI30K_URL.format(name=path.name)} (or run: python -m attnscope data download "
                        f"--data-dir {directory}), or point {DATA_ENV} at a directory that has it")
    return path


def read_lines(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.strip() for line in f]


def load_pairs(directory: Path, split: str, src_lang: str, tgt_lang: str) -> list[Pair]:
    """Sentence pairs of one Multi30k split, e.g. ("train", "en", "de")."""
    for lang in (src_lang, tgt_lang):
        if lang not in LANGUAGES:
            raise DataError(f"unknown language {lang!r}; Multi30k has {', '.join(LANGUAGES)}")
    src = read_lines(corpus_file(directory, split, src_lang))
    tgt = read_lines(corpus_file(directory, split, tgt_lang))
    if len(src) != len(tgt):
        raise DataError(f"{split}.{src_lang} has {len(src)} lines but {split}.{tgt_lang} has {len(tgt)}")
    return list(zip(src, tgt))


def sample_pairs(src_lang: str, tgt_lang: str, split: str = "val", n: int | None = None,
                 directory: Path | None = None) -> list[Pair]:
    """The first `n` sentence pairs of an evaluation split for a language pair.

    Reads the sample embedded in the package when it covers the split and both languages
    (so it works offline), else the Multi30k directory (`directory` or $ATTNSCOPE_DATA);
    raises DataError saying what is missing. For dataset features such as split statistics,
    ablation BLEU and attribution over a sample.
    """
    embedded = split in SAMPLE_SPLITS and src_lang in SAMPLE_LANGUAGES and tgt_lang in SAMPLE_LANGUAGES
    pairs = load_pairs(SAMPLE_DIR if embedded else data_dir(directory), split, src_lang, tgt_lang)
    return pairs if n is None else pairs[:n]


def download(directory: Path, splits: Sequence[str] = SPLITS, langs: Sequence[str] = LANGUAGES) -> list[Path]:
    """Fetch missing Multi30k files from the public repository (needs internet)."""
    directory.mkdir(parents=True, exist_ok=True)
    fetched = []
    for split in splits:
        for lang in langs:
            path = directory / f"{split}.{lang}.gz"
            if path.exists() or (split == "test_2017_flickr" and lang == "cs"):
                continue  # no Czech test_2017 exists
            tmp = path.with_suffix(".part")
            urllib.request.urlretrieve(MULTI30K_URL.format(name=path.name), tmp)
            tmp.replace(path)
            fetched.append(path)
    return fetched


def toy_pairs(task: str, n: int, seed: int, *, min_len: int = 3, max_len: int = 10,
              n_symbols: int = 10) -> list[Pair]:
    """Seeded synthetic pairs: copy, reverse or sort a random string of letters."""
    if task not in TOY_TASKS:
        raise ValueError(f"unknown toy task {task!r}; choose one of {', '.join(TOY_TASKS)}")
    rng = random.Random(seed)
    symbols = TOY_SYMBOLS[:n_symbols]
    out = []
    for _ in range(n):
        seq = [rng.choice(symbols) for _ in range(rng.randint(min_len, max_len))]
        target = {"copy": seq, "reverse": seq[::-1], "sort": sorted(seq)}[task]
        out.append((" ".join(seq), " ".join(target)))
    return out


def toy_split(task: str, n_train: int, n_val: int, seed: int, **lengths: int) -> tuple[list[Pair], list[Pair]]:
    """Training pairs and held-out pairs whose sources never occur in training, so that
    validation measures whether the model learned the rule rather than memorized strings."""
    train = toy_pairs(task, n_train, seed, **lengths)
    seen = {src for src, _ in train}
    val: list[Pair] = []
    candidates = toy_pairs(task, 20 * n_val, seed + 10_000, **lengths)
    for pair in candidates:
        if pair[0] not in seen:
            seen.add(pair[0])
            val.append(pair)
            if len(val) == n_val:
                break
    return train, val


@dataclass(frozen=True)
class Example:
    src: list[int]  # subword ids + <eos>
    tgt: list[int]  # <bos> + subword ids + <eos>


def make_example(src_ids: list[int], tgt_ids: list[int], max_len: int, specials: Mapping[str, int]) -> Example:
    """Add special tokens (`specials`: the vocabulary's ids by role), truncating so both sides fit in `max_len`."""
    bos, eos = specials["bos"], specials["eos"]
    return Example(src_ids[: max_len - 1] + [eos], [bos] + tgt_ids[: max_len - 2] + [eos])


@dataclass(frozen=True)
class Batch:
    src: Tensor  # (B, S) padded with pad_id
    tgt_in: Tensor  # (B, T) <bos> y1 .. yn
    tgt_out: Tensor  # (B, T) y1 .. yn <eos>
    pad_id: int

    @property
    def n_target_tokens(self) -> int:
        return int((self.tgt_out != self.pad_id).sum())

    def to(self, device: torch.device | str) -> "Batch":
        return Batch(self.src.to(device), self.tgt_in.to(device), self.tgt_out.to(device), self.pad_id)


def collate(examples: Sequence[Example], pad_id: int) -> Batch:
    """Examples padded with `pad_id` (the model config's) into one batch."""
    return Batch(pad([e.src for e in examples], pad_id), pad([e.tgt[:-1] for e in examples], pad_id),
                 pad([e.tgt[1:] for e in examples], pad_id), pad_id)


def token_batches(examples: Sequence[Example], max_tokens: int, *, shuffle: bool, seed: int = 0,
                  bucket_factor: int = 100) -> list[list[int]]:
    """Indices grouped so that each batch's padded size (rows x longest) stays under `max_tokens`.

    Examples are sorted by length inside large random buckets, so batches have little padding
    while their order (and the mix of lengths across an epoch) stays random.
    """
    order = list(range(len(examples)))
    rng = random.Random(seed)
    if shuffle:
        rng.shuffle(order)

    def size(i: int) -> int:
        return max(len(examples[i].src), len(examples[i].tgt))

    batches: list[list[int]] = []
    bucket_len = max(1, bucket_factor * max(1, max_tokens // 30))
    for start in range(0, len(order), bucket_len):
        current: list[int] = []
        longest = 0
        for i in sorted(order[start:start + bucket_len], key=size):
            longest_if_added = max(longest, size(i))
            if current and longest_if_added * (len(current) + 1) > max_tokens:
                batches.append(current)
                current, longest_if_added = [], size(i)
            current.append(i)
            longest = longest_if_added
        if current:
            batches.append(current)
    if shuffle:
        rng.shuffle(batches)
    return batches

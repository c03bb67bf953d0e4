"""The committed toy checkpoint (tests/fixtures) that the app and browser tests serve still loads,
is stored small in fp16, says how it was made, and reverses letter strings."""
from __future__ import annotations

import torch

import attnscope
from attnscope.training.data import toy_pairs
from tests.support import TOY_CHECKPOINT, TOY_TRAINING, tensors_and_meta

# Every sentence the app and browser tests type, and what they expect to see.
USED_BY_TESTS = ["a b c", "a b", "a b c d", "a b c d e", "c d e", "b c d", "e d c b a f", "g h i", "c a b j",
                 "a b c d e f"]


def test_the_toy_checkpoint_is_small_fp16_and_records_how_it_was_trained() -> None:
    assert TOY_CHECKPOINT.stat().st_size < 1024 * 1024
    tensors, _ = tensors_and_meta(TOY_CHECKPOINT)
    assert {t.dtype for t in tensors.values() if t.is_floating_point()} == {torch.float16}
    summary = attnscope.load(TOY_CHECKPOINT, "cpu").bundle.summary
    made_with = {k: v for k, v in summary["train_config"].items() if k in TOY_TRAINING}
    assert made_with == TOY_TRAINING  # regenerate with `python -m tests.support` if this changed


def test_the_toy_checkpoint_reverses_letter_strings() -> None:
    tr = attnscope.load(TOY_CHECKPOINT, "cpu")
    assert tr.model.config.max_len == 64  # the app tests check clamping to this length
    for text in USED_BY_TESTS:
        assert tr.translate(text).text == " ".join(reversed(text.split())), text
    pairs = toy_pairs("reverse", 200, seed=999)  # sentences it never saw
    hyps = tr.translate_batch([s for s, _ in pairs])
    accuracy = sum(h == t for h, (_, t) in zip(hyps, pairs)) / len(pairs)
    assert accuracy >= 0.95, accuracy

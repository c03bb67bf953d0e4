"""Greedy, forced and teacher-forced decoding: what each step shows is what the model computed."""
from __future__ import annotations

import math

import pytest
import torch

from attnscope.engine.decoding.decode import Decoded, default_max_len, greedy, greedy_batch, teacher_force
from attnscope.model.batch import pad
from attnscope.model.config import BOS_ID, EOS_ID, PAD_ID
from attnscope.model.tokenization import strip_specials
from tests.engine_fixtures import SEEDS, atol, random_source, tiny_model
from tests.support import run_threads

# eos_bias 0: random models rarely stop, so outputs run to max_len; 3: outputs end early with <eos>.
MODELS = [(seed, bias) for seed in SEEDS for bias in (0.0, 3.0)]


@pytest.mark.parametrize("seed,bias", MODELS)
def test_cached_equals_uncached(seed: int, bias: float, device: torch.device) -> None:
    model, src, tol = tiny_model(seed, bias, device), random_source(seed), atol(device)
    cached = greedy(model, src, max_len=14)
    full = greedy(model, src, max_len=14, use_cache=False)
    assert cached.ids == full.ids
    assert len(cached.steps) == len(cached.ids)
    assert [s.log_prob for s in cached.steps] == pytest.approx([s.log_prob for s in full.steps], abs=tol)
    assert cached.cross.device.type == device.type
    assert (cached.cross - full.cross).abs().max() <= tol
    assert (cached.decoder - full.decoder).abs().max() <= tol


def test_some_outputs_stop_at_eos_and_others_run_to_max_len() -> None:
    """The models above cover both endings (otherwise the tests would not exercise them)."""
    endings = set()
    for seed, bias in MODELS:
        ids = greedy(tiny_model(seed, bias), random_source(seed), max_len=14, capture=False).ids
        assert EOS_ID not in ids[:-1]
        endings.add("eos" if ids[-1] == EOS_ID else "max_len")
        if ids[-1] != EOS_ID:
            assert len(ids) == 14
    assert endings == {"eos", "max_len"}


@pytest.mark.parametrize("seed,bias", MODELS)
@pytest.mark.parametrize("norm,positional", [("post", "sinusoidal"), ("pre", "learned"), ("pre", "relative")])
def test_step_rows_equal_one_teacher_forced_pass(seed: int, bias: float, norm: str, positional: str,
                                                 device: torch.device) -> None:
    model, src = tiny_model(seed, bias, device, norm=norm, positional=positional), random_source(seed)
    tol = atol(device)
    decoded = greedy(model, src, max_len=12)
    forced = teacher_force(model, src, decoded.ids)
    n_dec = model.config.n_decoder_layers
    for t, step in enumerate(decoded.steps):
        assert step.log_prob == pytest.approx(forced.steps[t].log_prob, abs=tol)
    assert decoded.cross.shape == forced.cross.shape == (n_dec, 4, len(decoded.ids), len(src))
    assert decoded.encoder.shape == forced.encoder.shape == (2, 4, len(src), len(src))
    assert decoded.decoder.shape == forced.decoder.shape == (n_dec, 4, len(decoded.ids), len(decoded.ids))
    assert (decoded.encoder - forced.encoder).abs().max() <= tol
    assert (decoded.decoder - forced.decoder).abs().max() <= tol
    assert (decoded.cross - forced.cross).abs().max() <= tol


@pytest.mark.parametrize("seed,bias", MODELS)
def test_rows_sum_to_one_and_the_future_is_exactly_zero(seed: int, bias: float) -> None:
    model = tiny_model(seed, bias)
    for decoded in (greedy(model, random_source(seed), max_len=10),
                    teacher_force(model, random_source(seed), [5, 6, 7, EOS_ID])):
        for weights in (decoded.encoder, decoded.decoder, decoded.cross):
            assert torch.allclose(weights.sum(-1), torch.ones(weights.shape[:-1]), atol=1e-5)
        upper = torch.triu(torch.ones(decoded.decoder.shape[-2:], dtype=torch.bool), diagonal=1)
        assert torch.all(decoded.decoder[..., upper] == 0)
        assert torch.all(decoded.decoder[..., ~upper] > 0)  # softmax never gives exact zeros to allowed keys


@pytest.mark.parametrize("seed", SEEDS)
def test_forced_prefix_is_taken_and_decoding_continues_from_it(seed: int) -> None:
    model, src = tiny_model(seed, 1.0), random_source(seed)
    free = greedy(model, src, max_len=12)
    # a prefix the model would not choose itself: start with a token other than its first choice
    first = next(i for i in range(4, 16) if i != free.ids[0])
    prefix = [first, 9, 4]
    out = greedy(model, src, max_len=12, prefix=prefix)
    assert out.ids[:3] == prefix
    assert [s.forced for s in out.steps] == [True] * 3 + [False] * (len(out.steps) - 3)
    assert out.ids[0] != out.steps[0].top_ids[0]  # forced against the model's own choice
    # after the prefix the model continues greedily: every free token is the argmax of one
    # independent teacher-forced pass over the whole output, and log-probs match that pass
    forced = teacher_force(model, src, out.ids)
    for t, step in enumerate(out.steps):
        assert step.log_prob == pytest.approx(forced.steps[t].log_prob, abs=1e-5)
        if t >= 3:
            assert step.token_id == forced.steps[t].top_ids[0]
    assert len(out.ids) > 3
    uncached = greedy(model, src, max_len=12, prefix=prefix, use_cache=False)
    assert uncached.ids == out.ids


def test_a_forced_eos_ends_decoding() -> None:
    out = greedy(tiny_model(0), random_source(0), max_len=12, prefix=[7, EOS_ID])
    assert out.ids == [7, EOS_ID]
    assert all(s.forced for s in out.steps)


@pytest.mark.parametrize("seed,bias", MODELS)
def test_greedy_batch_on_a_padded_batch_equals_one_by_one(seed: int, bias: float, device: torch.device) -> None:
    model = tiny_model(seed, bias, device)
    sources = [random_source(seed, 7), random_source(seed + 5, 2), random_source(seed + 9, 4), random_source(seed + 3, 5)]
    batch = pad(sources, model.config.pad_id).to(device)
    assert (batch == PAD_ID).any()
    for use_cache in (True, False):
        together = greedy_batch(model, batch, max_len=12, use_cache=use_cache)
        c = model.config
        alone = [strip_specials(greedy(model, s, max_len=12, capture=False).ids, c.eos_id, (c.bos_id, c.pad_id))
                 for s in sources]
        assert together == alone


def test_default_max_len_never_exceeds_the_model() -> None:
    model = tiny_model(0)  # max_len 32
    assert default_max_len(model, 3) == 16
    for src_len in (1, 7, 8, 24, 100):
        assert default_max_len(model, src_len) <= model.config.max_len
    src = random_source(0, n=model.config.max_len - 1)  # the longest source the model reads
    out = greedy(model, src, capture=False)  # default budget: runs to the positional table, not past it
    assert len(out.ids) <= model.config.max_len
    assert len(greedy_batch(model, torch.tensor([src]))[0]) <= model.config.max_len


@pytest.mark.parametrize("seed", SEEDS)
def test_top_k_is_sorted_and_entropy_is_a_valid_entropy(seed: int) -> None:
    model = tiny_model(seed, 1.0)
    out = greedy(model, random_source(seed), max_len=10, top_k=5, prefix=[6])
    vocab = model.config.tgt_vocab_size
    for step in out.steps:
        assert len(step.top_ids) == len(step.top_probs) == 5
        assert step.top_probs == sorted(step.top_probs, reverse=True)
        assert 0 < sum(step.top_probs) <= 1 + 1e-6
        assert 0 <= step.entropy <= math.log(vocab) + 1e-6
        assert len(set(step.top_ids)) == 5
        if not step.forced:
            assert step.token_id == step.top_ids[0]
            assert math.exp(step.log_prob) == pytest.approx(step.top_probs[0], rel=1e-5)
    everything = greedy(model, random_source(seed), max_len=3, top_k=1000)
    assert len(everything.steps[0].top_ids) == vocab


def test_entropy_matches_the_distribution() -> None:
    model, src = tiny_model(1), random_source(1)
    out = greedy(model, src, max_len=4, capture=False)
    with torch.no_grad():
        source = model.encode(torch.tensor([src]))
        logits = model.decode(torch.tensor([[BOS_ID]]), source).logits[0, -1]
    p = logits.softmax(-1)
    assert out.steps[0].entropy == pytest.approx(float(-(p * p.log()).sum()), abs=1e-5)
    assert out.steps[0].log_prob == pytest.approx(float(p.max().log()), abs=1e-5)


def test_capture_false_gives_the_same_output_without_attention() -> None:
    model, src = tiny_model(2, 1.0), random_source(2)
    with_attention, without = greedy(model, src, max_len=12), greedy(model, src, max_len=12, capture=False)
    assert with_attention.ids == without.ids
    assert without.encoder is None and without.decoder is None and without.cross is None
    assert [s.log_prob for s in with_attention.steps] == pytest.approx([s.log_prob for s in without.steps], abs=1e-5)


def test_concurrent_decodes_of_one_model_each_get_their_own_attention() -> None:
    """Sessions share one model: each thread's steps and record are exactly those of its own sentence."""
    model = tiny_model(4)
    sources = [random_source(s) for s in range(6)]
    expected = [greedy(model, s, max_len=10) for s in sources]
    results: dict[int, list[Decoded]] = {i: [] for i in range(len(sources))}

    def work(i: int) -> None:
        for _ in range(3):
            results[i].append(greedy(model, sources[i], max_len=10))

    run_threads(work, [(i,) for i in range(len(sources))])
    for i, runs in results.items():
        assert len(runs) == 3
        for got in runs:
            assert got.ids == expected[i].ids
            assert all(torch.equal(getattr(got, kind), getattr(expected[i], kind)) for kind in ("encoder", "decoder", "cross"))
    assert all(not m._forward_hooks for m in model.modules())

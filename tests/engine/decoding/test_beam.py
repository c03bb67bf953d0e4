"""Beam search: agreement with greedy, cache and batching; scores; the search tree."""
from __future__ import annotations

from collections import Counter

import pytest
import torch

from attnscope.engine.decoding.beam import beam_search, beam_search_batch, normalised
from attnscope.engine.decoding.beam_record import beam_decode
from attnscope.engine.decoding.decode import greedy, teacher_force
from attnscope.model.batch import pad
from attnscope.model.config import BOS_ID, EOS_ID
from attnscope.model.tokenization import strip_specials
from tests.engine_fixtures import SEEDS, T5, atol, random_source, tiny_model

MODELS = [(seed, bias) for seed in SEEDS for bias in (0.0, 2.0)]
STATUSES = {"extended", "pruned", "finished"}


@pytest.mark.parametrize("seed,bias", MODELS)
def test_beam_of_one_is_greedy(seed: int, bias: float) -> None:
    model, src = tiny_model(seed, bias), random_source(seed)
    result = beam_search(model, torch.tensor([src]), 1, max_len=12)[0]
    g = greedy(model, src, max_len=12, capture=False)
    assert len(result.hypotheses) == 1
    ids, score, log_prob = result.hypotheses[0]
    assert ids == g.ids
    assert log_prob == pytest.approx(g.log_prob, abs=1e-4)


@pytest.mark.parametrize("seed,bias", MODELS)
@pytest.mark.parametrize("k", [2, 4])
def test_cached_equals_uncached(seed: int, bias: float, k: int, device: torch.device) -> None:
    model, src, tol = tiny_model(seed, bias, device), torch.tensor([random_source(seed)], device=device), atol(device)
    cached = beam_search(model, src, k, max_len=10)[0]
    full = beam_search(model, src, k, max_len=10, use_cache=False)[0]
    assert [h[0] for h in cached.hypotheses] == [h[0] for h in full.hypotheses]
    assert [h[1] for h in cached.hypotheses] == pytest.approx([h[1] for h in full.hypotheses], abs=tol)
    assert [h[2] for h in cached.hypotheses] == pytest.approx([h[2] for h in full.hypotheses], abs=tol)
    assert [(n.parent, n.token_id, n.status) for n in cached.nodes] == [(n.parent, n.token_id, n.status) for n in full.nodes]


@pytest.mark.parametrize("seed", SEEDS)
def test_cached_equals_uncached_on_a_t5_config(seed: int, device: torch.device) -> None:
    """The relative position bias of each cached step follows the beam's reordered rows (it depends on the step only)."""
    model, src, tol = tiny_model(seed, 1.0, device, **T5), torch.tensor([random_source(seed)], device=device), atol(device)
    cached, full = beam_search(model, src, 3, max_len=10)[0], beam_search(model, src, 3, max_len=10, use_cache=False)[0]
    assert [h[0] for h in cached.hypotheses] == [h[0] for h in full.hypotheses]
    assert [h[2] for h in cached.hypotheses] == pytest.approx([h[2] for h in full.hypotheses], abs=tol)


@pytest.mark.parametrize("seed,bias", MODELS)
def test_a_batch_of_sources_equals_one_by_one(seed: int, bias: float, device: torch.device) -> None:
    model = tiny_model(seed, bias, device)
    sources = [random_source(seed, 6), random_source(seed + 4, 2), random_source(seed + 7, 4)]
    together = beam_search(model, pad(sources, model.config.pad_id).to(device), 3, max_len=10)
    assert len(together) == 3
    for src, r in zip(sources, together):
        alone = beam_search(model, torch.tensor([src], device=device), 3, max_len=10)[0]
        assert [h[0] for h in r.hypotheses] == [h[0] for h in alone.hypotheses]
        assert [h[1] for h in r.hypotheses] == pytest.approx([h[1] for h in alone.hypotheses], abs=atol(device))
        assert [(n.parent, n.token_id, n.status) for n in r.nodes] == [(n.parent, n.token_id, n.status) for n in alone.nodes]
    best = beam_search_batch(model, pad(sources, model.config.pad_id).to(device), 3, max_len=10)
    c = model.config
    assert best == [strip_specials(r.hypotheses[0][0], c.eos_id, (c.bos_id, c.pad_id)) for r in together]


@pytest.mark.parametrize("seed,bias", MODELS)
@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_hypotheses_are_sorted_and_scored_by_normalised_log_prob(seed: int, bias: float, alpha: float) -> None:
    model, src = tiny_model(seed, bias), random_source(seed)
    result = beam_search(model, torch.tensor([src]), 3, max_len=10, length_penalty=alpha)[0]
    assert len(result.hypotheses) == 3
    scores = [h[1] for h in result.hypotheses]
    assert scores == sorted(scores, reverse=True)
    for ids, score, log_prob in result.hypotheses:
        assert score == pytest.approx(log_prob / len(ids) ** alpha, abs=1e-6)
        assert score == normalised(log_prob, len(ids), alpha)
        assert ids[-1] == EOS_ID or len(ids) == 10
        assert EOS_ID not in ids[:-1] and BOS_ID not in ids
        # the log-prob is the model's: the sum over one independent teacher-forced pass
        assert log_prob == pytest.approx(teacher_force(model, src, ids).log_prob, abs=1e-4)
    assert len({tuple(h[0]) for h in result.hypotheses}) == 3  # no duplicates


def test_length_penalty_changes_the_ranking_somewhere() -> None:
    """Sanity check that alpha is used: for some model the best hypothesis depends on it."""
    changed = False
    for seed in range(6):
        model, src = tiny_model(seed, 2.0), torch.tensor([random_source(seed)])
        a = beam_search(model, src, 4, max_len=10, length_penalty=0.0)[0].hypotheses
        b = beam_search(model, src, 4, max_len=10, length_penalty=2.0)[0].hypotheses
        changed |= [h[0] for h in a] != [h[0] for h in b]
    assert changed


@pytest.mark.parametrize("seed,bias", MODELS)
@pytest.mark.parametrize("k", [1, 3, 5])
def test_search_tree_is_consistent(seed: int, bias: float, k: int) -> None:
    model, src = tiny_model(seed, bias), random_source(seed)
    result = beam_search(model, torch.tensor([src]), k, max_len=9)[0]
    nodes = result.nodes
    root = nodes[0]
    assert (root.parent, root.step, root.token_id, root.status) == (None, 0, BOS_ID, "extended")
    children = Counter(n.parent for n in nodes if n.parent is not None)
    for i, node in enumerate(nodes):
        assert node.id == i
        assert node.status in STATUSES, node
        if i:
            assert node.parent is not None and 0 <= node.parent < i  # the parent exists (and came first)
            parent = nodes[node.parent]
            assert parent.step == node.step - 1
            assert parent.status == "extended"
            assert node.log_prob <= parent.log_prob + 1e-6  # log-probs only go down
        if node.status == "extended":
            assert children[node.id] > 0
        else:
            assert children[node.id] == 0
        if node.status == "finished":
            assert node.score == pytest.approx(normalised(node.log_prob, node.step, 1.0))
            assert len(result.path(node.id)) == node.step
        else:
            assert node.score is None
    finished = {tuple(result.path(n.id)): n for n in nodes if n.status == "finished"}
    assert len(finished) == len(result.hypotheses)
    for ids, score, log_prob in result.hypotheses:
        node = finished[tuple(ids)]
        assert result.path(node.id) == ids
        assert (node.score, node.log_prob) == (score, log_prob)
    alive = Counter(n.step for n in nodes if n.status in ("extended", "pruned"))
    assert alive and max(alive.values()) <= k


def test_at_most_beam_size_alive_per_step_with_a_wide_beam() -> None:
    """Vocabulary 16 with beam 8: the first step cannot even fill the beam; nothing breaks."""
    model, src = tiny_model(1), random_source(1)
    result = beam_search(model, torch.tensor([src]), 8, max_len=6)[0]
    alive = Counter(n.step for n in result.nodes if n.status in ("extended", "pruned"))
    assert max(alive.values()) <= 8
    assert len(result.hypotheses) == 8
    scores = [h[1] for h in result.hypotheses]
    assert scores == sorted(scores, reverse=True)


def test_recording_while_searching_equals_a_teacher_forced_pass_over_the_best() -> None:
    """beam_decode's record (no second pass) against the pass the translator used to make: the same steps and,
    to float32 rounding, the same weights; some of the best hypotheses run through beam rows other than 0."""
    moved = 0
    for seed in range(8):
        for bias in (0.0, 1.0):
            for k in (2, 3, 5):
                model, src = tiny_model(seed, bias), random_source(seed, n=4 + seed)
                result, decoded = beam_decode(model, src, k, max_len=14)
                assert [n.step for n in result.nodes[1:]] == sorted(n.step for n in result.nodes[1:])
                assert decoded.ids == result.hypotheses[0][0]
                reference = teacher_force(model, src, decoded.ids)
                for kind in ("encoder", "decoder", "cross"):
                    assert torch.allclose(getattr(decoded, kind), getattr(reference, kind), atol=1e-5, rtol=0)
                for mine, theirs in zip(decoded.steps, reference.steps, strict=True):
                    assert mine.token_id == theirs.token_id and mine.top_ids == theirs.top_ids
                    assert mine.log_prob == pytest.approx(theirs.log_prob, abs=1e-5)
                    assert mine.top_probs == pytest.approx(theirs.top_probs, abs=1e-5)
                    assert mine.entropy == pytest.approx(theirs.entropy, abs=1e-5)
                assert decoded.log_prob == pytest.approx(result.hypotheses[0][2], abs=1e-4)
                best = next(n for n in result.nodes if n.status == "finished" and result.path(n.id) == decoded.ids)
                while best.parent:
                    moved += best.slot != 0
                    best = result.nodes[best.parent]
    assert moved > 10  # the rows were reordered under many best hypotheses, and read where they went

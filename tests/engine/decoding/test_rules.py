"""Decoding under each framework's default rules, against searches written here from the frameworks' own loops
(OpenNMT-py 3.5's translator/beam_search, fairseq 0.12.2's SequenceGenerator), full forward passes at every
step (no cache, none of attnscope's decoding code), and the recorded attention under those rules."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from attnscope.checkpoints.decoding_rules import ATTNSCOPE, DecodingRules, fairseq_defaults, opennmt_defaults
from attnscope.engine.decoding.beam import beam_search
from attnscope.engine.decoding.decode import greedy, greedy_batch
from attnscope.engine.decoding.rules import repeated
from attnscope.model.batch import pad
from attnscope.model.config import BOS_ID, EOS_ID
from attnscope.model.tokenization import strip_specials
from attnscope.model.transformer import Transformer
from tests.engine_fixtures import SEEDS, random_source, tiny_model, tiny_translator

NEG = float("-inf")


@torch.no_grad()
def next_log_probs(model: Transformer, src: list[int], prefixes: list[list[int]]) -> torch.Tensor:
    """(R, V) log-probabilities of each prefix's next token, from one full forward pass (no cache), on the CPU."""
    device = next(model.parameters()).device
    out = model(torch.tensor([src] * len(prefixes), device=device), torch.tensor(prefixes, device=device))
    return out[:, -1].float().log_softmax(-1).cpu()


def never_ending(seed: int, **overrides: object) -> Transformer:
    """A tiny model whose outputs never end by themselves: </s> is always the least likely token."""
    model = tiny_model(seed, max_len=300, **overrides)
    with torch.no_grad():
        model.generator.bias[EOS_ID] -= 1e4
    return model


def fairseq_search(model: Transformer, src: list[int], k: int, *, a: float = 0, b: int = 200, positions: int = 1024,
                   min_len: int = 1, lenpen: float = 1.0, ngram: int = 0) -> list[int]:
    """fairseq's SequenceGenerator: max_len = min(int(a x S + b), max_target_positions - 1); at step >= max_len only </s>
    (its log-prob kept); before min_len no </s>; with no_repeat_ngram_size, no token that would repeat an n-gram of
    the hypothesis (its start token counted); the 2k best candidates, those in </s> among the first k finalized
    with score / (step + 1)^lenpen until k are; the best finalized."""
    max_len = min(int(a * len(src) + b), positions - 1)
    live, finalized = [([BOS_ID], 0.0)], []
    for step in range(max_len + 1):
        lp = next_log_probs(model, src, [p for p, _ in live])
        if step >= max_len:
            eos = lp[:, EOS_ID].clone()
            lp[:] = NEG
            lp[:, EOS_ID] = eos
        if step < min_len:
            lp[:, EOS_ID] = NEG
        for r, (seq, _) in enumerate(live):
            start = [model.config.decoder_start or BOS_ID, *seq[1:]]
            grams = [tuple(start[i:i + ngram]) for i in range(len(start) - ngram + 1)] if ngram else []
            lp[r, [g[-1] for g in grams if list(g[:-1]) == start[len(start) - ngram + 1:]]] = NEG
        cands = sorted(((s + float(lp[r, v]), r, v) for r, (_, s) in enumerate(live) for v in range(lp.shape[1])),
                       key=lambda c: -c[0])[:2 * k]
        nxt = []
        for rank, (score, r, v) in enumerate(cands):
            if score == NEG:
                break
            if v == EOS_ID:
                if rank < k and len(finalized) < k:
                    finalized.append((live[r][0][1:] + [v], score / (step + 1) ** lenpen))
            elif len(nxt) < k:
                nxt.append((live[r][0] + [v], score))
        if len(finalized) >= k:
            break
        live = nxt
    return max(finalized, key=lambda f: f[1])[0]


def opennmt_search(model: Transformer, src: list[int], k: int, *, alpha: float = 1.0, ratio: float = 1.25,
                   max_length: int = 250) -> list[int]:
    """OpenNMT-py's translator and BeamSearch (GreedySearch for k=1): int(min(max_length, S x ratio + 5)) steps; the k
    best of (score + log-prob) / (len + 1)^alpha ("avg", len counting the start token); those in </s>, or all at the
    last step, finish with that score and leave the beam; done when the best ranked candidate finished."""
    steps = int(min(max_length, len(src) * ratio + 5))
    live, hyps = [([BOS_ID], 0.0)], []
    for step in range(steps):
        lp = next_log_probs(model, src, [p for p, _ in live])
        penalty = (step + 2) ** alpha
        cands = sorted((((s + float(lp[r, v])) / penalty, r, v) for r, (_, s) in enumerate(live)
                        for v in range(lp.shape[1])), key=lambda c: -c[0])[:k]
        nxt, best_finished = [], False
        for j, (norm, r, v) in enumerate(cands):
            seq = live[r][0] + [v]
            if v == EOS_ID or step + 1 == steps:
                hyps.append((seq[1:], norm))
                best_finished = best_finished or j == 0
            else:
                nxt.append((seq, norm * penalty))
        if best_finished:
            break
        live = nxt
    return max(hyps, key=lambda h: h[1])[0]


def ours(model: Transformer, src: list[int], k: int, rules: DecodingRules) -> list[int]:
    if k == 1:
        return greedy(model, src, capture=False, rules=rules).ids
    device = next(model.parameters()).device
    return beam_search(model, torch.tensor([src], device=device), k, rules=rules)[0].hypotheses[0][0]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("k", [1, 4])
def test_opennmt_cuts_an_endless_output_at_its_length_rule_without_eos(seed: int, k: int) -> None:
    model, src = never_ending(seed), random_source(seed, n=7)
    got = ours(model, src, k, opennmt_defaults())
    assert len(got) == int(min(250, len(src) * 1.25 + 5)) and EOS_ID not in got
    assert got == opennmt_search(model, src, k)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("k", [1, 3])
def test_fairseq_forces_eos_after_max_len_b_free_tokens(seed: int, k: int) -> None:
    model, src = never_ending(seed), random_source(seed, n=5)
    rules = dataclasses.replace(fairseq_defaults(1024), len_b=31.0)  # max_len_b 30: 30 free tokens, then </s>
    got = ours(model, src, k, rules)
    assert len(got) == 31 and got[-1] == EOS_ID and EOS_ID not in got[:-1]
    assert got == fairseq_search(model, src, k, b=30)


def test_fairseq_limit_stops_at_the_model_positions() -> None:
    model, src = never_ending(0), random_source(0)
    got = greedy(model, src, capture=False, rules=fairseq_defaults(20)).ids
    assert got == fairseq_search(model, src, 1, positions=20) and len(got) == 20 and got[-1] == EOS_ID


@pytest.mark.parametrize("seed", SEEDS)
def test_fairseq_bans_eos_at_the_first_step(seed: int) -> None:
    model, src = tiny_model(seed, eos_bias=50.0), random_source(seed)  # </s> is everyone's first choice
    assert greedy(model, src, capture=False, rules=ATTNSCOPE).ids == [EOS_ID]
    got = greedy(model, src, capture=False, rules=fairseq_defaults(1024)).ids
    assert len(got) == 2 and got[-1] == EOS_ID and got == fairseq_search(model, src, 1)


@pytest.mark.parametrize("seed,bias", [(s, b) for s in SEEDS for b in (0.0, 1.5, 3.0)])
@pytest.mark.parametrize("k", [2, 4])
def test_beam_searches_are_the_frameworks(seed: int, bias: float, k: int) -> None:
    model, src = tiny_model(seed, eos_bias=bias, max_len=300), random_source(seed)
    assert ours(model, src, k, opennmt_defaults()) == opennmt_search(model, src, k)
    assert ours(model, src, k, fairseq_defaults(1024)) == fairseq_search(model, src, k)
    alpha = dataclasses.replace(fairseq_defaults(1024), length_penalty=2.0)
    assert ours(model, src, k, alpha) == fairseq_search(model, src, k, lenpen=2.0)


def test_the_length_penalty_reorders_finished_hypotheses() -> None:
    """Somewhere among these models the best raw log-prob and the best normalised score are different hypotheses:
    the rules rank by the normalised one (OpenNMT-py's (n + 1)^alpha, fairseq's n^alpha)."""
    differ = 0
    for seed in range(12):
        model, src = tiny_model(seed % 3, eos_bias=1.0 + seed / 4, max_len=300), random_source(seed)
        for rules in (opennmt_defaults(), dataclasses.replace(fairseq_defaults(1024), length_penalty=2.0)):
            result = beam_search(model, torch.tensor([src]), 4, rules=rules)[0]
            scores = [(score, log_prob, ids) for ids, score, log_prob in result.hypotheses]
            assert all(score == pytest.approx(lp / rules.divisor(len(ids))) for score, lp, ids in scores)
            assert result.hypotheses[0][1] == max(s for s, _, _ in scores)
            differ += max(scores, key=lambda s: s[1])[2] != result.hypotheses[0][0]
    assert differ


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n", [1, 2, 3])
def test_no_repeat_ngram_blocks_every_repeat(seed: int, n: int) -> None:
    model, src = never_ending(seed, tgt_vocab_size=24, src_vocab_size=24), random_source(seed, vocab=24)
    rules = dataclasses.replace(ATTNSCOPE, len_a=0.0, len_b=18.0, no_repeat_ngram=n)
    free = greedy(model, src, capture=False, rules=dataclasses.replace(rules, no_repeat_ngram=0)).ids
    for ids in (greedy(model, src, capture=False, rules=rules).ids,
                beam_search(model, torch.tensor([src]), 3, rules=rules)[0].hypotheses[0][0]):
        seq = [BOS_ID, *ids]
        grams = [tuple(seq[i:i + n]) for i in range(len(seq) - n + 1)]
        assert len(grams) == len(set(grams)) and len(ids) == 18
    if n == 2:
        seq = [BOS_ID, *free]
        assert len({tuple(seq[i:i + 2]) for i in range(len(seq) - 1)}) < len(seq) - 1  # unblocked, it repeats


def test_repeated_names_the_tokens_that_complete_a_seen_ngram() -> None:
    assert repeated([[1, 5, 6, 5]], 2) == [[6]]
    assert repeated([[1, 5, 6, 5, 7, 5]], 2) == [[6, 7]]
    assert repeated([[1, 5, 6, 5, 6]], 3) == [[5]]
    assert repeated([[1, 5]], 3) == [[]] and repeated([[1, 5, 5]], 1) == [[1, 5]]


@pytest.mark.parametrize("rules", [opennmt_defaults(), fairseq_defaults(1024), ATTNSCOPE])
def test_a_batch_decodes_what_each_sentence_does_alone(rules: DecodingRules) -> None:
    model = tiny_model(1, eos_bias=1.0, max_len=300)
    sources = [random_source(s, n=n) for s, n in ((0, 6), (1, 6), (2, 6))]
    together = greedy_batch(model, pad(sources, model.config.pad_id), rules=rules)
    c = model.config
    assert together == [strip_specials(greedy(model, s, capture=False, rules=rules).ids, c.eos_id, (c.bos_id, c.pad_id))
                        for s in sources]


@pytest.mark.parametrize("beam", [1, 3])
@pytest.mark.parametrize("rules", [dataclasses.replace(fairseq_defaults(1024), len_b=9.0, no_repeat_ngram=2),
                                   dataclasses.replace(opennmt_defaults(), len_cap=8),
                                   DecodingRules("hf", len_a=0.0, len_b=9.0, forced_eos="certain", finish="hf",
                                                 length_penalty=0.6, no_repeat_ngram=3)])
def test_the_record_under_the_rules_is_the_teacher_forced_pass(beam: int, rules: DecodingRules) -> None:
    tr = tiny_translator(0)
    with torch.no_grad():
        tr.model.generator.bias[EOS_ID] -= 1e4  # runs to the limit: forced </s> (fairseq), a cut without it (OpenNMT-py)
    got = tr.translate("a b c d", beam_size=beam, rules=rules)
    assert len(got.target_ids) == got.budget == (8 if rules.forced_eos == "off" else 9)
    assert (got.target_ids[-1] == EOS_ID) == (rules.forced_eos != "off")
    forced = tr.hypothesis("a b c d", list(got.target_ids))
    for kind in ("encoder", "decoder", "cross"):
        assert torch.allclose(torch.tensor(getattr(got.attention, kind)), torch.tensor(getattr(forced.attention, kind)),
                              atol=1e-5), kind


def test_the_translator_takes_the_choice() -> None:
    tr = tiny_translator(0)
    assert tr.rules == ATTNSCOPE and tr.decoding_rules("model") == ATTNSCOPE  # a checkpoint without rules: attnscope's
    tr.bundle.summary["decoding"] = opennmt_defaults().to_dict()
    assert tr.decoding_rules("model") == opennmt_defaults() and tr.decoding_rules("attnscope") == ATTNSCOPE
    n = len(tr.source("a b c")[0])  # `a b c </s>`
    assert tr.translate("a b c", rules="model").budget == int(min(250, n * 1.25 + 5)) != 2 * n + 10
    assert tr.translate("a b c", rules="attnscope").budget == 2 * n + 10
    with pytest.raises(ValueError, match="'model'.*'attnscope'"):
        tr.translate("a b c", rules="fairseq")


@pytest.mark.parametrize("rules", [opennmt_defaults(), dataclasses.replace(fairseq_defaults(1024), no_repeat_ngram=2),
                                   DecodingRules("hf", len_a=0.0, len_b=12.0, forced_eos="certain", finish="hf",
                                                 min_len=3, no_repeat_ngram=2)])
def test_the_rules_decode_on_the_models_device(rules: DecodingRules, device: torch.device) -> None:
    """The bans and forced tokens are applied where the model computes (a GPU too): the same outputs as the
    searches written here."""
    for seed in SEEDS:
        model, src = tiny_model(seed, eos_bias=1.0, device=device, max_len=300), random_source(seed)
        batch = pad([src, random_source(seed + 3)], model.config.pad_id).to(device)
        c = model.config
        alone = strip_specials(greedy(model, src, capture=False, rules=rules).ids, c.eos_id, (c.bos_id, c.pad_id))
        assert greedy_batch(model, batch, rules=rules)[0] == alone
        if rules.finish == "best-finished":
            assert ours(model, src, 3, rules) == opennmt_search(model.cpu(), src, 3)
        elif rules.finish == "k-finished":
            assert ours(model, src, 3, rules) == fairseq_search(model.cpu(), src, 3, ngram=2)

"""Decoding rules applied while decoding (greedy, batched greedy and beam search; the rules themselves are plain data in
checkpoints/decoding_rules.py): the length limit, the bans and forced tokens of each step, and beam search's
scores and finishing, as each framework computes them.

Each step's log-probabilities are masked, never renormalised, as OpenNMT-py, fairseq and transformers' beam search
do: a hypothesis' score is the sum of the model's own log-probabilities (with transformers' forced </s>, whose
processor sets its log-prob to 0, as 0).
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from attnscope.checkpoints.checkpoint import Bundle, CheckpointError
from attnscope.checkpoints.decoding_rules import ATTNSCOPE, MODEL, OWN, DecodingRules, RulesError, stored
from attnscope.model.transformer import Transformer


def model_rules(bundle: Bundle) -> DecodingRules:
    """The rules recorded in a checkpoint (attnscope's own for one saved before rules were recorded)."""
    try:
        return stored(bundle.summary)
    except RulesError as err:
        raise CheckpointError(f"the checkpoint's decoding rules are not valid: {err}") from None


def chosen(bundle: Bundle, choice: DecodingRules | str | None) -> DecodingRules:
    """Rules by a user's choice: "model" (None: the checkpoint's own), "attnscope", or rules given as they are."""
    if isinstance(choice, DecodingRules):
        return choice
    if choice in (None, MODEL):
        return model_rules(bundle)
    if choice == OWN:
        return ATTNSCOPE
    raise ValueError(f"decoding rules are 'model' (the checkpoint's) or 'attnscope' (attnscope's own), got {choice!r}")


def limit(rules: DecodingRules, model: Transformer, src_len: int) -> int:
    """The most tokens an output may have under `rules` for a source of `src_len` ids (the model's positions at most)."""
    return rules.limit(src_len, model.config.max_len)


def history(model: Transformer, rules: DecodingRules, inputs: Tensor | list[list[int]]) -> Tensor | None:
    """Decoder inputs (R, t+1) as the framework sees them, the start token it feeds and the tokens so far, for the
    no-repeat rule (None when the rules have none: nothing to build at every step)."""
    if not rules.no_repeat_ngram:
        return None
    inputs = torch.as_tensor(inputs)
    start = model.config.decoder_start
    return inputs if start is None else torch.cat([torch.full_like(inputs[:, :1], start), inputs[:, 1:]], 1)


def constrain(log_probs: Tensor, rules: DecodingRules, step: int, budget: int, seen: Tensor | None, eos: int) -> Tensor:
    """Step `step`'s (0-based) log-probabilities (R, V) under `rules` when outputs may have `budget` tokens: </s> (id
    `eos`, the model config's) banned before min_len tokens, </s> alone at the budget's last step (forced_eos), and no
    token that would repeat an n-gram of `seen` (R, step + 1: each row's start token and outputs so far). Returns a
    masked copy."""
    if not (step < rules.min_len or rules.forced_eos != "off" and step == budget - 1 or rules.no_repeat_ngram):
        return log_probs
    out = log_probs.clone()
    if step < rules.min_len:
        out[:, eos] = float("-inf")
    if rules.forced_eos != "off" and step == budget - 1:
        kept = out[:, eos].clone() if rules.forced_eos == "keep" else torch.zeros_like(out[:, eos])
        out.fill_(float("-inf"))
        out[:, eos] = kept
    if rules.no_repeat_ngram and seen is not None:
        for row, banned in enumerate(repeated(seen.tolist(), rules.no_repeat_ngram)):
            if banned:
                out[row, banned] = float("-inf")
    return out


def repeated(rows: Sequence[Sequence[int]], n: int) -> list[list[int]]:
    """For each row of ids, the tokens that would complete an n-gram the row already holds."""
    out = []
    for ids in rows:
        if len(ids) + 1 < n:
            out.append([])
            continue
        tail = tuple(ids[len(ids) - n + 1:]) if n > 1 else ()
        out.append(sorted({ids[i + n - 1] for i in range(len(ids) - n + 1) if tuple(ids[i:i + n - 1]) == tail}))
    return out


def triage(rules: DecodingRules, tokens: Sequence[int], k: int, last: bool, eos: int) -> tuple[list[int], list[int]]:
    """The ranks (of a step's candidates, best first) that finish and that carry on in the beam. A candidate ending
    in </s> (or any, at the limit) finishes when it is among the k best; the k best others carry on, except with
    OpenNMT-py's rule ("best-finished"), where only the k best candidates survive, those in </s> finishing."""
    ends = [r for r, t in enumerate(tokens) if t == eos or last]
    if rules.finish == "best-finished":
        return [r for r in ends if r < k], [r for r in range(min(k, len(tokens))) if r not in ends]
    ending = set(ends)
    return [r for r in ends if r < k], [r for r in range(len(tokens)) if r not in ending][:k]


def keep(rules: DecodingRules, found: list[float], score: float, k: int) -> int | None:
    """Where a newly finished hypothesis of normalised `score` goes among the `found` ones' scores: their count (added),
    the index of the one it replaces (transformers keeps the k best), or None (not kept)."""
    if rules.finish == "best-finished" or len(found) < k:
        return len(found)
    if rules.finish in ("hf", "hf-never"):
        worst = min(range(len(found)), key=found.__getitem__)
        return worst if score > found[worst] else None
    return None


def done(rules: DecodingRules, found: list[float], k: int, best_live: float | None, length: int, budget: int,
         best_rank_finished: bool) -> bool:
    """Whether one source's search is over after a step that left outputs `length` tokens long: k finished (attnscope,
    fairseq), no live hypothesis that can beat the worst of k finished (transformers), or the step's best candidate
    finished (OpenNMT-py)."""
    if rules.finish == "best-finished":
        return best_rank_finished
    if len(found) < k:
        return best_live is None
    if rules.finish == "k-finished" or best_live is None:
        return True
    at = budget if rules.finish == "hf-never" and rules.length_penalty > 0 else length
    return best_live / (max(at, 1) ** rules.length_penalty) <= min(found)

"""What `record_attention` captured: every call of every attention module, and the kind of each module.

A module's kind comes, in this order, from `kinds=` given by the caller; from attnscope's own
attention modules; from structure: attention whose keys come from another tensor than its queries
(the encoder's output) is cross-attention wherever it lives and whatever it is called; a
self-attention is encoder or decoder self-attention by its name (enc* / dec*), else by where it
sits: a decoder's self-attention shares its layer with a cross-attention, an encoder's does not.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Sequence

import numpy as np
from torch import Tensor

from attnscope.engine.recording.loop_calls import analyse, extends
from attnscope.model.kinds import KINDS, Kind
from attnscope.records.attention import AttentionRecord, RecordError

CROSS_NAMES = ("cross", "src_attn", "multihead_attn", "encoder_attn", "enc_dec", "encdec", "context_attn", "inter_attn")
Structure = Literal["self", "cross"]


@dataclass(frozen=True)
class ModuleAttention:
    """One attention module's weights over a recorded block: its calls joined into whole sentences."""

    name: str  # the module's dotted name in the model
    kind: Kind | None  # encoder / decoder / cross; None when the recorder could not tell (pass kinds=...)
    weights: Tensor  # [batch, head, query, key]


@dataclass
class Recording:
    """Weights captured per attention module name, one tensor per call, each [B, H, Q, K]."""

    calls: dict[str, list[Tensor]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # e.g. "switched to eval mode"
    kinds: dict[str, Kind | None] = field(default_factory=dict)  # None: the recorder could not tell
    structure: dict[str, Structure] = field(default_factory=dict)  # whether queries and keys shared a source
    reordered: set[str] = field(default_factory=set)  # modules whose keys had their batch rows moved (a beam)

    def keep(self, name: str, weights: Tensor, structure: Structure | None = None, reordered: bool = False) -> None:
        """Add one call of module `name`: weights [B, H, Q, K] ([N, Q, K] is kept as one row of N heads)."""
        while weights.dim() < 4:
            weights = weights.unsqueeze(0)
        if weights.dim() > 4:
            weights = weights.flatten(0, -4)
        self.calls.setdefault(name, []).append(weights)
        if structure is not None and self.structure.get(name) != "cross":
            self.structure[name] = structure
        if reordered:
            self.reordered.add(name)

    @property
    def modules(self) -> tuple[ModuleAttention, ...]:
        """Every recorded module, in call order, with its calls joined into whole sentences.

        Identical repeated calls (an encoder re-run at every step) count once; one-query calls of a
        cached loop are stacked (rows right-padded with zeros: the keys not there yet); a loop that
        re-runs the whole prefix gives, per row, the query each call added. See loop_calls.py.
        """
        return tuple(self.module(name) for name in self.calls)

    def module(self, name: str) -> ModuleAttention:
        """One module's weights, [B, H, Q, K] (its calls joined as `modules` says)."""
        if name not in self.calls:
            raise RecordError(f"nothing was recorded for {name!r}; recorded: {', '.join(self.calls) or 'nothing'}")
        return ModuleAttention(name, self.kinds.get(name), analyse(name, self.calls[name], name in self.reordered).all_rows())

    def clear(self) -> None:
        self.calls.clear()

    def resolve_kinds(self, given: dict[str, Kind | None]) -> None:
        """Set `kinds` of every recorded module: `given` (the caller's, attnscope's), else from structure and names."""
        crosses = [n for n in self.calls if given.get(n) == "cross" or self.structure.get(n) == "cross"]
        selves = [n for n in self.calls if n not in crosses]
        for name in self.calls:
            if given.get(name) in KINDS:
                self.kinds[name] = given[name]
            elif name in crosses:
                self.kinds[name] = "cross"
            elif name in self.structure:
                self.kinds[name] = self_attention_kind(name, crosses, selves)
            else:
                self.kinds[name] = infer_kind(name)

    def by_kind(self, kinds: dict[str, Kind] | None = None) -> dict[Kind, list[str]]:
        """Recorded module names per kind, in call order; `kinds` overrides what was inferred."""
        known = {**self.kinds, **(kinds or {})}
        bad = {n: k for n, k in (kinds or {}).items() if k not in KINDS}
        if bad:
            raise RecordError(f"unknown kind {next(iter(bad.values()))!r} for {next(iter(bad))}: use one of "
                              f"{', '.join(KINDS)}")
        unknown = [n for n in self.calls if known.get(n) not in KINDS]
        if unknown:
            raise RecordError(unknown_kind_message(unknown, self.structure))
        return {kind: [n for n in self.calls if known[n] == kind] for kind in KINDS}

    def to_record(self, source_tokens: Sequence[str], target_tokens: Sequence[str], *, item: int | None = None,
                  beam_rows: Sequence[int] | None = None, kinds: dict[str, Kind] | None = None) -> AttentionRecord:
        """An AttentionRecord of one sentence, for every figure builder and the app.

        Args:
            source_tokens: the encoder's input tokens, one per source position (padding left out).
            target_tokens: the decoder's inputs (<bos> y1 .. y_{n-1}), one per decoder query; rows beyond
                them (a batch or beam that kept going after this sentence ended) are left out.
            item: the batch row (of the encoder, which a beam search may run once for all beams); for a beam
                search that re-runs the whole prefix, the hypothesis' row in the last step (its rows are traced back).
                Left out: row 0, unless the rows were reordered between steps (a beam): then which hypothesis is
                meant is not known, and it is refused.
            beam_rows: for a beam search with a cache: the hypothesis' batch row at every decoding step
                (Hugging Face: output.beam_indices[i] up to its first -1); the decoder's rows come from these.
            kinds: module name -> "encoder" | "decoder" | "cross", for modules the recorder could not tell.
        """
        groups = self.by_kind(kinds)
        missing = [k for k in KINDS if not groups[k]]
        if missing:
            raise RecordError(f"nothing was recorded for {', '.join(missing)} attention; recorded: "
                              f"{', '.join(f'{n} ({self.kinds.get(n)})' for n in self.calls) or 'nothing'}")
        if item is None:
            if beam_rows is None:
                self._one_hypothesis([*groups["decoder"], *groups["cross"]])
            item = 0
        sizes = {"encoder": (len(source_tokens), len(source_tokens)), "decoder": (len(target_tokens),) * 2,
                 "cross": (len(target_tokens), len(source_tokens))}
        arrays = {kind: fit(self._layers(groups[kind], item, None if kind == "encoder" else beam_rows), kind,
                            *sizes[kind]) for kind in KINDS}
        return AttentionRecord(tuple(source_tokens), tuple(target_tokens), arrays["encoder"], arrays["decoder"],
                               arrays["cross"])

    def _one_hypothesis(self, names: Sequence[str]) -> None:
        """Refuse to guess a row of a multi-row recording whose rows changed places between steps (a beam search):
        row 0 of the last step may be another hypothesis than the one returned."""
        for name in names:
            calls = analyse(name, self.calls[name], name in self.reordered).calls
            rows = calls[-1].shape[0]
            moved = len({c.shape[0] for c in calls}) > 1 or name in self.reordered or any(
                not extends(later[r], earlier[r]) for earlier, later in zip(calls, calls[1:]) for r in range(rows)
                if later.shape[1] == earlier.shape[1] + 1)
            if rows > 1 and moved:
                raise RecordError(f"{name} ran on {rows} rows whose order changed between steps (a beam search), so "
                                  "row 0 need not be the hypothesis you returned: pass to_record(..., item=its row in "
                                  "the last step), or beam_rows=[its row at every step]")

    def _layers(self, names: Sequence[str], item: int, beam_rows: Sequence[int] | None) -> np.ndarray:
        """[L, H, Q, K] of one sentence: each module's rows, one layer each."""
        rows = [analyse(n, self.calls[n], n in self.reordered).rows(item, beam_rows).float().cpu().numpy() for n in names]
        if len({r.shape for r in rows}) > 1:
            raise RecordError("these modules of one kind computed differently shaped attention, so they are not layers "
                              f"of one stack: {', '.join(f'{n} {list(r.shape)}' for n, r in zip(names, rows))}; pass "
                              "kinds={...} to say which are encoder, decoder or cross-attention")
        return np.stack(rows)


def fit(array: np.ndarray, kind: Kind, n_queries: int, n_keys: int) -> np.ndarray:
    """[L, H, Q, K] cut to a sentence shorter than its batch: queries after it ended (a batch or a beam kept
    going) and keys that are padding (weight 0) go; weight on a cut key means the tokens given are wrong."""
    queries, keys = array.shape[-2:]
    if queries < n_queries or keys < n_keys:
        return array  # fewer rows than tokens: AttentionRecord says so
    if array[..., :n_queries, n_keys:].any():
        raise RecordError(f"{kind} attention puts weight on {keys} positions but {n_keys} tokens were given: give one "
                          f"token per position (the positions beyond them are not padding)")
    return array[..., :n_queries, :n_keys]


def infer_kind(name: str) -> Kind | None:
    """A module's kind from its dotted name (cross-attention names first, then an enc*/dec* component)."""
    parts = name.lower().split(".")
    if any(c in part for part in parts for c in CROSS_NAMES):
        return "cross"
    for part in reversed(parts):
        if part.startswith("dec"):
            return "decoder"
        if part.startswith("enc"):
            return "encoder"
    return None


def self_attention_kind(name: str, crosses: Sequence[str], selves: Sequence[str]) -> Kind | None:
    """Encoder or decoder self-attention: by name, else decoder when it sits closer to a cross-attention
    (same layer) than to any other self-attention; None when there is no cross-attention to tell by."""
    named = infer_kind(name)
    if named in ("encoder", "decoder"):
        return named
    if not crosses:
        return None
    near_cross = max(_shared_depth(name, c) for c in crosses)
    near_self = max((_shared_depth(name, s) for s in selves if s != name), default=-1)
    return "decoder" if near_cross > near_self else "encoder"


def _shared_depth(a: str, b: str) -> int:
    """How many leading name components two module names share (their common ancestor's depth)."""
    n = 0
    for x, y in zip(a.split("."), b.split(".")):
        if x != y:
            break
        n += 1
    return n


def unknown_kind_message(names: Sequence[str], structure: dict[str, Structure]) -> str:
    """One sentence: which modules, what was seen, and the kinds= to pass."""
    seen = [f"{n} (self-attention)" if structure.get(n) == "self" else n for n in names]
    template = ", ".join(f"'{n}': '{'encoder' if structure.get(n) == 'self' else 'cross'}'" for n in names)
    return (f"cannot tell the kind of {', '.join(seen)}: pass kinds={{{template}}} (each 'encoder', 'decoder' "
            "or 'cross') to record_attention(model, kinds=...) or to rec.to_record(..., kinds=...)")

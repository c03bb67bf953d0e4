"""AttentionRecord: the one type that carries captured attention to every view.

Arrays are [layer, head, query, key]. Decoder queries are the decoder's input positions
(<bos> y1 .. yn): row t is what the model attended to while choosing output token t+1.
"""
from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from attnscope.model.kinds import KIND_LABELS, KINDS, Kind

if TYPE_CHECKING:  # pandas (~70 MB, ~0.5 s) is imported only when a table is asked for
    import pandas as pd

__all__ = ["KINDS", "KIND_LABELS", "AttentionRecord", "DecodeStep", "Kind", "RecordError", "StepAttention"]


class RecordError(ValueError):
    """Arrays and tokens of a record do not fit together."""


@dataclass(frozen=True)
class AttentionRecord:
    """Attention weights of one source/target pair, as the model computed them."""

    source_tokens: tuple[str, ...]
    target_tokens: tuple[str, ...]
    encoder: np.ndarray  # [L, H, S, S]
    decoder: np.ndarray  # [L, H, T, T]  masked self-attention
    cross: np.ndarray  # [L, H, T, S]

    def __post_init__(self) -> None:
        object.__setattr__(self, "source_tokens", tuple(self.source_tokens))
        object.__setattr__(self, "target_tokens", tuple(self.target_tokens))
        for kind in KINDS:
            array = np.asarray(getattr(self, kind))
            if array.ndim != 4:
                raise RecordError(f"{kind} attention must be [layer, head, query, key], got shape {list(array.shape)}")
            if not np.issubdtype(array.dtype, np.floating):
                raise RecordError(f"{kind} attention must hold floats, got {array.dtype}")
            queries, keys = self.axes(kind)
            if array.shape[2:] != (len(queries), len(keys)):
                raise RecordError(f"{kind} attention has {array.shape[2]} queries x {array.shape[3]} keys, but the "
                                  f"tokens give {len(queries)} x {len(keys)}: queries {list(queries)}, keys {list(keys)}")
            array.setflags(write=False)
            object.__setattr__(self, kind, array)
        if self.encoder.shape[1] != self.decoder.shape[1] or self.decoder.shape[:2] != self.cross.shape[:2]:
            raise RecordError("encoder, decoder and cross arrays disagree on heads or decoder layers: "
                              f"{list(self.encoder.shape)}, {list(self.decoder.shape)}, {list(self.cross.shape)}")

    def axes(self, kind: Kind) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(query tokens, key tokens) of one kind of attention."""
        if kind == "encoder":
            return self.source_tokens, self.source_tokens
        if kind == "decoder":
            return self.target_tokens, self.target_tokens
        if kind == "cross":
            return self.target_tokens, self.source_tokens
        raise RecordError(f"unknown attention kind {kind!r}; use one of {', '.join(KINDS)}")

    def array(self, kind: Kind) -> np.ndarray:
        self.axes(kind)  # validates the kind
        return getattr(self, kind)

    def n_layers(self, kind: Kind) -> int:
        return self.array(kind).shape[0]

    @property
    def n_heads(self) -> int:
        return self.encoder.shape[1]

    def pattern(self, kind: Kind, layer: int, head: int) -> np.ndarray:
        """One head's [query, key] weights."""
        array = self.array(kind)
        if not (0 <= layer < array.shape[0] and 0 <= head < array.shape[1]):
            raise RecordError(f"{kind} attention has layers 0..{array.shape[0] - 1} and heads "
                              f"0..{array.shape[1] - 1}; asked for layer {layer}, head {head}")
        return array[layer, head]

    def mean_over_heads(self, kind: Kind, layer: int) -> np.ndarray:
        return self.pattern(kind, layer, 0) if self.n_heads == 1 else self.array(kind)[layer].mean(axis=0)

    @property
    def n_steps(self) -> int:
        """Decoding steps recorded: one per decoder position."""
        return len(self.target_tokens)

    def step(self, t: int) -> StepAttention:
        """Step t's rows: its cross-attention over the source and its self-attention over the prefix."""
        if not 0 <= t < self.n_steps:
            raise RecordError(f"this record has steps 0..{self.n_steps - 1}; asked for step {t}")
        return StepAttention(t, self.source_tokens, self.target_tokens[: t + 1],
                             self.cross[:, :, t], self.decoder[:, :, t, : t + 1])

    def to_frame(self) -> pd.DataFrame:
        """Long table: one row per (kind, layer, head, query, key) with tokens and weight."""
        import pandas as pd
        frames = []
        for kind in KINDS:
            array = self.array(kind)
            queries, keys = self.axes(kind)
            layer, head, q, k = np.indices(array.shape).reshape(4, -1)
            frames.append(pd.DataFrame({
                "kind": kind, "layer": layer, "head": head, "query_index": q,
                "query_token": np.asarray(queries, dtype=object)[q], "key_index": k,
                "key_token": np.asarray(keys, dtype=object)[k], "weight": array.reshape(-1)}))
        return pd.concat(frames, ignore_index=True)

    def to_npz(self, extra: dict[str, Any] | None = None) -> bytes:
        """Compressed NPZ bytes; `extra` (JSON-able run settings) is stored as `meta`."""
        buffer = io.BytesIO()
        np.savez_compressed(buffer, encoder=self.encoder, decoder=self.decoder, cross=self.cross,
                            source_tokens=np.asarray(self.source_tokens, dtype=str),
                            target_tokens=np.asarray(self.target_tokens, dtype=str),
                            meta=np.asarray(json.dumps(extra or {})))
        return buffer.getvalue()

    @classmethod
    def from_npz(cls, data: bytes, name: str = "the record") -> "AttentionRecord":
        """The record `to_npz` wrote, after the sizes of npz_limits (the file's, and what its arrays declare, before
        any is read): bytes from anyone are safe here too. `name` names the file in a RecordError."""
        from attnscope.records.npz_limits import check_file, check_unpacked  # it names RecordError, defined here

        check_file(data, name)
        check_unpacked(data, name)
        with np.load(io.BytesIO(data), allow_pickle=False) as f:
            return cls(tuple(f["source_tokens"].tolist()), tuple(f["target_tokens"].tolist()),
                       f["encoder"], f["decoder"], f["cross"])

    def to_json(self, extra: dict[str, Any] | None = None) -> str:
        return json.dumps({"source_tokens": list(self.source_tokens), "target_tokens": list(self.target_tokens),
                           **{kind: np.round(self.array(kind).astype(float), 6).tolist() for kind in KINDS},
                           "meta": extra or {}})


@dataclass(frozen=True)
class StepAttention:
    """Where the decoder looked at one step t: views into its record's arrays (no copies)."""

    index: int  # step t: the decoder read `prefix[-1]` and chose the next token
    source_tokens: tuple[str, ...]
    prefix: tuple[str, ...]  # decoder inputs up to and including step t: <bos> y1 .. y_t
    cross: np.ndarray  # [L, H, S] cross-attention row over the source
    decoder_self: np.ndarray  # [L, H, t+1] masked self-attention row over the prefix

    def source_row(self, layer: int, head: int | None) -> np.ndarray:
        """[S] weights one head (or, with None, the mean of heads) of one layer put on the source."""
        if not (0 <= layer < self.cross.shape[0] and (head is None or 0 <= head < self.cross.shape[1])):
            raise RecordError(f"step {self.index} has cross-attention layers 0..{self.cross.shape[0] - 1} and heads "
                              f"0..{self.cross.shape[1] - 1}; asked for layer {layer}, head {head}")
        return self.cross[layer].mean(axis=0) if head is None else self.cross[layer, head]


@dataclass(frozen=True)
class DecodeStep:
    """One decoding step: what the decoder chose, how sure it was, and its rivals.

    Where it looked while choosing is in the record: `Translation.attention.step(index)`.
    """

    index: int  # step t: the decoder read target_tokens[t] and chose `token`
    token_id: int
    token: str
    prob: float
    top_k: tuple[tuple[str, float], ...]  # most probable next tokens, best first
    entropy: float  # of the next-token distribution, in nats
    top_ids: tuple[int, ...] = ()  # vocabulary ids of `top_k`, e.g. to force a rival token

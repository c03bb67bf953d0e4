"""The head atlas's plain data (no torch, so figure builders may draw it): the Atlas of a sample, whose tokens a
kind's queries and keys are, and the groups heads are put in by what their statistics measure (heads.head_stats)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from attnscope.records.attention import Kind

if TYPE_CHECKING:  # pandas (~70 MB, ~0.5 s) is imported only when a table is asked for
    import pandas as pd

SIDES: dict[Kind, tuple[str, str]] = {"encoder": ("source", "source"), "decoder": ("target", "target"),
                                      "cross": ("target", "source")}  # whose tokens a kind's queries and keys are
GROUPS = ("sink", "previous-token", "positional", "aligning", "mixed")
THRESHOLD = 0.5  # a head is in a group when its measure (mean over the sample) reaches this
GROUP_RULES = {
    "sink": "bos_share + eos_share ≥ 0.5: most weight rests on <bos>/<eos>",
    "previous-token": "previous_token ≥ 0.5: most weight on the key one position back (self-attention)",
    "positional": "diagonal or next_token ≥ 0.5: most weight at a fixed offset (self-attention)",
    "aligning": "max_weight ≥ 0.5 on content tokens: each step picks one source token (cross-attention)",
    "mixed": "none of the above reaches 0.5",
}


@dataclass(frozen=True)
class Atlas:
    """Every head's joint map over a sample. Points of one side (source or target tokens) are listed once, sentence
    by sentence, position by position; a kind's queries and keys are the points of its SIDES."""

    sentences: tuple[int, ...]  # the sample's indices of the sentences mapped, in order
    tokens: dict[str, list[tuple[int, int, str]]]  # side -> (sentence number in `sentences`, position, token) a point
    maps: dict[Kind, np.ndarray]  # kind -> (L, H, Nq + Nk, 2) float32: queries first, then keys
    explained: dict[Kind, np.ndarray]  # kind -> (L, H) share of the variance the two axes hold
    groups: pd.DataFrame  # kind, layer, head, group and the statistics it was read from


def group_of(row: dict[str, float]) -> str:
    """The group of one head from its mean statistics (GROUP_RULES, checked in the order of GROUPS)."""
    sink = row["bos_share"] + row["eos_share"]
    if sink >= THRESHOLD:
        return "sink"
    if row["kind"] != "cross":
        if row["previous_token"] >= THRESHOLD:
            return "previous-token"
        if max(row["diagonal"], row["next_token"]) >= THRESHOLD:
            return "positional"
    elif row["max_weight"] >= THRESHOLD:
        return "aligning"
    return "mixed"


def groups(stats: pd.DataFrame) -> pd.DataFrame:
    """Each head's group beside the statistics it was read from (head_stats' columns, averaged over the sample)."""
    frame = stats[["kind", "layer", "head", "bos_share", "eos_share", "previous_token", "diagonal", "next_token",
                   "max_weight"]].copy()
    frame.insert(3, "group", [group_of(row) for row in frame.to_dict("records")])
    return frame.reset_index(drop=True)

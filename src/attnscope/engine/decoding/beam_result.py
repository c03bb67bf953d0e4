"""What beam search found, as plain data (no torch): hypotheses and the search tree, for views."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class BeamNode:
    """A hypothesis kept in the beam at some step (or one that finished there)."""

    id: int
    parent: int | None  # id of the node it extends; None for the root (<bos>)
    step: int
    token_id: int
    log_prob: float  # cumulative log-probability
    status: str = "alive"  # alive -> "extended" | "pruned" | "stopped" (in the beam when a search was stopped);
    # or "finished" (ended with <eos>, or at the length limit)
    score: float | None = None  # length-normalised score, for finished (and stopped) nodes
    slot: int | None = None  # the beam row whose step chose this token (None for the root): where its attention is


@dataclass
class BeamResult:
    """Finished hypotheses of one source, best first (a stopped search's: with those still in the beam, "stopped"),
    and (if tracked) the whole search tree."""

    hypotheses: list[tuple[list[int], float, float]]  # (ids ending in <eos>, or at the limit or the stop; score; log-prob)
    nodes: list[BeamNode] = field(default_factory=list)

    def path(self, node_id: int) -> list[int]:
        """Token ids from the root to `node_id`."""
        ids, node = [], self.nodes[node_id]
        while node.parent is not None:
            ids.append(node.token_id)
            node = self.nodes[node.parent]
        return ids[::-1]

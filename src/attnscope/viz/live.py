"""The live view of a translation while it decodes: the text so far and the latest tokens' cross-attention rows (a
beam search's: its best hypothesis so far, which may change at every step).

Drawn as plain HTML on every redraw of the decoding loop (a few per second), so it stays small whatever the output's
length: the latest LIVE_ROWS rows only; the explorer draws the whole record once decoding ends.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from attnscope.viz.html import Scale, colours, column_labels, esc, frame, ink, legend

LIVE_ROWS = 12  # output tokens whose rows the live view shows (the latest)
LIVE_CHARS = 300  # characters of the text so far that the live view shows (the latest)


@dataclass(frozen=True)
class LiveProgress:
    """How far a decode has gone: tokens decoded, at most how many, seconds spent, and per token."""

    decoded: int
    budget: int
    seconds: float  # since the decode started
    per_token: float  # seconds per output token (a beam search's: per step) so far (the source's encoding aside)
    beam: int = 1  # hypotheses kept: 1 for greedy decoding

    def status(self) -> str:
        """"Decoding: token 12 of at most 400, 0.3 s so far (25 ms a token), at most about 9.7 s left" (a beam
        search's: its steps, and what Stop keeps)."""
        left = (self.budget - self.decoded) * self.per_token
        if self.beam == 1:
            return (f"Decoding: token {self.decoded} of at most {self.budget}, {self.seconds:.1f} s so far "
                    f"({self.per_token * 1e3:.0f} ms a token), at most about {left:.1f} s left. "
                    "Stop keeps what is decoded.")
        return (f"Beam search ({self.beam} hypotheses): step {self.decoded} of at most {self.budget}, "
                f"{self.seconds:.1f} s so far ({self.per_token * 1e3:.0f} ms a step), at most about {left:.1f} s left. "
                "Shown: the best hypothesis so far by the search's score (log-probability ÷ length penalty), finished "
                "or still in the beam; Stop keeps it as the translation.")


def estimate(budget: int, per_token: float, beam: int = 1) -> str:
    """What a decode of up to `budget` tokens will take at `per_token` seconds a token (a beam search's: a step),
    said before it starts."""
    if beam == 1:
        return (f"Up to {budget} output tokens: at most about {budget * per_token:.0f} s at {per_token * 1e3:.0f} ms "
                "a token, as measured for this model on this server. Tokens show as they are decoded; Stop keeps them.")
    return (f"Up to {budget} steps of a beam of {beam}: at most about {budget * per_token:.0f} s at "
            f"{per_token * 1e3:.0f} ms a step, as measured for this model with this beam size on this server (a search "
            "often ends sooner). The best hypothesis shows as it goes; Stop keeps it.")


def latest(text: str) -> str:
    """The last LIVE_CHARS characters of `text`, after "…" when there was more."""
    return text if len(text) <= LIVE_CHARS else "…" + text[-LIVE_CHARS:]


def live_html(text: str, source_tokens: Sequence[str], output_tokens: Sequence[str], cross: Sequence[np.ndarray],
              progress: LiveProgress) -> str:
    """The text decoded so far (its latest characters), then a map of the rows of `cross` (the latest steps' weights
    over the source, e.g. the last layer's mean of heads; at most LIVE_ROWS are drawn), labelled by the tokens they
    chose (`output_tokens`: every token so far); `data-decoded` counts the tokens."""
    cross = list(cross)[-LIVE_ROWS:]
    first = len(output_tokens) - len(cross)
    rows = []
    for t in range(first, len(output_tokens)):
        weights = cross[t - first]
        fill, text_ink = colours(weights, 1.0), ink(weights, 1.0)
        cells = "".join(f'<td class="num" style="background:{fill[j]};color:{text_ink[j]}" title="{esc(output_tokens[t])} '
                        f'→ {esc(key)}: {float(weights[j]):.4f}"></td>' for j, key in enumerate(source_tokens))
        rows.append(f'<tr><th class="r">{t}: {esc(output_tokens[t])}</th>{cells}</tr>')
    table = (f'<table><thead><tr><th></th>{column_labels(source_tokens)}</tr></thead><tbody>{"".join(rows)}</tbody>'
             "</table>") if rows else ""
    title = ("Cross-attention of the latest tokens (last layer, mean of heads), as they are decoded" if progress.beam == 1
             else "Cross-attention of the best hypothesis' latest tokens (last layer, mean of heads), as the beam goes")
    return (f'<div class="attn-live" data-decoded="{progress.decoded}" role="status">'
            f'<div style="font-size:1.5rem;font-weight:600;line-height:1.3">{esc(latest(text)) or "…"}</div>'
            f'<div class="s">{esc(progress.status())}</div>'
            f"{frame(title, table, legend(Scale(1.0)))}</div>")

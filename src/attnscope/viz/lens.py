"""Logit lens view: each decoder layer's best guesses for the next token, and where the final choice ranks.

HTML, like the other views of Inside one head, because it changes with every step (see viz/html.py).
"""
from __future__ import annotations

from typing import Callable

from attnscope.records.forward import LogitLens
from attnscope.viz.html import Scale, colours, esc, frame, ink, legend


def lens_table(lens: LogitLens, piece: Callable[[int], str]) -> str:
    """Rows: decoder layers (the last is the model's real prediction); columns: top-k; shade: probability.
    The token finally chosen is marked ◆ wherever it appears; each row names its rank and probability."""
    n_layers, k = lens.top_ids.shape
    chosen = piece(lens.chosen_id)
    fill, text = colours(lens.top_probs, 1.0), ink(lens.top_probs, 1.0)
    body = []
    for layer in range(n_layers):
        name = (f"layer {layer}{' (output)' if layer == n_layers - 1 else ''} · “{chosen}” rank "
                f"{int(lens.chosen_rank[layer])}, p={float(lens.chosen_prob[layer]):.3f}")
        cells = []
        for j in range(k):
            token_id, p = int(lens.top_ids[layer, j]), float(lens.top_probs[layer, j])
            mark = "◆ " if token_id == lens.chosen_id else ""
            cells.append(f'<td class="num" style="background:{fill[layer, j]};color:{text[layer, j]}" '
                         f'title="layer {layer} · #{j + 1} {esc(piece(token_id))}: probability {p:.4f}">'
                         f"{esc(mark + piece(token_id))}</td>")
        body.append(f'<tr><th class="r">{esc(name)}</th>{"".join(cells)}</tr>')
    heads = "".join(f'<th class="k">#{j + 1}</th>' for j in range(k))
    title = (f"Logit lens at step {lens.position}: each layer's output through the final norm and the output layer "
             f"(softmax(LayerNorm(h)·W_out)); ◆ = “{chosen}”, the token chosen")
    table = f'<table><thead><tr><th></th>{heads}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    return frame(title, table, legend(Scale(1.0, "probability")))

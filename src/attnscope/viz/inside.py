"""Inside one head: each step of scaled dot-product and multi-head attention as a small HTML view.

Every builder takes a HeadView (captured numbers, see engine/inside/head_view.py) and returns an HTML view
whose title names the equation or section of "Attention Is All You Need" it shows. Vectors are heat
strips, one row per vector, blue below 0 and red above: a head's vectors (d_k values) have a cell per
dimension with its exact value on hover, on one colour scale; a d_model vector is one band painted stripe
by stripe on its own colour scale (its range written beside it, so small vectors stay legible next to
large ones), with its norm and extreme dimensions on hover. They are HTML rather than plotly because every one of them
changes whenever the user picks another head, token or step, and a dozen plotly remounts cost over a
second in the browser (see viz/html.py).
"""
from __future__ import annotations

import base64
import struct
import zlib
from typing import Sequence

import numpy as np

from attnscope.engine.inside.head_view import HeadView
from attnscope.viz.heatmap import MASKED_COLOR
from attnscope.viz.html import (
    band_legend,
    colours,
    column_labels,
    diverging_colours,
    diverging_legend,
    esc,
    frame,
    ink,
)
from attnscope.viz.labels import check_labels

WIDE = 64  # dimensions above which a vector is drawn as one band (d_model strips), not one cell each


def _labels(tokens: Sequence[str]) -> list[str]:
    """Index-prefixed labels, so a repeated word stays two rows."""
    return [f"{i}: {t}" for i, t in enumerate(tokens)]


def _stripes(fill: Sequence[str]) -> str:
    """A CSS background with one hard-edged stripe per colour, left to right: a one-pixel-high PNG of those
    colours stretched over the element, unsmoothed. A gradient of one stop pair per dimension drew the same
    stripes, but a d_model-wide one is ~11 KB of text per band and costs the browser far more to paint (an
    Inside page of the opus-mt shape: 612 KB of HTML and ~0.25 s of rendering, against ~0.1 s without them)."""
    image = base64.b64encode(png_row(bytes.fromhex("".join(c[1:] for c in fill)))).decode()
    return f"url(data:image/png;base64,{image}) 0 0/100% 100%;image-rendering:pixelated"


def png_row(rgb: bytes) -> bytes:
    """A PNG one pixel high of the RGB triples in `rgb` (8-bit truecolour, no filter): a few lines of zlib
    rather than an imaging library."""
    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    header = struct.pack(">IIBBBBB", len(rgb) // 3, 1, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00" + rgb)) + chunk(b"IEND", b"")


def _summary(values: np.ndarray, first: int = 0) -> str:
    """Hover text of a band: its norm and its extreme dimensions."""
    low, high = int(values.argmin()), int(values.argmax())
    return (f"dimensions {first}…{first + values.size - 1}: norm {float(np.linalg.norm(values)):.4f}, "
            f"min {values[low]:.4f} (dim {first + low}), max {values[high]:.4f} (dim {first + high})")


def _band(values: np.ndarray, fill: Sequence[str]) -> str:
    """A vector too long for one cell per dimension (d_model) as one cell painted stripe by stripe across
    the view's width, its norm and extreme dimensions on hover. (One element instead of hundreds: the
    browser draws a page of them in a fraction of the time.)"""
    return f'<td class="band" style="background:{_stripes(fill)}" title="{_summary(values)}"></td>'


def _limit(values: np.ndarray) -> float:
    """The half-range of a diverging colour scale that spans `values`: max |value| (1 for all zeros)."""
    return float(np.abs(values).max()) or 1.0


def _scale_note(limit: float) -> str:
    """A band's own colour range, written beside it: ±max |value|, with what the colours mean on hover."""
    return (f'<th class="x" title="this band\'s colour scale: blue −{limit:.4g} · white 0 · red +{limit:.4g}">'
            f"±{limit:.3g}</th>")


def strips(rows: np.ndarray, labels: Sequence[str], *, title: str, sums: np.ndarray | None = None,
           what: str = "value") -> str:
    """Vectors as heat strips: row i is labels[i] (distinct), colour centred on 0. Up to WIDE dimensions
    each has its own cell with its exact value on hover, all rows on one colour scale; longer vectors are
    bands (see _band), each on its own scale (its ±range written beside it), so a band of small values
    is as legible as one of large values. `sums`, if given, is written after each row (e.g. q·k, the
    sum of the row's q∘k terms)."""
    z = np.asarray(rows, dtype=np.float32)
    if z.ndim != 2 or z.shape[0] != len(labels) or len(set(labels)) != len(labels):
        raise ValueError(f"{list(z.shape)} vectors for {len(labels)} labels (must be distinct) {list(labels)}")
    wide = z.shape[1] > WIDE
    limits = [_limit(row) for row in z] if wide else [_limit(z)] * len(z)
    body = []
    for i, label in enumerate(labels):
        fill = diverging_colours(z[i], limits[i])
        if wide:
            cells = _band(z[i], fill) + _scale_note(limits[i])
        else:
            cells = "".join(f'<td style="background:{fill[j]}" title="dim {j}: {z[i, j]:.4f}"></td>'
                            for j in range(z.shape[1]))
        tail = f'<th class="x">Σ = {float(sums[i]):.4f}</th>' if sums is not None else ""
        body.append(f'<tr><th class="r">{esc(label)}</th>{cells}{tail}</tr>')
    table = f'<table class="strip{" wide" if wide else ""}"><tbody>{"".join(body)}</tbody></table>'
    key = f"{what} ({z.shape[1]} dimensions)"
    return frame(title, table, band_legend(key) if wide else diverging_legend(limits[0], key))


def input_strips(view: HeadView, *, embed_norm: bool = False) -> str:
    """Where the query comes from: embedding × √d_model (or unscaled) + PE (none for T5), then a norm for a model
    with `embed_norm` (BART), as the first layer's input; the layer's input, what W_Q reads."""
    e, token, norm = view.embedding, view.query_tokens[view.query], view.norm_kind
    rows = [e.token_embedding * e.scale, e.position, e.total, view.layer_input, view.query_input]
    scaled = f"embedding({token}) × √d_model = ×{e.scale:.1f}" if e.scale != 1.0 else f"embedding({token}) (not scaled)"
    first = f"{norm} of the sum: the first layer's input" if embed_norm else "sum: the first layer's input"
    position = ("no positional encoding: zeros (positions are a bias on the scores, step 3)" if view.relative
                else f"positional encoding PE({view.query})")
    labels = [scaled, position, first, f"input of layer {view.layer}'s block", "what W_Q multiplies"]
    if view.norm == "pre":
        labels[-1] += f" ({norm} of the block input: pre-LN)"
    section = ("section 3.4: embeddings × √d_model" if e.scale != 1.0 else
               "this model leaves out section 3.4's multiplication by √d_model")
    added = "no positional encoding added (T5)" if view.relative else "section 3.5: + positional encoding"
    title = f"Inputs of “{token}” ({section}; {added}{f'; then {norm}' if embed_norm else ''})"
    return strips(np.stack(rows), labels, title=title)


def key_input_strips(view: HeadView) -> str:
    """What W_K and W_V multiply: the encoder's output (cross-attention) or this stream (self-attention)."""
    where = "the encoder's output (memory)" if view.kind == "cross" else f"layer {view.layer}'s input, every position"
    return strips(view.key_inputs, _labels(view.key_tokens),
                  title=f"Keys and values are projected from {where}")


def qk_strips(view: HeadView) -> str:
    """The query, then every key of this head (d_k values each): q = x·W_Q, k_j = x_j·W_K (section 3.2.2)."""
    rows = np.vstack([view.q[None], view.k])
    labels = [f"q  ({view.query}: {view.query_tokens[view.query]})", *(f"k  {lab}" for lab in _labels(view.key_tokens))]
    return strips(rows, labels, title=f"Query and keys of head {view.head} (q = x·W_Qᵢ, k = x·W_Kᵢ; d_k = {view.q.size})")


def product_strips(view: HeadView) -> str:
    """q∘k_j element by element; each row sums to q·k_j (written after the row)."""
    labels = [f"q∘k  {lab}" for lab in _labels(view.key_tokens)]
    return strips(view.products, labels, sums=view.dots, what="q·k term",
                  title="q∘k: the dot product term by term (Eq. 1's QKᵀ, one row of it); Σ = q·k")


def _fmt(value: float, digits: int) -> str:
    return "−∞" if np.isneginf(value) else f"{value:.{digits}f}"


def score_steps(view: HeadView) -> str:
    """q·k → ×1/√d_k (unless the model leaves it out) → + position bias (T5) → mask → softmax, one row each, one
    column per key (Eq. 1); numbers in the cells. The mask row is the captured scores, the last the captured weights."""
    rows, labels = [view.dots], ["q·k"]
    if view.scale != 1.0:
        rows, labels = rows + [view.dots * view.scale], labels + [f"× 1/√d_k = ×{view.scale:.4f}"]
    if view.bias is not None:
        rows.append(view.dots * view.scale + view.bias)
        labels.append("+ position bias b(key − query), this head's")
    rows, labels = rows + [view.scores, view.weights], labels + ["+ mask (−∞: may not look)", "softmax: the weights"]
    keys = _labels(view.key_tokens)
    body = []
    for label, row in zip(labels, rows):  # each row coloured on its own scale; the numbers are the text
        finite = np.isfinite(row)
        low, high = (row[finite].min(), row[finite].max()) if finite.any() else (0.0, 0.0)
        shade = np.where(finite, (row - low) / (high - low) if high > low else 0.0, 0.0)
        fill, text = np.where(finite, colours(shade, 1.0), MASKED_COLOR), ink(shade, 1.0)
        cells = "".join(f'<td class="num" style="background:{fill[j]};color:{text[j]}" title="{esc(label)} · key '
                        f'{esc(keys[j])}: {_fmt(float(row[j]), 6)}">{_fmt(float(row[j]), 3)}</td>' for j in range(len(keys)))
        body.append(f'<tr><th class="r">{esc(label)}</th>{cells}</tr>')
    table = f'<table><thead><tr><th></th>{column_labels(keys)}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    return frame(f"Eq. 1: Attention(Q, K, V) = {formula(view)} V — this query's row, step by step", table)


def formula(view: HeadView) -> str:
    """The softmax as this head computes it: the paper's QKᵀ/√d_k, unscaled (T5), plus T5's position bias B."""
    scores = "QKᵀ / √d_k" if view.scale != 1.0 else "QKᵀ"
    return f"softmax({scores}{' + B' if view.bias is not None else ''})"


def mask_matrix(view: HeadView) -> str:
    """The mask added to the scores before the softmax, for every query; this query's row outlined. A mask of zeros
    only (nothing masked) is said in a sentence: its matrix would say nothing and scroll sideways in half a page."""
    masked = view.mask_matrix
    what = ("causal mask: a position may not look at later ones (section 3.2.3)" if view.kind == "decoder"
            else "no mask: every key is visible (no padding in one sentence)")
    if not masked.any():
        n_q, n_k = masked.shape
        return frame(f"Mask M added before the softmax — {what}",
                     f"<p>M is all zeros here ({n_q} queries × {n_k} keys): it changes no score, so every key is "
                     "weighed.</p>")
    queries, keys = _labels(view.query_tokens), _labels(view.key_tokens)
    check_labels(masked.shape[0], queries, "queries")
    check_labels(masked.shape[1], keys, "keys")
    body = []
    for i, query in enumerate(queries):
        cells = "".join(
            f'<td class="num" style="background:{"#636363;color:#fff" if m else "#f7fbff"}" '
            f'title="query {esc(query)} · key {esc(keys[j])}: {"−∞ (masked)" if m else "0"}">{"−∞" if m else "0"}</td>'
            for j, m in enumerate(masked[i]))
        row_class = ' class="q"' if i == view.query else ""
        body.append(f'<tr{row_class}><th class="r">{esc(query)}</th>{cells}</tr>')
    table = f'<table><thead><tr><th></th>{column_labels(keys)}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    return frame(f"Mask M added before the softmax — {what}", table)


def weight_bars(view: HeadView) -> str:
    """The softmax row: how much of each value this query takes (the heatmap's row), keys in order."""
    keys = _labels(view.key_tokens)
    rows = "".join(
        f'<tr title="{esc(k)}: weight {w:.6f}"><th class="r">{esc(k)}</th><td style="width:240px"><div class="bar" '
        f'style="width:{100 * min(max(float(w), 0.0), 1.0):.1f}%;background:{"#bbbbbb" if m else "steelblue"}"></div></td>'
        f'<td style="padding-left:6px">{"masked" if m else f"{w:.4f}"}</td></tr>'
        for k, w, m in zip(keys, view.weights, view.masked))
    title = f"softmax row of “{view.query_tokens[view.query]}” (sums to {view.weights.sum():.4f})"
    return frame(title, f"<table><tbody>{rows}</tbody></table>")


def value_strips(view: HeadView) -> str:
    """The values v_j, each scaled by its weight, and their sum: this head's output (Eq. 1's ·V)."""
    keys = _labels(view.key_tokens)
    rows = np.vstack([view.v, view.weighted, view.head_output[None]])
    labels = ([f"v  {k}" for k in keys] + [f"{w:.2f} × v  {k}" for w, k in zip(view.weights, keys)]
              + [f"Σ = head {view.head}'s output"])
    return strips(rows, labels, title=f"Values, weighted values and their sum: {formula(view)}·V (Eq. 1)")


def head_slices(view: HeadView) -> str:
    """The concatenation of every head's output: d_model cut into h slices of d_k (the "dimension trick").
    One band per head under its name and its own colour range; the chosen head's band is framed in red."""
    z = np.asarray(view.concat, dtype=np.float32)
    d_head, (start, stop) = view.head_output.size, view.head_slice
    parts = [z[h * d_head:(h + 1) * d_head] for h in range(view.n_heads)]
    heads = "".join(
        f'<span class="hb{" on" if h == view.head else ""}"><span class="hn">head {h} · ±{_limit(part):.3g}</span>'
        f'<span class="hg" style="background:{_stripes(diverging_colours(part, _limit(part)))}" '
        f'title="head {h}: {_summary(part, h * d_head)}"></span></span>'
        for h, part in enumerate(parts))
    label = f"Concat(head_0 … head_{view.n_heads - 1}) at “{view.query_tokens[view.query]}”"
    body = f'<div class="hs"><span class="hl">{esc(label)}</span>{heads}</div>'
    width = (f"d_model {z.size}" if z.size == view.attention_output.size else
             f"{z.size} (not d_model {view.attention_output.size}: this model's heads have their own width)")
    title = (f"MultiHead = Concat(head_1, …, head_h)·W^O (section 3.2.2): {width} = "
             f"{view.n_heads} heads × d_k {d_head}; head {view.head} owns dimensions {start}…{stop - 1}")
    return frame(title, body, band_legend(f"value ({z.size} dimensions)", "under each head"))


def contribution_strips(view: HeadView) -> str:
    """Each head's slice through its own columns of W^O, the bias, and their sum: the attention output."""
    labels = [("▶ " if h == view.head else "") + f"head {h} · W^O[{h * view.q.size}:{(h + 1) * view.q.size}]"
              for h in range(view.n_heads)]
    bias = [] if view.out_bias is None else [view.out_bias]
    rows = np.vstack([view.contributions, *bias, view.attention_output[None]])
    labels += ["bias b^O"] * len(bias) + ["Σ = attention output (into the residual stream)"]
    plus = " (W^O has no bias)" if view.out_bias is None else " + b^O"
    return strips(rows, labels,
                  title=f"Concat·W^O = Σ over heads of head_i·W^O_i{plus}: each head's contribution (section 3.2.2)")


def residual_strips(view: HeadView) -> str:
    """The block around the attention as the model applies it: post-LN (the paper's) or pre-LN, with its norm
    (LayerNorm, or T5's RMSNorm: x / √(mean(x²) + ε) × weight, no mean subtracted, no bias)."""
    norm = view.norm_kind
    if view.norm == "post":
        rows = [view.residual, view.attention_output, view.norm_input, view.block_output]
        labels = ["x (block input)", "Sublayer(x): attention output", "x + Sublayer(x)", f"{norm}(x + Sublayer(x)): block output"]
        title = f"Residual + {norm} (section 3.1): {norm}(x + Sublayer(x))"
    else:
        rows = [view.residual, view.norm_output, view.attention_output, view.block_output]
        labels = ["x (block input)", f"{norm}(x): what the attention reads", f"Sublayer({norm}(x))",
                  f"x + Sublayer({norm}(x)): block output"]
        title = f"Pre-LN residual block: x + Sublayer({norm}(x)) (this model normalises before the sublayer)"
    if norm == "RMSNorm":
        title += "; RMSNorm(x) = x / √(mean(x²) + ε) × g: no mean subtracted, no bias"
    return strips(np.stack(rows), labels, title=title)


# Every panel of one head, in the order the page shows them (the bench times building all of them).
PANELS = (input_strips, key_input_strips, qk_strips, product_strips, score_steps, mask_matrix, weight_bars,
          value_strips, head_slices, contribution_strips, residual_strips)

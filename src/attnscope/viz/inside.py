"""Inside one head: each step of scaled dot-product and multi-head attention as a small figure.

Every builder takes a HeadView (captured numbers, see engine/head_view.py) and returns a figure whose
title names the equation or section of "Attention Is All You Need" it shows. Vectors are heat strips
(one row per vector, one column per dimension), with the exact value on hover.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from attnscope.engine.head_view import HeadView
from attnscope.viz.titles import FULL, HALF, lines, wrap

DIVERGING = "RdBu_r"
HOVER = "%{y}<br>dimension %{x}<br>value %{z:.4f}<extra></extra>"
MARGIN = dict(l=10, r=10, t=70, b=10)


def _labels(tokens: Sequence[str]) -> list[str]:
    """Index-prefixed labels, so a repeated word stays two rows."""
    return [f"{i}: {t}" for i, t in enumerate(tokens)]


def strips(rows: np.ndarray, labels: Sequence[str], *, title: str, hover: str = HOVER,
           customdata: np.ndarray | None = None, width: int = FULL) -> go.Figure:
    """Vectors as heat strips: row i is labels[i] (unique), columns are dimensions, colour centred on 0.
    `customdata`, if given, carries extra per-cell values for `hover`."""
    z = np.asarray(rows, dtype=np.float32)
    if z.ndim != 2 or z.shape[0] != len(labels) or len(set(labels)) != len(labels):
        raise ValueError(f"{list(z.shape)} vectors for {len(labels)} labels (must be distinct) {list(labels)}")
    limit = float(np.abs(z).max()) or 1.0
    # rows are named by their (distinct) labels, so hover reads %{y} without a per-cell label array
    fig = go.Figure(go.Heatmap(z=z, x=np.arange(z.shape[1]), y=list(labels), colorscale=DIVERGING, zmid=0, zmin=-limit,
                               zmax=limit, customdata=customdata, hovertemplate=hover,
                               xgap=1 if z.shape[1] <= 64 else 0, ygap=2, colorbar=dict(thickness=10)))
    fig.update_yaxes(type="category", autorange="reversed", showgrid=False)
    fig.update_xaxes(title="dimension", showgrid=False, zeroline=False)
    title = wrap(title, width)
    return fig.update_layout(title=title, height=90 + 20 * lines(title) + 22 * len(labels),
                             margin=dict(MARGIN, t=50 + 20 * lines(title)))


def input_strips(view: HeadView) -> go.Figure:
    """Where the query comes from: embedding × √d_model + PE (layer 0), the layer's input, what W_Q reads."""
    e, token = view.embedding, view.query_tokens[view.query]
    rows = [e.token_embedding * e.scale, e.position, e.total, view.layer_input, view.query_input]
    scaled = f"embedding({token}) × √d_model = ×{e.scale:.1f}" if e.scale != 1.0 else f"embedding({token}) (not scaled)"
    labels = [scaled, f"positional encoding PE({view.query})",
              "sum: the first layer's input", f"input of layer {view.layer}'s block", "what W_Q multiplies"]
    if view.norm == "pre":
        labels[-1] += " (LayerNorm of the block input: pre-LN)"
    title = f"Inputs of “{token}” (section 3.4: embeddings × √d_model; section 3.5: + positional encoding)"
    return strips(np.stack(rows), labels, title=title)


def key_input_strips(view: HeadView) -> go.Figure:
    """What W_K and W_V multiply: the encoder's output (cross-attention) or this stream (self-attention)."""
    where = "the encoder's output (memory)" if view.kind == "cross" else f"layer {view.layer}'s input, every position"
    return strips(view.key_inputs, _labels(view.key_tokens),
                  title=f"Keys and values are projected from {where}")


def qk_strips(view: HeadView) -> go.Figure:
    """The query, then every key of this head (d_k values each): q = x·W_Q, k_j = x_j·W_K (section 3.2.2)."""
    rows = np.vstack([view.q[None], view.k])
    labels = [f"q  ({view.query}: {view.query_tokens[view.query]})", *(f"k  {lab}" for lab in _labels(view.key_tokens))]
    return strips(rows, labels, title=f"Query and keys of head {view.head} (q = x·W_Qᵢ, k = x·W_Kᵢ; d_k = {view.q.size})",
                  width=HALF)


def product_strips(view: HeadView) -> go.Figure:
    """q∘k_j element by element; each row sums to q·k_j (hover shows the sum)."""
    labels = [f"q∘k  {lab}" for lab in _labels(view.key_tokens)]
    sums = np.repeat(view.dots[:, None], view.products.shape[1], axis=1).astype(np.float32)  # (K, dh)
    return strips(view.products, labels, customdata=sums,
                  hover="%{y}<br>dimension %{x}<br>q·k term %{z:.4f}<br>row sum q·k = %{customdata:.4f}<extra></extra>",
                  title="q∘k: the dot product term by term (Eq. 1's QKᵀ, one row of it); row sums on hover", width=HALF)


def _fmt(value: float) -> str:
    return "−∞" if np.isneginf(value) else f"{value:.3f}"


def score_steps(view: HeadView) -> go.Figure:
    """q·k → ×1/√d_k → mask → softmax, one row each, one column per key (Eq. 1)."""
    rows = [view.dots, view.dots * view.scale, view.scores, view.weights]
    labels = ["q·k", f"× 1/√d_k = ×{view.scale:.4f}", "+ mask (−∞: may not look)", "softmax: the weights"]
    text = [[_fmt(v) for v in row] for row in rows]
    z = []
    for row in rows:  # colour each row on its own scale; the numbers are the text
        finite = np.where(np.isfinite(row), row, np.nan)
        low, high = np.nanmin(finite), np.nanmax(finite)
        z.append((finite - low) / (high - low) if high > low else np.zeros_like(finite))
    heat = go.Heatmap(z=np.asarray(z, dtype=np.float32), x=list(range(len(view.key_tokens))), y=list(range(4)),
                      text=text, texttemplate="%{text}", colorscale="Blues", showscale=False, xgap=2, ygap=2,
                      customdata=np.asarray([[lab] * len(view.key_tokens) for lab in labels], dtype=object),
                      hovertemplate="%{customdata}<br>key %{x}<br>value %{text}<extra></extra>")
    fig = go.Figure(heat)
    fig.update_xaxes(tickvals=list(range(len(view.key_tokens))), ticktext=list(view.key_tokens), side="top", showgrid=False)
    fig.update_yaxes(tickvals=list(range(4)), ticktext=labels, autorange="reversed", showgrid=False)
    return fig.update_layout(title=wrap("Eq. 1: Attention(Q, K, V) = softmax(QKᵀ / √d_k) V — this query's row, step by step"),
                             height=300, margin=dict(l=10, r=10, t=110, b=10), plot_bgcolor="#d9d9d9")


def mask_matrix(view: HeadView) -> go.Figure:
    """The mask added to the scores before the softmax, for every query; this query's row outlined."""
    masked = view.mask_matrix
    queries, keys = _labels(view.query_tokens), list(view.key_tokens)
    text = np.where(masked, "−∞", "0")
    fig = go.Figure(go.Heatmap(z=masked.astype(np.float32), text=text, texttemplate="%{text}", zmin=0, zmax=1,
                               colorscale=[[0, "#f7fbff"], [1, "#636363"]], showscale=False, xgap=1, ygap=1,
                               x=list(range(len(keys))), y=list(range(len(queries))),
                               hovertemplate="query %{y}<br>key %{x}<br>mask %{text}<extra></extra>"))
    fig.add_shape(type="rect", x0=-0.5, x1=len(keys) - 0.5, y0=view.query - 0.5, y1=view.query + 0.5,
                  line=dict(color="crimson", width=3))
    fig.update_xaxes(tickvals=list(range(len(keys))), ticktext=keys, side="top", showgrid=False)
    fig.update_yaxes(tickvals=list(range(len(queries))), ticktext=queries, autorange="reversed", showgrid=False)
    what = ("causal mask: a position may not look at later ones (section 3.2.3)" if view.kind == "decoder"
            else "no mask: every key is visible (no padding in one sentence)")
    title = wrap(f"Mask M added before the softmax — {what}", HALF)
    return fig.update_layout(title=title, height=120 + 20 * lines(title) + 24 * len(queries),
                             margin=dict(l=10, r=10, t=90 + 20 * lines(title), b=10))


def weight_bars(view: HeadView) -> go.Figure:
    """The softmax row: how much of each value this query takes (the heatmap's row)."""
    keys = _labels(view.key_tokens)
    fig = go.Figure(go.Bar(x=list(range(len(keys))), y=view.weights, customdata=keys,
                           marker_color=np.where(view.masked, "#bbbbbb", "steelblue"),
                           hovertemplate="key %{customdata}<br>weight %{y:.6f}<extra></extra>",
                           text=[f"{w:.2f}" for w in view.weights], textposition="outside"))
    fig.update_xaxes(tickvals=list(range(len(keys))), ticktext=list(view.key_tokens))
    fig.update_yaxes(range=[0, 1.1], title="weight")
    title = f"softmax row of “{view.query_tokens[view.query]}” (sums to {view.weights.sum():.4f})"
    return fig.update_layout(title=wrap(title, HALF),
                             height=300, margin=MARGIN)


def value_strips(view: HeadView) -> go.Figure:
    """The values v_j, each scaled by its weight, and their sum: this head's output (Eq. 1's ·V)."""
    keys = _labels(view.key_tokens)
    rows = np.vstack([view.v, view.weighted, view.head_output[None]])
    labels = ([f"v  {k}" for k in keys] + [f"{w:.2f} × v  {k}" for w, k in zip(view.weights, keys)]
              + [f"Σ = head {view.head}'s output"])
    return strips(rows, labels, title="Values, weighted values and their sum: softmax(QKᵀ/√d_k)·V (Eq. 1)")


def head_slices(view: HeadView) -> go.Figure:
    """The concatenation of every head's output: d_model cut into h slices of d_k (the "dimension trick")."""
    d_head = view.head_output.size
    start, stop = view.head_slice
    fig = strips(view.concat[None], [f"Concat(head_0 … head_{view.n_heads - 1}) at “{view.query_tokens[view.query]}”"],
                 title=f"MultiHead = Concat(head_1, …, head_h)·W^O (section 3.2.2): d_model {view.concat.size} = "
                       f"{view.n_heads} heads × d_k {d_head}; head {view.head} owns dimensions {start}…{stop - 1}")
    shapes, notes = [], []
    for h in range(view.n_heads):  # one frame and one name per head, set in one layout update (add_shape is slow)
        x0, x1 = h * d_head - 0.5, (h + 1) * d_head - 0.5
        color = "crimson" if h == view.head else "#555"
        shapes.append(dict(type="rect", x0=x0, x1=x1, y0=-0.5, y1=0.5, line=dict(color=color, width=3 if h == view.head else 1)))
        notes.append(dict(x=(x0 + x1) / 2, y=-0.75, text=f"head {h}", showarrow=False, font=dict(color=color)))
    return fig.update_layout(height=190, shapes=shapes, annotations=notes)


def contribution_strips(view: HeadView) -> go.Figure:
    """Each head's slice through its own columns of W^O, the bias, and their sum: the attention output."""
    labels = [("▶ " if h == view.head else "") + f"head {h} · W^O[{h * view.q.size}:{(h + 1) * view.q.size}]"
              for h in range(view.n_heads)]
    rows = np.vstack([view.contributions, view.out_bias[None], view.attention_output[None]])
    labels += ["bias b^O", "Σ = attention output (into the residual stream)"]
    return strips(rows, labels, title="Concat·W^O = Σ over heads of head_i·W^O_i + b^O: each head's contribution (section 3.2.2)")


def residual_strips(view: HeadView) -> go.Figure:
    """The block around the attention as the model applies it: post-LN (the paper's) or pre-LN."""
    if view.norm == "post":
        rows = [view.residual, view.attention_output, view.norm_input, view.block_output]
        labels = ["x (block input)", "Sublayer(x): attention output", "x + Sublayer(x)",
                  "LayerNorm(x + Sublayer(x)): block output"]
        title = "Residual + LayerNorm (section 3.1): LayerNorm(x + Sublayer(x))"
    else:
        rows = [view.residual, view.norm_output, view.attention_output, view.block_output]
        labels = ["x (block input)", "LayerNorm(x): what the attention reads", "Sublayer(LayerNorm(x))",
                  "x + Sublayer(LayerNorm(x)): block output"]
        title = "Pre-LN residual block: x + Sublayer(LayerNorm(x)) (this model normalises before the sublayer)"
    return strips(np.stack(rows), labels, title=title)


# Every panel of one head, in the order the page shows them (the bench times building all of them).
PANELS = (input_strips, key_input_strips, qk_strips, product_strips, score_steps, mask_matrix, weight_bars,
          value_strips, head_slices, contribution_strips, residual_strips)

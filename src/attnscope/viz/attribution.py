"""Figures of attribution: the source/prefix split (one sentence, and by position over a sample),
methods side by side, agreement, alignment links."""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from attnscope.engine.analysis.alignment import WordAlignment
from attnscope.viz.heatmap import title_layout, top_margin
from attnscope.viz.titles import wrap

if TYPE_CHECKING:  # the builders only read the frames they are given
    import pandas as pd

SOURCE_COLOR, PREFIX_COLOR = "#1f77b4", "#ff7f0e"


def _labels(tokens: Sequence[str]) -> list[str]:
    return [f"{i}: {t}" for i, t in enumerate(tokens)]


def source_prefix_split(output_tokens: Sequence[str], source_share: np.ndarray, method: str = "ALTI+") -> go.Figure:
    """One stacked bar per generated token: share drawn from the source vs from the target prefix."""
    share = np.asarray(source_share, dtype=np.float64)
    if share.shape != (len(output_tokens),):
        raise ValueError(f"{share.shape[0]} shares for {len(output_tokens)} generated tokens {list(output_tokens)}")
    x = list(range(len(output_tokens)))
    fig = go.Figure([go.Bar(x=x, y=share, name="source", marker_color=SOURCE_COLOR,
                            hovertemplate="%{y:.1%} from the source<extra></extra>"),
                     go.Bar(x=x, y=1 - share, name="target prefix", marker_color=PREFIX_COLOR,
                            hovertemplate="%{y:.1%} from the prefix<extra></extra>")])
    fig.update_layout(barmode="stack", title=f"Where each generated token came from ({method}, rolled out)",
                      height=320, margin=dict(l=10, r=10, t=60, b=10), legend=dict(orientation="h", y=1.02, yanchor="bottom"))
    fig.update_xaxes(tickvals=x, ticktext=list(output_tokens), tickangle=-60, title="generated token")
    return fig.update_yaxes(range=[0, 1], tickformat=".0%", title="share")


PUBLISHED_TREND = ("Published: the source's share is largest for the first target tokens and falls as the target "
                   "prefix grows (Voita et al., ACL 2021, with LRP; Ferrando et al., EMNLP 2022, with ALTI+).")
LINE_STYLES = ("solid", "dash", "dot", "dashdot")


def shares_by_position_figure(counts: np.ndarray, means: Mapping[str, np.ndarray], sentences: int,
                              min_tokens: int = 10) -> go.Figure:
    """Mean source share of generated tokens at each target position over a sample, one line per measure;
    positions with fewer than `min_tokens` tokens are left out (a handful of long sentences is noise)."""
    counts = np.asarray(counts)
    if any(np.shape(m) != counts.shape for m in means.values()):
        raise ValueError(f"every measure needs one mean per position ({counts.shape[0]} positions)")
    keep = np.flatnonzero(counts >= min_tokens)
    fig = go.Figure()
    for (name, mean), dash in zip(means.items(), LINE_STYLES):
        fig.add_trace(go.Scatter(x=keep + 1, y=np.asarray(mean, dtype=np.float64)[keep], customdata=counts[keep],
                                 mode="lines+markers", name=name, line=dict(dash=dash),
                                 hovertemplate=f"{name}: " + "%{y:.1%} from the source at token %{x} "
                                               "(%{customdata} tokens)<extra></extra>"))
    fig.add_annotation(text=PUBLISHED_TREND, xref="paper", yref="paper", x=0, y=-0.28, showarrow=False,
                       xanchor="left", align="left", font=dict(size=11))
    fig.update_xaxes(title="target position (1 = first generated token)", dtick=1)
    fig.update_yaxes(range=[0, 1], tickformat=".0%", title="mean source share")
    return fig.update_layout(title=f"Source share by target position · {sentences} sentences", height=400,
                             margin=dict(l=10, r=10, t=80, b=90), legend=dict(orientation="h", y=1.02, yanchor="bottom"))


def methods_side_by_side(rows: Mapping[str, np.ndarray], source_tokens: Sequence[str], title: str = "") -> go.Figure:
    """One row per method over the source tokens, each divided by its row maximum (hover shows the value)."""
    names = list(rows)
    raw = np.stack([np.asarray(rows[n], dtype=np.float64) for n in names])  # (M, S)
    if raw.shape[1] != len(source_tokens):
        raise ValueError(f"rows have {raw.shape[1]} columns for {len(source_tokens)} source tokens {list(source_tokens)}")
    peak = np.abs(raw).max(-1, keepdims=True)
    z = np.abs(raw) / np.where(peak > 0, peak, 1)
    custom = np.broadcast_to(np.asarray(_labels(source_tokens), dtype=object), z.shape)
    fig = go.Figure(go.Heatmap(z=z, x=list(range(len(source_tokens))), y=list(range(len(names))), zmin=0, zmax=1,
                               customdata=np.dstack([custom, raw]), colorscale="Blues", xgap=1, ygap=1,
                               colorbar=dict(title="share of<br>the row's<br>maximum", thickness=12),
                               hovertemplate="%{customdata[0]}<br>value %{customdata[1]:.4g}<extra></extra>"))
    fig.update_xaxes(tickvals=list(range(len(source_tokens))), ticktext=list(source_tokens), side="top", tickangle=-60)
    fig.update_yaxes(tickvals=list(range(len(names))), ticktext=names, autorange="reversed")
    top = top_margin(source_tokens, axis_title=False)  # the title above the rotated token labels, never on them
    return fig.update_layout(title=title_layout(wrap(title)), height=top + 50 + 34 * len(names),
                             margin=dict(l=10, r=10, t=top, b=10))


def agreement_matrix_figure(matrix: pd.DataFrame, title: str) -> go.Figure:
    """Method × method mean agreement (Spearman from −1 to 1, or top-1 from 0 to 1)."""
    z = matrix.to_numpy(dtype=np.float64)
    names = list(matrix.index)
    fig = go.Figure(go.Heatmap(z=z, x=names, y=names, zmin=-1, zmax=1, colorscale="RdBu", text=np.round(z, 2),
                               texttemplate="%{text}", hovertemplate="%{y} vs %{x}: %{z:.3f}<extra></extra>"))
    fig.update_yaxes(autorange="reversed")
    return fig.update_layout(title=title, height=120 + 50 * len(names), margin=dict(l=10, r=10, t=60, b=10))


def token_agreement_figure(frame: pd.DataFrame, output_tokens: Sequence[str], against: str) -> go.Figure:
    """Per generated token, Spearman of every other method with `against`."""
    fig = go.Figure()
    x = list(range(len(output_tokens)))
    for other in dict.fromkeys([*frame["a"], *frame["b"]]):
        if other == against:
            continue
        pair = frame[((frame["a"] == against) & (frame["b"] == other)) | ((frame["a"] == other) & (frame["b"] == against))]
        fig.add_trace(go.Scatter(x=pair["step"], y=pair["spearman"], mode="lines+markers", name=other,
                                 hovertemplate=f"{other}: " + "%{y:.2f}<extra></extra>"))
    fig.update_xaxes(tickvals=x, ticktext=list(output_tokens), tickangle=-60, title="generated token")
    fig.update_yaxes(range=[-1.05, 1.05], title=f"Spearman with {against}")
    return fig.update_layout(height=340, margin=dict(l=10, r=10, t=40, b=10), legend=dict(orientation="h", y=1.15))


def layer_agreement_figure(summary: pd.DataFrame, value: str = "spearman") -> go.Figure:
    """Decoder layer (rows) × (measure vs reference) (columns): mean agreement over a sample."""
    table = summary.pivot_table(index="layer", columns=["measure", "reference"], values=value)
    cols = [f"{m} vs {r}" for m, r in table.columns]
    z = table.to_numpy(dtype=np.float64)
    fig = go.Figure(go.Heatmap(z=z, x=cols, y=[f"layer {i}" for i in table.index], colorscale="RdBu",
                               zmin=-1 if value == "spearman" else 0, zmax=1, text=np.round(z, 2), texttemplate="%{text}",
                               hovertemplate="%{y}, %{x}: %{z:.3f}<extra></extra>"))
    fig.update_yaxes(autorange="reversed")
    what = {"spearman": "Spearman rank correlation", "top1": "share with the same top source token"}.get(value, value)
    return fig.update_layout(title=f"Cross-attention by layer against each attribution ({what})",
                             height=140 + 45 * len(table.index), margin=dict(l=10, r=10, t=60, b=10))


def alignment_figure(alignment: WordAlignment) -> go.Figure:
    """Source words on top, target words below, a line for each link (darker = stronger)."""
    src, tgt = alignment.source_words, alignment.target_words
    width = max(len(src), len(tgt), 1)
    sx = np.linspace(0, width - 1, len(src)) if len(src) > 1 else np.zeros(len(src))
    tx = np.linspace(0, width - 1, len(tgt)) if len(tgt) > 1 else np.zeros(len(tgt))
    fig = go.Figure()
    top = float(alignment.scores.max()) if alignment.scores.size else 1.0
    for i, j in alignment.links:
        strength = float(alignment.scores[j, i]) / top if top > 0 else 1.0
        fig.add_trace(go.Scatter(x=[sx[i], tx[j]], y=[1, 0], mode="lines", showlegend=False, hoverinfo="skip",
                                 line=dict(color=f"rgba(31,119,180,{0.25 + 0.75 * strength:.2f})", width=3)))
    fig.add_trace(go.Scatter(x=sx, y=np.ones(len(src)), mode="text", text=[w.text for w in src], textposition="top center",
                             showlegend=False, hovertemplate="source word %{pointNumber}<extra></extra>"))
    fig.add_trace(go.Scatter(x=tx, y=np.zeros(len(tgt)), mode="text", text=[w.text for w in tgt],
                             textposition="bottom center", showlegend=False,
                             hovertemplate="target word %{pointNumber}<extra></extra>"))
    fig.update_xaxes(visible=False, range=[-1, width])
    fig.update_yaxes(visible=False, range=[-0.4, 1.4])
    return fig.update_layout(height=260, margin=dict(l=10, r=10, t=30, b=10), plot_bgcolor="white",
                             title=f"{len(alignment.links)} links")


def contrast_bars(rows: Mapping[str, tuple[np.ndarray, np.ndarray]], source_tokens: Sequence[str],
                  prefix_tokens: Sequence[str], title: str = "") -> go.Figure:
    """Signed contrastive attributions, one bar group per method over the source tokens then the prefix tokens:
    above zero an input pushed towards the chosen token, below zero towards the foil."""
    labels = [*(f"src {i}: {t}" for i, t in enumerate(source_tokens)),
              *(f"tgt {i}: {t}" for i, t in enumerate(prefix_tokens))]
    fig = go.Figure()
    for name, (source, prefix) in rows.items():
        values = np.concatenate([np.asarray(source, dtype=np.float64), np.asarray(prefix, dtype=np.float64)])
        if values.shape != (len(labels),):
            raise ValueError(f"{name}: {values.shape[0]} scores for {len(labels)} source and prefix tokens")
        fig.add_trace(go.Bar(x=list(range(len(labels))), y=values, name=name, customdata=labels,
                             hovertemplate=f"{name}<br>" + "%{customdata}: %{y:.4g}<extra></extra>"))
    fig.add_vline(x=len(source_tokens) - 0.5, line_dash="dot", line_color="grey")
    fig.update_xaxes(tickvals=list(range(len(labels))), ticktext=[*source_tokens, *prefix_tokens], tickangle=-60,
                     title="source tokens | target prefix")
    fig.update_yaxes(title="toward the token (+) or the foil (−)", zeroline=True)
    return fig.update_layout(title=title_layout(wrap(title)), barmode="group", height=380,
                             margin=dict(l=10, r=10, t=70, b=10),
                             legend=dict(orientation="h", y=1.02, yanchor="bottom"))

"""Small attention views as HTML: coloured tables, shaded tokens and probability bars.

Streamlit remounts a plotly chart whenever its figure changes, and in the browser each remount
costs ~100 ms (plotly's newPlot: axes, text measurement, the mode bar). Views that change on every
click (a decoding step, a query token) are therefore drawn as plain HTML, which the browser lays out
in a few milliseconds. They use the heatmaps' colour scale and grey for masked cells, and every
cell names its row, column and exact value on hover (the `title` attribute), as the heatmaps do.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from plotly.colors import get_colorscale, unlabel_rgb

from attnscope.viz.heatmap import COLORSCALE, MASKED_COLOR
from attnscope.viz.labels import check_labels

_STOPS = get_colorscale(COLORSCALE)
_POSITIONS = np.array([p for p, _ in _STOPS], dtype=np.float64)
_RGB = np.array([unlabel_rgb(c) for _, c in _STOPS], dtype=np.float64)  # [stops, 3]
CELL_PX = (22, 14)  # width, height of one table cell
STYLE = (  # one <style> per view, scoped by its class, so each cell carries only its colour and hover text
    "<style>"
    ".attn-view{font-size:12px;line-height:1.25;margin:0 0 .75rem 0}"
    ".attn-view .t{font-weight:600;font-size:15px;margin-bottom:2px}"
    ".attn-view .s{opacity:.75;margin-bottom:4px}"
    ".attn-view .w{overflow-x:auto}"
    ".attn-view table{border-collapse:separate;border-spacing:1px;margin:0}"
    ".attn-view th,.attn-view td{border:0;padding:0;background:none}"
    f".attn-view td.c{{width:{CELL_PX[0]}px;min-width:{CELL_PX[0]}px;height:{CELL_PX[1]}px}}"
    ".attn-view th.r{text-align:right;white-space:nowrap;font-weight:400;padding-right:6px}"
    ".attn-view th.k{vertical-align:bottom;font-weight:400;padding-bottom:3px}"
    ".attn-view th.k div{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap;max-height:9em;"
    "overflow:hidden;text-overflow:ellipsis}"
    ".attn-view tr.m th.r{font-weight:600}"
    ".attn-view tr.m td,.attn-view tr.m th{padding-bottom:3px}"
    ".attn-view .tok{display:inline-block;padding:2px 6px;margin:2px 2px;border-radius:4px}"
    ".attn-view .bar{height:14px;border-radius:2px}"
    ".attn-view .g{display:inline-block;width:120px;height:10px;vertical-align:middle;margin:0 6px}"
    "</style>")


@dataclass(frozen=True)
class Scale:
    """The colour range of one view and what its values are (e.g. "weight", "‖a·f(x)‖")."""

    zmax: float
    label: str = "weight"

    @staticmethod
    def of(values: np.ndarray, label: str, fixed: float | None) -> Scale:
        """`fixed` when given (weights: 1), otherwise the values' own maximum (norms are unbounded)."""
        top = fixed if fixed is not None else float(np.nanmax(values)) if np.isfinite(values).any() else 1.0
        return Scale(max(top, 1e-9), label)


def colours(values: np.ndarray, zmax: float) -> np.ndarray:
    """CSS colours of the heatmaps' scale for `values` in [0, zmax] (clipped), as an array of strings."""
    x = np.clip(np.nan_to_num(np.asarray(values, dtype=np.float64) / zmax), 0.0, 1.0)
    rgb = np.stack([np.interp(x, _POSITIONS, _RGB[:, c]) for c in range(3)], axis=-1).round().astype(int)
    return np.array([f"#{r:02x}{g:02x}{b:02x}" for r, g, b in rgb.reshape(-1, 3)], dtype=object).reshape(x.shape)


def ink(values: np.ndarray, zmax: float) -> np.ndarray:
    """Text colour readable on `colours(values)`: white on the dark half of the scale."""
    return np.where(np.asarray(values, dtype=np.float64) / zmax > 0.55, "#ffffff", "#0b1f33")


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _header(title: str, subtitle: str | None) -> str:
    sub = f'<div class="s">{_esc(subtitle)}</div>' if subtitle else ""
    return f'<div class="t">{_esc(title)}</div>{sub}'


def legend(scale: Scale) -> str:
    """A colour bar from 0 to the scale's top, named by what the values are."""
    stops = ",".join(f"{c} {100 * p:.0f}%" for p, c in zip(_POSITIONS, colours(_POSITIONS * scale.zmax, scale.zmax)))
    return (f'<div class="s">{_esc(scale.label)}: 0<span class="g" style="background:linear-gradient(to right,{stops})">'
            f'</span>{scale.zmax:.3g}</div>')


def heat_table(z: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str], *, title: str, scale: Scale,
               subtitle: str | None = None, masked: np.ndarray | None = None, group_ends: Sequence[int] = ()) -> str:
    """A [rows, cols] map as a table of coloured cells, columns labelled on top (rotated).

    `masked` marks cells a mask forbids: grey, hover "masked". Rows in `group_ends` (e.g. each layer's
    mean) are drawn bold with a gap below, so layers read as blocks.
    """
    z = np.asarray(z, dtype=np.float64)
    if z.ndim != 2:
        raise ValueError(f"a heat table needs a 2-d array, got shape {z.shape}")
    check_labels(z.shape[0], row_labels, "rows")
    check_labels(z.shape[1], col_labels, "columns")
    fill, ends = colours(z, scale.zmax), set(group_ends)
    keys = [_esc(c) for c in col_labels]
    head = "".join(f'<th class="k"><div title="{k}">{k}</div></th>' for k in keys)
    rows = []
    for i, label in enumerate(row_labels):
        name = _esc(label)
        cells = []
        for j, key in enumerate(keys):
            if masked is not None and masked[i, j]:
                cells.append(f'<td class="c" style="background:{MASKED_COLOR}" title="{name} → {key}: masked"></td>')
            else:
                cells.append(f'<td class="c" style="background:{fill[i, j]}" '
                             f'title="{name} → {key}: {_esc(scale.label)} {z[i, j]:.3f}"></td>')
        css = ' class="m"' if i in ends else ""
        rows.append(f'<tr{css}><th class="r">{name}</th>{"".join(cells)}</tr>')
    return (f'<div class="attn-view">{STYLE}{_header(title, subtitle)}<div class="w"><table><thead><tr><th></th>{head}'
            f'</tr></thead><tbody>{"".join(rows)}</tbody></table></div>{legend(scale)}</div>')


def shaded_tokens(tokens: Sequence[str], weights: np.ndarray, *, title: str, scale: Scale) -> str:
    """The tokens in a row, each on a background shaded by its weight (exact value on hover)."""
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    check_labels(w.size, tokens, "tokens")
    fill, text = colours(w, scale.zmax), ink(w, scale.zmax)
    chips = "".join(f'<span class="tok" style="background:{f};color:{c}" title="{j}: {_esc(t)} · {_esc(scale.label)} {v:.3f}">'
                    f"{_esc(t)}</span>" for j, (t, v, f, c) in enumerate(zip(tokens, w, fill, text)))
    return f'<div class="attn-view">{STYLE}{_header(title, None)}<div>{chips}</div>{legend(scale)}</div>'


def probability_bars(labels: Sequence[str], probs: Sequence[float], *, title: str, subtitle: str | None = None,
                     highlight: str | None = None) -> str:
    """Horizontal bars of probabilities in [0, 1], best first; the `highlight` label's bar in red."""
    check_labels(len(probs), labels, "bars")
    rows = "".join(
        f'<tr title="{_esc(t)}: {p:.3f}"><th class="r">{_esc(t)}</th><td style="width:240px"><div class="bar" style="width:'
        f'{100 * min(max(p, 0.0), 1.0):.1f}%;background:{"crimson" if t == highlight else "steelblue"}"></div></td>'
        f'<td style="padding-left:6px">{p:.3f}</td></tr>' for t, p in zip(labels, probs))
    return f'<div class="attn-view">{STYLE}{_header(title, subtitle)}<table><tbody>{rows}</tbody></table></div>'

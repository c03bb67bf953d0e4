"""The app's own small HTML, escaped so a token never becomes markup: the translation headline and its notes, and
the live view's coloured table while a translation decodes (viz/live.py), redrawn a few times a second, which plain
HTML lays out in a few milliseconds. It uses the heatmaps' colour scale, and every cell names its row, column and
exact value on hover (the `title` attribute), as the explorer does.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from plotly.colors import get_colorscale, unlabel_rgb

from attnscope.viz.heatmap import COLORSCALE


def _stops(name: str) -> tuple[np.ndarray, np.ndarray]:
    """A plotly colour scale as its stop positions in [0, 1] and their RGB values."""
    stops = get_colorscale(name)
    return (np.array([p for p, _ in stops], dtype=np.float64),
            np.array([unlabel_rgb(c) for _, c in stops], dtype=np.float64))


_POSITIONS, _RGB = _stops(COLORSCALE)
CELL_PX = (22, 14)  # width, height of one table cell
STYLE = (  # one <style> per view, scoped by its class, so each cell carries only its colour and hover text
    "<style>"
    ".attn-view{font-size:13px;line-height:1.25;margin:0 0 .75rem 0}"
    ".attn-view .t{font-weight:600;font-size:15px;margin-bottom:2px}"
    ".attn-view .s{opacity:.75;margin-bottom:4px}"
    # A view wider than its column scrolls sideways, with a visible bar and, above it, a cue that shows
    # only while there is more to the right: the cue's animation follows the scroller's position, and a
    # scroller with nothing to scroll has no timeline, so the cue keeps its resting state (no height, not
    # shown). CSS scroll-driven animations; where a browser lacks them the bar alone remains.
    ".attn-view{timeline-scope:--attn-w}"
    ".attn-view .w{overflow-x:auto;scroll-timeline:--attn-w x;scrollbar-width:thin;scrollbar-color:#8b8f97 #eceef2}"
    ".attn-view .cue{opacity:0;max-height:0;overflow:hidden;text-align:right;font-size:12px;font-weight:600;"
    "color:#b45309;animation:attn-cue linear both;animation-timeline:--attn-w}"
    "@keyframes attn-cue{from{opacity:1;max-height:2em}90%{opacity:1;max-height:2em}to{opacity:0;max-height:2em}}"
    # row names (and the corner above them) stay in place while the cells scroll under them
    ".attn-view th.r,.attn-view thead th:first-child{position:sticky;left:0;z-index:1;background:#fff}"
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
    # heat strips (one row per vector, one cell per dimension) and tables of numbers (Inside one head)
    ".attn-view table.strip{border-spacing:0 2px}"
    ".attn-view table.strip td{height:14px;width:11px;min-width:11px;border-right:1px solid #fff}"
    ".attn-view table.strip.wide{width:100%}"
    ".attn-view table.strip td.band{width:100%;min-width:256px}"
    ".attn-view table.strip th.x{text-align:left;white-space:nowrap;font-weight:400;padding-left:6px}"
    ".attn-view .hs{display:flex;align-items:flex-end;gap:3px}"
    ".attn-view .hl{padding-right:6px;white-space:nowrap}"
    ".attn-view .hb{display:flex;flex-direction:column;flex:1 1 0;min-width:24px}"
    ".attn-view .hg{display:block;height:14px}"
    ".attn-view .hb.on .hn{color:crimson;font-weight:600}"
    ".attn-view .hb.on .hg{box-shadow:0 0 0 2px crimson}"
    ".attn-view td.num{min-width:44px;text-align:center;padding:2px 4px;font-variant-numeric:tabular-nums}"
    ".attn-view tr.q td.num{box-shadow:inset 0 2px crimson,inset 0 -2px crimson}"
    ".attn-view tr.q th.r{color:crimson;font-weight:600}"
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


LEVELS = 512  # colours per scale: finer than the eye can tell apart, and one table lookup per cell


def _table(positions: np.ndarray, rgb: np.ndarray) -> np.ndarray:
    """The scale's CSS colours at LEVELS evenly spaced points of [0, 1]."""
    x = np.linspace(0.0, 1.0, LEVELS)
    out = np.stack([np.interp(x, positions, rgb[:, c]) for c in range(3)], axis=-1).round().astype(int)
    return np.array([f"#{r:02x}{g:02x}{b:02x}" for r, g, b in out], dtype=object)


_SEQUENTIAL = _table(_POSITIONS, _RGB)


def _hex(x: np.ndarray, table: np.ndarray) -> np.ndarray:
    """CSS colours at positions `x` in [0, 1], as an array of strings of x's shape (formatting a string
    per cell cost ~40% of a redraw of Inside one head)."""
    return table[np.rint(x * (LEVELS - 1)).astype(np.intp)]


def colours(values: np.ndarray, zmax: float) -> np.ndarray:
    """CSS colours of the heatmaps' scale for `values` in [0, zmax] (clipped), as an array of strings."""
    return _hex(np.clip(np.nan_to_num(np.asarray(values, dtype=np.float64) / zmax), 0.0, 1.0), _SEQUENTIAL)




def ink(values: np.ndarray, zmax: float) -> np.ndarray:
    """Text colour readable on `colours(values)`: white on the dark half of the scale."""
    return np.where(np.asarray(values, dtype=np.float64) / zmax > 0.55, "#ffffff", "#0b1f33")


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def header(title: str, subtitle: str | None) -> str:
    sub = f'<div class="s">{esc(subtitle)}</div>' if subtitle else ""
    return f'<div class="t">{esc(title)}</div>{sub}'


CUE = '<div class="cue" role="note">wider than the page: scroll sideways for the rest →</div>'


def frame(title: str, body: str, footer: str = "") -> str:
    """A view: the style, the title, a horizontally scrollable body (with a cue while there is more to
    see) and an optional footer (e.g. a legend)."""
    return f'<div class="attn-view">{STYLE}{header(title, None)}{CUE}<div class="w">{body}</div>{footer}</div>'






def legend(scale: Scale) -> str:
    """A colour bar from 0 to the scale's top, named by what the values are."""
    stops = ",".join(f"{c} {100 * p:.0f}%" for p, c in zip(_POSITIONS, colours(_POSITIONS * scale.zmax, scale.zmax)))
    return (f'<div class="s">{esc(scale.label)}: 0<span class="g" style="background:linear-gradient(to right,{stops})">'
            f'</span>{scale.zmax:.3g}</div>')


def column_labels(labels: Sequence[str]) -> str:
    """A table's column headers, written bottom to top (rotated) so long tokens take little width."""
    return "".join(f'<th class="k"><div title="{esc(k)}">{esc(k)}</div></th>' for k in labels)

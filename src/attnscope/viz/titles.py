"""Figure titles that wrap instead of running off the plot (plotly does not wrap titles itself)."""
from __future__ import annotations

import textwrap

FULL, HALF = 110, 58  # characters per line for a full-width and a half-width (two columns) figure


def wrap(text: str, width: int = FULL) -> str:
    """Break a title at spaces into lines of at most `width` characters, joined with <br>."""
    return "<br>".join(textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False))

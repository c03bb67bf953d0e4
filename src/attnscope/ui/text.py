"""Show user and model text literally: never as markdown, links or HTML."""
from __future__ import annotations

import re

_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$&:=^])")


def plain(text: object) -> str:
    """Backslash-escape every character markdown (and Streamlit's extensions) would interpret."""
    return _SPECIAL.sub(r"\\\1", str(text)).replace("\n", " ")

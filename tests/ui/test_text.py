"""User and model text is shown literally."""
from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from attnscope.ui.text import plain


def test_markdown_and_html_are_escaped() -> None:
    shown = plain("<script>alert(1)</script> **bold** [x](javascript:alert(1)) `code` # title")
    assert "<" not in shown.replace("\\<", "") and "[" not in shown.replace("\\[", "")
    assert "**" not in shown and "`" not in shown.replace("\\`", "")


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_unescaping_gives_back_the_text(text: str) -> None:
    assert re.sub(r"\\(.)", r"\1", plain(text)) == text.replace("\n", " ")

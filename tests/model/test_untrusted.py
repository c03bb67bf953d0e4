"""JSON from anyone is parsed with a nesting limit; the depth is measured exactly, brackets in strings aside."""
from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscope.model.untrusted import MAX_DEPTH, depth, loads

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab\n'),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(alphabet='[]{}"\\ab'), c, max_size=3),
                    max_leaves=20)


def nesting(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(nesting, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(nesting, value.values()), default=0)
    return 0


@settings(max_examples=200, deadline=None)
@given(JSON, st.booleans())
def test_depth_is_the_documents_nesting_whatever_its_strings_hold(value: Any, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert depth(text) == nesting(value)
    assert loads(text) == value


def test_a_document_nested_beyond_the_limit_is_invalid_json_not_a_recursion_error() -> None:
    with pytest.raises(json.JSONDecodeError, match="nested 100,000 levels deep"):
        loads("[" * 100_000 + "]" * 100_000)
    assert loads("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None

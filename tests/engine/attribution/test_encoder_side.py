"""Which way the source side of integrated gradients goes, and how many path points a pass takes (the gradients
themselves are checked against one-at-a-time backward passes in test_saliency.py, both ways)."""
from __future__ import annotations

import pytest

from attnscope.engine.attribution.encoder_side import SOURCE_ROWS, forward_mode, path_chunk


@pytest.mark.parametrize("s,t,forward", [(11, 25, True), (25, 25, True), (60, 25, False), (1, 1, True)])
def test_forward_mode_when_the_source_has_no_more_tokens_than_the_output(s: int, t: int, forward: bool) -> None:
    assert forward_mode(s, t) is forward


@pytest.mark.parametrize("s", [1, 11, 40, 127, 128, 512])
def test_forward_mode_path_chunks_keep_the_source_tangents_within_their_rows(s: int) -> None:
    chunk = path_chunk(s, True, 16)
    assert 1 <= chunk <= 16 and (chunk == 1 or s * s * chunk <= SOURCE_ROWS)
    assert chunk == 16 or s * s * (chunk + 1) > SOURCE_ROWS  # as many path points as fit
    assert path_chunk(s, False, 16) == 16  # backward mode carries no tangents

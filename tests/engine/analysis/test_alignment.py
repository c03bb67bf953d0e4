"""Word alignment and Pharaoh export on hand-made attention maps."""
from __future__ import annotations

import numpy as np
import pytest

from attnscope.engine.analysis.alignment import align, cross_map, words

SOURCE = ("A", "little", "play", "##house", ".", "<eos>")
OUTPUT = ("Ein", "Spiel", "##haus", "klein", "<eos>")


def test_words_merge_continuations_and_skip_specials() -> None:
    got = words(SOURCE)
    assert [w.text for w in got] == ["A", "little", "playhouse", "."]
    assert [w.pieces for w in got] == [(0,), (1,), (2, 3), (4,)]
    assert [w.text for w in words(("<bos>", "##x", "y"))] == ["##x", "y"]  # a leading continuation stays a word


def test_argmax_links_merge_pieces_and_leave_sink_words_unaligned() -> None:
    m = np.zeros((len(OUTPUT), len(SOURCE)))
    m[0, 0] = 1.0  # Ein -> A
    m[1, 2], m[1, 3] = 0.4, 0.4  # Spiel -> play + ##house (0.8 for the word)
    m[1, 1] = 0.2
    m[2, 3], m[2, 5] = 0.6, 0.4  # ##haus -> ##house
    m[3, 1] = 1.0  # klein -> little
    m[4, 5] = 1.0  # <eos> is not a word
    a = align(m, SOURCE, OUTPUT)
    assert [w.text for w in a.target_words] == ["Ein", "Spielhaus", "klein"]
    np.testing.assert_allclose(a.scores[1], [0.0, 0.1, (0.8 + 0.6) / 2, 0.0])  # Spiel and ##haus averaged
    assert a.links == ((0, 0), (1, 2), (2, 1))
    assert a.pharaoh() == "0-0 1-2 2-1"


def test_a_word_pulled_most_by_eos_gets_no_link() -> None:
    m = np.zeros((2, len(SOURCE)))
    m[0, 5], m[0, 1] = 0.7, 0.3
    m[1, 0] = 1.0
    a = align(m, SOURCE, ("x", "y"))
    assert a.links == ((0, 1),)
    assert a.pharaoh() == "0-1"


def test_shape_mismatch_says_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="3 output and 6 source tokens"):
        align(np.zeros((2, 6)), SOURCE, ("a", "b", "c"))


def test_cross_map_averages_the_chosen_heads() -> None:
    from attnscope.records.attention import AttentionRecord
    rng = np.random.default_rng(0)
    cross = rng.random((2, 3, 4, 5))
    record = AttentionRecord(tuple("abcde"), tuple("wxyz"), rng.random((1, 3, 5, 5)), rng.random((2, 3, 4, 4)), cross)
    np.testing.assert_allclose(cross_map(record, 1, [0, 2]), (cross[1, 0] + cross[1, 2]) / 2)
    np.testing.assert_allclose(cross_map(record, 0), cross[0].mean(0))
    with pytest.raises(ValueError, match="at least one head"):
        cross_map(record, 0, [])

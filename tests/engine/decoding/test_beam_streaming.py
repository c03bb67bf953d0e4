"""Translator.stream with a beam: the best hypothesis after each step; a finished stream equal to translate's beam
search (hypotheses, tree, record) under several decoding rules and a forced first token; Stop keeping the best
hypothesis so far as a complete record that a teacher-forced pass confirms, with the beam at the stop in the tree.
(Threads: test_streaming.py runs its tests on both kinds of stream.)"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from attnscope.checkpoints.decoding_rules import ATTNSCOPE, DecodingRules
from attnscope.engine.decoding.beam_streaming import BeamStream, stopped_beam_note
from attnscope.engine.decoding.translator import InputError
from attnscope.model.config import EOS_ID
from tests.engine_fixtures import tiny_translator

TEXT = "d e f g h i"
RULES = {
    "attnscope": ATTNSCOPE,
    "bans and penalty": DecodingRules("fairseq-like", min_len=3, no_repeat_ngram=2, penalty="n+1", length_penalty=0.6),
    "hf": DecodingRules("hf", len_a=0.0, len_b=12.0, forced_eos="certain", finish="hf"),
    "best-finished": DecodingRules("onmt", finish="best-finished", penalty="gnmt"),
}


def same_translation(streamed, whole) -> None:
    """Two translations hold the same tokens, steps, scores, notes, search tree and (bit for bit) attention."""
    assert streamed.target_ids == whole.target_ids and streamed.steps == whole.steps and streamed.text == whole.text
    assert streamed.notes == whole.notes and streamed.budget == whole.budget and streamed.log_prob == whole.log_prob
    assert streamed.beam.hypotheses == whole.beam.hypotheses and streamed.beam.nodes == whole.beam.nodes
    for kind in ("encoder", "decoder", "cross"):
        assert np.array_equal(getattr(streamed.attention, kind), getattr(whole.attention, kind))


@pytest.mark.parametrize("rules", RULES, ids=list(RULES))
@pytest.mark.parametrize("bias,k", [(0.0, 2), (2.0, 3), (1.0, 5)])
def test_a_finished_beam_stream_is_translate_s_beam_search(rules: str, bias: float, k: int) -> None:
    tr = tiny_translator(1, eos_bias=bias)
    stream = tr.stream(TEXT, beam_size=k, rules=RULES[rules])
    assert isinstance(stream, BeamStream)
    steps = list(stream)
    streamed, whole = stream.result(), tr.translate(TEXT, beam_size=k, rules=RULES[rules])
    assert not streamed.stopped and stream.finished
    same_translation(streamed, whole)
    assert [s.index for s in steps] == list(range(stream.decoded)) and stream.decoded == max(n.step for n in whole.beam.nodes)
    assert list(steps[-1].token_ids) == list(whole.target_ids) and steps[-1].finished
    assert steps[-1].score == pytest.approx(whole.beam.hypotheses[0][1])
    assert [s.seconds for s in steps] == sorted(s.seconds for s in steps) and stream.per_token > 0


def test_a_forced_first_token_streams_as_translate_gives_it() -> None:
    tr = tiny_translator(2, eos_bias=1.0, forced_first=7)
    stream = tr.stream(TEXT, beam_size=3, length_penalty=0.5)
    first = next(iter(stream))
    assert first.token_ids == (7,)  # the model's forced first output, shown from the first step
    list(stream)
    whole = tr.translate(TEXT, beam_size=3, length_penalty=0.5)
    same_translation(stream.result(), whole)
    assert whole.target_ids[0] == 7


def test_each_step_shows_the_best_hypothesis_by_the_beam_s_score() -> None:
    """While the search goes on, the best of the finished hypotheses and those in the beam, scored alike."""
    tr = tiny_translator(0, eos_bias=1.5)
    stream = tr.stream(TEXT, beam_size=4, max_len=12)
    for step in stream:
        tree, run = stream._state.tree, stream._state.run
        finished = [n.score for n in tree.nodes if n.status == "finished"]
        alive = [] if run.finished else [n.log_prob / ATTNSCOPE.divisor(n.step) for n in run.alive()]
        assert step.score == max(finished + alive)
        assert step.finished == (step.score in finished and step.score not in alive)
        tokens, rows = stream.live(3)
        assert tokens == tr.bundle.tgt_codec.pieces(list(step.token_ids)) and len(rows) == min(3, len(tokens))
        assert all(r.shape == (len(stream.source_tokens),) and r.sum() == pytest.approx(1.0, abs=1e-5) for r in rows)
        assert stream.text == tr.bundle.tgt_codec.decode(list(step.token_ids))


def test_stop_keeps_the_best_hypothesis_so_far_as_a_complete_stopped_record() -> None:
    tr = tiny_translator(0)  # no <eos> bias: searches on to its budget
    stream = tr.stream(TEXT, beam_size=3, max_len=20)
    *_, step = itertools.islice(stream, 5)  # five steps, then Stop
    stream.stop()
    assert list(stream) == []  # a stopped stream searches no more
    result = stream.result()
    assert result.stopped and result.notes[-1] == stopped_beam_note(5, 20, 3)
    assert result.target_ids == step.token_ids and len(result.steps) == len(result.target_ids)
    beam = result.beam
    assert beam.hypotheses[0][0] == list(result.target_ids)
    assert [h[1] for h in beam.hypotheses] == sorted((h[1] for h in beam.hypotheses), reverse=True)
    stopped = [n for n in beam.nodes if n.status == "stopped"]
    assert len(stopped) == 3 and {n.step for n in stopped} == {5} and "alive" not in {n.status for n in beam.nodes}
    assert {tuple(beam.path(n.id)) for n in stopped} <= {tuple(h[0]) for h in beam.hypotheses}
    assert stream.result().target_ids == result.target_ids  # the stopped result is settled once
    # the record is what a teacher-forced pass over those tokens computes
    forced = tr.hypothesis(TEXT, list(result.target_ids))
    n = len(result.target_ids)
    assert result.attention.decoder.shape[2:] == (n, n) and result.attention.cross.shape[2] == n
    assert result.target_tokens == forced.target_tokens
    for kind in ("encoder", "decoder", "cross"):
        assert np.allclose(getattr(result.attention, kind), getattr(forced.attention, kind), atol=1e-5, rtol=0)
    assert [s.prob for s in result.steps] == pytest.approx([s.prob for s in forced.steps], abs=1e-5)
    assert result.log_prob == pytest.approx(beam.hypotheses[0][2], abs=1e-4)


def test_a_stop_can_keep_a_finished_hypothesis() -> None:
    """With <eos> likely, hypotheses finish early; a stop keeps the best by score, finished or in the beam."""
    tr = tiny_translator(1, eos_bias=2.5, max_len=32)
    stream = tr.stream(TEXT, beam_size=6, max_len=30, length_penalty=0.0)  # raw log-prob: short ones win
    for step in stream:
        if step.finished:
            break
    result = stream.result()
    assert result.stopped and result.target_ids[-1] == EOS_ID and result.target_ids == step.token_ids
    assert result.beam.hypotheses[0][0] == list(result.target_ids)


def test_stopped_before_the_first_step() -> None:
    tr = tiny_translator(0)
    stream = tr.stream(TEXT, beam_size=3)
    stream.stop()
    result = stream.result()
    assert result.stopped and result.target_ids == () and result.attention is None and result.beam is None
    assert result.notes[-1] == stopped_beam_note(0, stream.budget, 3)


def test_a_beam_stream_records_or_says_how_else() -> None:
    tr = tiny_translator(0)
    with pytest.raises(InputError, match="capture=True"):
        tr.stream(TEXT, beam_size=2, capture=False)
    with pytest.raises(InputError, match="Beam size"):
        tr.stream(TEXT, beam_size=99)

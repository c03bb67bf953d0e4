"""Translator.stream: steps in order with their rows as decoded, a finished stream equal to translate, and Stop
keeping the prefix as a complete, stopped record; threads and the model's lock for greedy and beam streams alike
(beam search's own: test_beam_streaming.py)."""
from __future__ import annotations

import math
import threading
from pathlib import Path

import numpy as np
import pytest

from attnscope.engine.decoding.decode import greedy, greedy_steps, teacher_force
from attnscope.engine.decoding.loading import load
from attnscope.engine.decoding.streaming import stopped_note
from attnscope.engine.recording.sharing import model_lock
from tests.engine_fixtures import MAX_LEN, random_source, tiny_model, tiny_translator
from tests.support import CEILING, wait_for

TEXT = "d e f g h i"


@pytest.mark.parametrize("bias", [0.0, 2.0])
def test_a_finished_stream_is_translate_bit_for_bit(bias: float) -> None:
    tr = tiny_translator(1, eos_bias=bias)
    stream = tr.stream(TEXT)
    steps = list(stream)
    whole, streamed = tr.translate(TEXT), stream.result()
    assert not streamed.stopped and streamed.notes == whole.notes and streamed.budget == whole.budget
    assert streamed.target_ids == whole.target_ids and streamed.steps == whole.steps
    for kind in ("encoder", "decoder", "cross"):
        assert np.array_equal(getattr(streamed.attention, kind), getattr(whole.attention, kind))
    # each step arrived in order with the very rows the record holds for it
    assert [s.index for s in steps] == list(range(len(whole.target_ids)))
    assert [s.token for s in steps] == list(whole.output_tokens)
    assert [s.prob for s in steps] == pytest.approx([s.prob for s in whole.steps])
    for s in steps:
        assert np.array_equal(s.cross_attention, whole.attention.cross[:, :, s.index])
        assert np.array_equal(s.self_attention, whole.attention.decoder[:, :, s.index, : s.index + 1])
    assert [s.seconds for s in steps] == sorted(s.seconds for s in steps)
    assert 0 < stream.encoding_seconds < stream.seconds and stream.per_token > 0


def test_greedy_steps_yields_each_step_and_greedy_is_their_end() -> None:
    model, src = tiny_model(0), random_source(0)
    seen = [(len(run.out.ids), run.finished) for run in greedy_steps(model, src, max_len=7)]
    assert seen == [(n, n == 7) for n in range(8)]  # once encoded, then after each of the 7 steps
    *_, run = greedy_steps(model, src, max_len=7)
    whole = greedy(model, src, max_len=7)
    assert run.decoded().ids == whole.ids and np.array_equal(run.decoded().cross, whole.cross)


def test_stop_keeps_the_prefix_as_a_complete_stopped_record() -> None:
    tr = tiny_translator(0)  # no <eos> bias: runs to its budget
    whole = tr.translate(TEXT, max_len=20)
    stream = tr.stream(TEXT, max_len=20)
    for step in stream:
        if step.index == 4:
            break
    stream.stop()
    assert list(stream) == []  # a stopped stream decodes no more
    result = stream.result()
    assert result.stopped and stream.stopped and result.notes[-1] == stopped_note(5, 20)
    assert result.target_ids == whole.target_ids[:5] and result.steps == whole.steps[:5]
    assert result.target_tokens == whole.target_tokens[:5]
    rec = result.attention
    assert rec.decoder.shape[2:] == (5, 5) and rec.cross.shape[2] == 5
    assert np.array_equal(rec.encoder, whole.attention.encoder)
    assert np.array_equal(rec.cross, whole.attention.cross[:, :, :5])
    assert np.array_equal(rec.decoder, whole.attention.decoder[:, :, :5, :5])


def test_result_of_an_unfinished_stream_stops_it() -> None:
    tr = tiny_translator(0)
    stream = tr.stream(TEXT, max_len=MAX_LEN)
    next(iter(stream))
    result = stream.result()
    assert result.stopped and len(result.target_ids) == 1


@pytest.mark.parametrize("beam", [1, 3])
def test_the_model_is_free_between_steps(beam: int) -> None:
    """Another thread can take the model's lock while a stream (greedy, or a beam search) waits between two steps."""
    tr = tiny_translator(0)
    stream = iter(tr.stream(TEXT, max_len=10, beam_size=beam))
    next(stream)
    took = []

    def use_the_model() -> None:
        lock = model_lock(tr.model)
        took.append(lock.acquire(timeout=CEILING))  # free at once; only a hang waits
        lock.release()

    other = threading.Thread(target=use_the_model)
    other.start()
    other.join()
    assert took == [True]
    assert next(stream).index == 1  # and the stream goes on


class SpyLock:
    """A lock that notes each thread that asks for it (whether a stop waited for the step)."""

    def __init__(self) -> None:
        self.lock, self.asked = threading.Lock(), []

    def __enter__(self) -> SpyLock:
        self.asked.append(threading.current_thread())
        self.lock.acquire()
        return self

    def __exit__(self, *_: object) -> None:
        self.lock.release()


@pytest.mark.parametrize("beam", [1, 3])
def test_a_stop_from_another_thread_waits_for_the_step_running_and_keeps_it(beam: int) -> None:
    """Streamlit's fast reruns: the click's run stops the stream while the previous run's thread is inside a step.
    Closing the running generator then raised "generator already executing"; now the stop waits for the step. The
    old thread, like a page run, stops at its next redraw: here it waits for the stop after the blocked step. A beam
    search streams through the same steps and lock (its best hypothesis after 3 steps has 3 tokens)."""
    tr = tiny_translator(0, eos_bias=-20.0)  # never ends by itself
    stream = tr.stream(TEXT, beam_size=beam)
    stream._lock = spy = SpyLock()
    inside, release, stopped = threading.Event(), threading.Event(), threading.Event()
    steps, errors = stream._steps, []

    def slowed():  # the third token's step blocks until released, as a step on a big model takes a while
        for i, run in enumerate(steps):
            if i == 3:
                inside.set()
                assert release.wait(CEILING)
            yield run

    def consume() -> None:
        try:
            for step in stream:
                if step.index == 2:
                    assert stopped.wait(CEILING)
        except Exception as e:  # noqa: BLE001 - any error of the iterating thread fails the test
            errors.append(e)

    def stop() -> None:
        try:
            stream.stop()
        except Exception as e:  # noqa: BLE001
            errors.append(e)
        stopped.set()

    stream._steps = slowed()
    old, stopper = threading.Thread(target=consume), threading.Thread(target=stop)
    old.start()
    assert inside.wait(CEILING)
    stopper.start()
    wait_for(lambda: stopper in spy.asked or not stopper.is_alive(), "the stop to wait for the step, or to fail")
    release.set()
    stopper.join(CEILING)
    old.join(CEILING)
    assert errors == []
    result = stream.result()
    assert result.stopped and len(result.target_ids) == len(stream.steps) == 3  # the blocked step kept, none after


def test_a_long_stream_from_a_loaded_checkpoint_equals_translate_and_a_teacher_forced_pass(tmp_path: Path) -> None:
    """30 tokens (the KV cache outgrows its first buffers) from a loaded checkpoint (its output layer column-major):
    the stream's ids, probabilities and rows are translate's, and the rows and log-probabilities equal one
    teacher-forced pass over the same output, which runs without a cache."""
    tr = load(tiny_translator(0).save(tmp_path / "tiny.safetensors"))
    assert tr.model.generator.weight.stride()[0] == 1  # column-major, as read
    stream = tr.stream(TEXT, max_len=30)
    steps = list(stream)
    streamed, whole = stream.result(), tr.translate(TEXT, max_len=30)
    assert len(steps) == 30 and streamed.target_ids == whole.target_ids and streamed.steps == whole.steps
    for kind in ("encoder", "decoder", "cross"):
        assert np.array_equal(getattr(streamed.attention, kind), getattr(whole.attention, kind))
    forced = teacher_force(tr.model, list(streamed.source_ids), list(streamed.target_ids))
    for s in steps:
        assert np.allclose(s.self_attention, forced.decoder[:, :, s.index, : s.index + 1].numpy(), atol=1e-5)
        assert np.allclose(s.cross_attention, forced.cross[:, :, s.index].numpy(), atol=1e-5)
    assert [s.log_prob for s in forced.steps] == pytest.approx([math.log(s.prob) for s in steps], abs=1e-4)

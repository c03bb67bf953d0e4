"""A module's calls in a decoding loop become each sentence's rows, whichever way the loop ran; what cannot be
told apart is refused in one sentence that says what to pass."""
from __future__ import annotations

import pytest
import torch

from attnscope.engine.recording.loop_calls import analyse
from attnscope.records.attention import RecordError


def causal(b: int = 3, h: int = 2, t: int = 5, seed: int = 0) -> torch.Tensor:
    """[B, H, T, T] softmax rows with the future masked: what one full pass over T positions computes."""
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(b, h, t, t, generator=g).masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    return scores.softmax(-1)


def test_identical_repeats_count_once() -> None:
    encoder = causal(t=4).transpose(-1, -2).softmax(-1)  # any full matrix
    calls = analyse("encoder.0", [encoder, encoder.clone(), encoder.clone()])
    assert calls.pattern == "once" and len(calls.calls) == 1
    assert torch.equal(calls.all_rows(), encoder) and torch.equal(calls.rows(2), encoder[2])


def test_whole_prefix_reruns_and_cached_steps_give_the_full_pass() -> None:
    full = causal()
    rerun = analyse("dec", [full[:, :, :t, :t] for t in range(1, 6)])
    steps = analyse("dec", [full[:, :, t:t + 1, :t + 1] for t in range(5)])
    prompt = analyse("dec", [full[:, :, :2, :2], *(full[:, :, t:t + 1, :t + 1] for t in range(2, 5))])
    assert (rerun.pattern, steps.pattern, prompt.pattern) == ("rerun", "steps", "steps")
    for calls in (rerun, steps, prompt):
        assert torch.equal(calls.all_rows(), full)
        assert torch.equal(calls.rows(1), full[1])


def test_a_cached_beam_needs_the_rows_of_its_hypothesis() -> None:
    """Batch 1 at the first step, then 3 beams reordered every step: only beam_rows can tell which row is whose."""
    full = causal(b=3)
    order = [torch.tensor([0]), torch.tensor([2, 0, 1]), torch.tensor([1, 2, 0]), torch.tensor([0, 1, 2]),
             torch.tensor([2, 1, 0])]
    calls = analyse("decoder.0.self", [full[o][:, :, t:t + 1, :t + 1] for t, o in enumerate(order)])
    beam_rows = [int((o == 1).nonzero()) if len(o) > 1 else 0 for o in order]  # where hypothesis 1 sat at each step
    rows = calls.rows(beam_rows=beam_rows)
    assert torch.equal(rows[:, 1:], full[1, :, 1:]) and torch.equal(rows[:, 0], full[0, :, 0])
    with pytest.raises(RecordError, match=r"decoder.0.self ran one query per step on batches of 1, 3, 3, 3, 3 rows .*"
                                          r"pass to_record\(\.\.\., beam_rows=\[the hypothesis' batch row at each of the 5"):
        calls.rows(1)
    with pytest.raises(RecordError, match="beam_rows gives 2 rows but decoder.0.self ran 5 decoding steps"):
        calls.rows(beam_rows=[0, 1])
    with pytest.raises(RecordError, match="ran one query per step on batches"):
        calls.all_rows()


def test_a_rerun_beam_is_traced_back_from_the_last_step() -> None:
    """Re-run prefixes show each row's parent: the hypothesis' row in the last step is enough."""
    full = causal(b=3, t=4, seed=1)
    order = [torch.tensor([0]), torch.tensor([1, 0, 2]), torch.tensor([2, 1, 0]), torch.tensor([0, 2, 1])]
    calls = analyse("dec", [full[o][:, :, :t + 1, :t + 1] for t, o in enumerate(order)])
    # rows of different beams share nothing but the first query, so full[o] restricted to t+1 queries is a valid rerun
    assert calls.pattern == "rerun"
    assert torch.equal(calls.rows(item=1), full[2])  # row 1 of the last step is sentence 2
    with pytest.raises(RecordError, match="beam_rows do not follow one hypothesis: in dec, row 0 of step 2"):
        calls.rows(beam_rows=[0, 0, 0, 0])
    with pytest.raises(RecordError, match="dec ran on a batch of 3 rows; asked for row 5"):
        calls.rows(item=5)


def test_unrelated_calls_are_refused_with_the_module_named() -> None:
    one, other = causal(b=1, t=3, seed=2), causal(b=1, t=6, seed=3)
    with pytest.raises(RecordError, match=r"enc.1 was called 2 times on unrelated inputs \(queries per call: 3, 6\), "
                                          r"not as one decoding loop: record one sentence per"):
        analyse("enc.1", [one, other])

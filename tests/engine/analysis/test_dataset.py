"""Batched capture over many sentences equals translating them one by one."""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from attnscope.checkpoints.decoding_rules import DecodingRules, fairseq_defaults, opennmt_defaults
from attnscope.engine.analysis.dataset import (
    SharesByPosition,
    attributions_each,
    batched_records,
    head_stats_batched,
    head_stats_each,
    head_stats_summary,
    layer_comparison,
    shares_by_position,
    shares_each,
)
from attnscope.engine.analysis.heads import head_stats_over
from attnscope.engine.attribution.agreement import agreement_rows, layer_agreement, summarize_agreement
from attnscope.engine.attribution.alti import alti_plus
from attnscope.engine.attribution.quadrature import IGSettings
from attnscope.engine.attribution.value_zeroing import value_zeroing
from tests.engine_fixtures import tiny_translator

SENTENCES = ["a b c d", "e f", "", "g h i j k l a", "b", "c c d d e"]


@pytest.fixture(scope="module")
def tr():
    return tiny_translator(0, eos_bias=2.0)


def test_batched_records_equal_one_by_one_translations(tr) -> None:
    seen = []
    got = dict(batched_records(tr, SENTENCES, batch_size=2, progress=lambda i, n: seen.append((i, n))))
    assert sorted(got) == [0, 1, 3, 4, 5]  # the blank sentence is left out
    assert seen[-1] == (5, 5)
    for i, record in got.items():
        single = tr.translate(SENTENCES[i]).attention
        assert record.source_tokens == single.source_tokens and record.target_tokens == single.target_tokens
        for kind in ("encoder", "decoder", "cross"):
            np.testing.assert_allclose(record.array(kind), single.array(kind), atol=1e-5)
    lengths = {len(r.target_tokens) for r in got.values()}
    assert len(lengths) > 1  # padded batches
    assert any(len(r.target_tokens) == 2 * len(r.source_tokens) + 10 for r in got.values())  # one ran to its budget


@pytest.mark.parametrize("rules", [dataclasses.replace(fairseq_defaults(1024), len_b=7.0), opennmt_defaults()])
def test_batched_records_decode_by_the_translators_rules(tr, rules: DecodingRules) -> None:
    ruled = dataclasses.replace(tr, rules=rules)
    got = dict(batched_records(ruled, SENTENCES, batch_size=2))
    for i, record in got.items():
        assert record.target_tokens == ruled.translate(SENTENCES[i]).attention.target_tokens
    assert any(record.target_tokens != tr.translate(SENTENCES[i]).attention.target_tokens for i, record in got.items())


def test_head_stats_batched_equal_the_one_by_one_average(tr) -> None:
    texts = [s for s in SENTENCES if s]
    fast = head_stats_batched(tr, texts, batch_size=3)
    slow = head_stats_over(tr, texts)
    pd.testing.assert_frame_equal(fast, slow, atol=1e-5)
    with pytest.raises(ValueError, match="empty"):
        head_stats_batched(tr, ["", " "])


def test_layer_comparison_over_a_sample(tr) -> None:
    summary = layer_comparison(tr, ["a b c", "d e f g"], ig=IGSettings(max_points=16))
    assert set(summary["layer"]) == set(range(tr.model.config.n_decoder_layers))
    assert {"ALTI+", "value zeroing", "gradient × input", "integrated gradients"} == set(summary["reference"])


def test_shares_by_position_average_each_translations_own_split(tr) -> None:
    seen = []
    shares = shares_by_position(tr, SENTENCES, batch_size=2, progress=lambda i, n: seen.append((i, n)))
    rows = {"ALTI+": [], "value zeroing": []}
    for text in SENTENCES:
        if not text:
            continue
        result = tr.translate(text)
        rows["ALTI+"].append(alti_plus(tr, result).source_share)
        rows["value zeroing"].append(value_zeroing(tr, result).source_share)
    longest = max(len(r) for r in rows["ALTI+"])
    assert shares.sentences == 5 and seen[-1] == (5, 5)
    for t in range(longest):
        at_t = [r[t] for r in rows["ALTI+"] if len(r) > t]
        assert shares.counts[t] == len(at_t)
        for measure, per_sentence in rows.items():
            values = [r[t] for r in per_sentence if len(r) > t]
            assert shares.mean[measure][t] == pytest.approx(np.mean(values), abs=1e-12)
            assert shares.std[measure][t] == pytest.approx(np.std(values), abs=1e-12)
    weighted = sum(r.sum() for r in rows["ALTI+"]) / sum(len(r) for r in rows["ALTI+"])
    assert shares.overall("ALTI+") == pytest.approx(weighted, abs=1e-12)
    with pytest.raises(ValueError, match="empty"):
        shares_by_position(tr, ["", " "])


def test_shares_come_one_sentence_at_a_time_and_any_finished_subset_averages_exactly(tr) -> None:
    each = dict(shares_each(tr, SENTENCES, batch_size=2))
    assert sorted(each) == [0, 1, 3, 4, 5]  # the blank sentence is left out
    first = [i for i in sorted(each)][:3]  # what a run stopped after three sentences keeps
    part = SharesByPosition.over([each[i] for i in first])
    whole = shares_by_position(tr, [SENTENCES[i] for i in first])
    assert part.sentences == whole.sentences == 3
    np.testing.assert_array_equal(part.counts, whole.counts)
    for measure in ("ALTI+", "value zeroing"):
        np.testing.assert_allclose(part.mean[measure], whole.mean[measure], atol=1e-12)
    with pytest.raises(ValueError, match="empty"):
        SharesByPosition.over([])


def test_layer_agreement_is_the_summary_of_each_sentences_rows(tr) -> None:
    atts = dict(attributions_each(tr, ["a b c", "", "d e f g"]))
    assert sorted(atts) == [0, 2]
    rows = {i: agreement_rows(att) for i, att in atts.items()}
    assert len(rows[0]) == tr.model.config.n_decoder_layers * 2 * 3 * len(atts[0].output_tokens)  # 2 measures, 3 refs
    pd.testing.assert_frame_equal(summarize_agreement(rows.values()), layer_agreement(atts.values()))
    pd.testing.assert_frame_equal(summarize_agreement([rows[2]]), layer_agreement([atts[2]]))
    with pytest.raises(ValueError, match="no sentences"):
        summarize_agreement([])


def test_head_stats_of_any_finished_subset_equal_the_batched_average_of_it(tr) -> None:
    each = dict(head_stats_each(tr, SENTENCES, batch_size=2))
    assert sorted(each) == [0, 1, 3, 4, 5]
    part = head_stats_summary([each[i] for i in (1, 4, 5)])
    pd.testing.assert_frame_equal(part, head_stats_batched(tr, [SENTENCES[i] for i in (1, 4, 5)]), atol=1e-12)


def test_batched_records_hold_no_lock_between_batches(tr) -> None:
    """A caller may stop between sentences (the page's Stop): the model must be free again meanwhile."""
    import threading

    from attnscope.engine.recording.sharing import model_lock

    records = batched_records(tr, SENTENCES, batch_size=2)
    next(records)
    lock, free = model_lock(tr.model), []

    def other_user() -> None:  # another thread: the lock is re-entrant for this one
        if lock.acquire(timeout=10):  # immediate when free; the timeout only ends a failing test
            free.append(True)
            lock.release()

    thread = threading.Thread(target=other_user)
    thread.start()
    thread.join()
    records.close()
    assert free

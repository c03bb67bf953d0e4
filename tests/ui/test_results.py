"""The app's shared caches: many sessions at once on one model, and a re-published checkpoint."""
from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest
import streamlit as st

from attnscope.checkpoints.checkpoint import save
from attnscope.records.attention import KINDS
from attnscope.ui import models, results
from attnscope.ui.query import Query
from tests.engine_fixtures import no_hooks_left, tiny_translator
from tests.support import run_threads

SENTENCES = ["a b c", "d e f g", "b a", "j i h g f", "c c d", "e d c b a b", "l k", "g g g g g"]


@pytest.fixture(autouse=True)
def fresh_caches() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()


def published(folder: Path, seed: int, mtime: float) -> Path:
    """A model saved as `tiny.safetensors` (the same name every time), stamped with `mtime`."""
    tr = tiny_translator(seed, eos_bias=2.0)
    path = save(tr.model, tr.bundle, folder / "tiny.safetensors")
    os.utime(path, (mtime, mtime))
    return path


def test_concurrent_sessions_on_one_cached_model_each_get_their_own_results(tmp_path: Path) -> None:
    path = published(tmp_path, 0, 1_000_000.0)
    tr = models._load(str(path), path.stat().st_mtime)
    expected = {s: tr.translate(s) for s in SENTENCES}
    seen: dict[int, object] = {}
    start = threading.Barrier(len(SENTENCES))

    def session(i: int) -> None:
        start.wait()
        mine = models._load(str(path), path.stat().st_mtime)  # every session shares the one cached model
        query = Query.of(mine, SENTENCES[i])
        seen[i] = (mine is tr, results.translate(mine, query), results.force(mine, query, (4,)))

    run_threads(session, [(i,) for i in range(len(SENTENCES))])
    assert sorted(seen) == list(range(len(SENTENCES)))
    for i, (shared, translation, forced) in seen.items():
        want = expected[SENTENCES[i]]
        assert shared and translation.text == want.text and translation.source_tokens == want.source_tokens
        for kind in KINDS:
            assert np.array_equal(getattr(translation.attention, kind), getattr(want.attention, kind)), (i, kind)
        assert forced.target_ids[0] == 4
    assert no_hooks_left(tr.model)


def test_a_republished_checkpoint_is_never_answered_from_the_old_models_cache(tmp_path: Path) -> None:
    path = published(tmp_path, 0, 1_000_000.0)
    first = models._load(str(path), path.stat().st_mtime)
    old = results.translate(first, Query.of(first, "a b c"))
    path = published(tmp_path, 1, 2_000_000.0)  # a training run re-publishes under the same name
    tr = models._load(str(path), path.stat().st_mtime)
    new = results.translate(tr, Query.of(tr, "a b c"))
    assert tr.name == "tiny" and old is not new
    fresh = tr.translate("a b c")
    assert all(np.array_equal(getattr(new.attention, k), getattr(fresh.attention, k)) for k in KINDS)
    assert not np.array_equal(old.attention.encoder, fresh.attention.encoder)

"""Issue 27 on the shipped en→de model: ALTI+'s source share falls along the target, as published; value
zeroing's rollout says "the source, always" (the reason it no longer gives the split)."""
from __future__ import annotations

import numpy as np

import attnscope
from attnscope.engine.analysis.dataset import shares_by_position
from attnscope.engine.attribution.alti import METHOD as ALTI
from attnscope.engine.attribution.value_zeroing import METHOD as VALUE_ZEROING
from attnscope.training.data import sample_pairs


def test_the_source_share_falls_along_the_target_with_alti_plus_only() -> None:
    tr = attnscope.load()
    shares = shares_by_position(tr, [s for s, _ in sample_pairs("en", "de", "test_2016_flickr", 40)])
    alti, vz = shares.mean[ALTI], shares.mean[VALUE_ZEROING]
    assert shares.counts[:12].min() >= 20  # positions 1-12 are backed by at least 20 sentences each
    early, late = alti[:3].mean(), alti[9:12].mean()
    assert 0.6 < early < 0.85 and late < early - 0.05  # Voita et al. 2021; Ferrando et al. 2022
    assert 0.3 < shares.overall(ALTI) < 0.8  # a real share for the prefix
    assert shares.overall(VALUE_ZEROING) > 0.95 and np.all(vz[:12] > alti[:12])

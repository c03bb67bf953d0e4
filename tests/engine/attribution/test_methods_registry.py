"""The registry of attribution methods: what the modules declare, in order; and a new method, one module dropped
into the package, reaching the sentence's maps, the Step page's table, the agreement rows, the dataset comparison's
references and the page's explanations with no other file touched."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

import attnscope.engine.attribution as package
from attnscope.engine.attribution.agreement import agreement_rows
from attnscope.engine.attribution.registry import CONTRAST, explanations, method, methods, names, references, splitting
from attnscope.engine.attribution.sentence import attribute
from attnscope.engine.attribution.step_attribution import step_attributions
from tests.engine_fixtures import tiny_translator

NEW_METHOD = '''
import numpy as np

from attnscope.engine.attribution.registry import Method

ATTRIBUTIONS = (Method("uniform", "1/S for every source token", exact=True, cost="none", order=9,
                       explanation="**Uniform.** Every source token alike: a floor to compare with.",
                       compute=lambda i: np.full((len(i.translation.target_ids), len(i.translation.source_ids)),
                                                 1.0 / len(i.translation.source_ids)),
                       source_map=lambda scores, _layer: scores),)
'''


def test_every_method_is_declared_once_in_order_with_what_the_page_says_of_it() -> None:
    every = methods(None)
    assert [m.order for m in every] == sorted(m.order for m in every) and len(set(names(None))) == len(every)
    assert names() == ("attention", "norm-based", "ALTI+", "value zeroing", "gradient × input", "integrated gradients")
    assert names(CONTRAST) == ("contrastive gradient × input", "contrastive integrated gradients")
    assert references() == ("ALTI+", "value zeroing", "gradient × input", "integrated gradients")
    assert [m.name for m in splitting()] == ["ALTI+", "value zeroing"]
    assert all(m.explanation.startswith("**") and m.computes and m.cost for m in every)
    assert [m.name for m in every if m.exact] == ["attention", "norm-based", "ALTI+", "value zeroing"]
    with pytest.raises(ValueError, match="no attribution method 'LRP'; known: attention, norm-based"):
        method("LRP")


def test_a_new_method_is_one_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "uniform.py").write_text(NEW_METHOD)
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path)])
    tr = tiny_translator(0, eos_bias=2.0)
    try:
        att = attribute(tr, tr.translate("a b c d"))
        assert list(att.source_maps(0))[-1] == "uniform"  # the methods tab and the agreement view
        assert list(step_attributions(att, 0).maps)[-1] == "uniform"  # the Step page's table
        assert "uniform" in set(agreement_rows(att)["reference"]) and references()[-1] == "uniform"  # the dataset tab
        assert explanations().endswith("**Uniform.** Every source token alike: a floor to compare with.")
    finally:  # imported from the test's folder: forgotten after it, as the folder is
        sys.modules.pop("attnscope.engine.attribution.uniform", None)

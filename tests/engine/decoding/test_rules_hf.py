"""An imported Hugging Face model decodes by its generation_config by default: the same tokens as transformers' own
generate() with that config and no arguments, greedy and beam (lengths, forced </s>, min lengths, length penalty,
no-repeat n-grams, each early_stopping), on tiny random MarianMT and BART models built here."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from attnscope.checkpoints.importers import import_any
from attnscope.checkpoints.importers.parts import Imported
from attnscope.engine.decoding.translator import Translator
from tests.checkpoints import hf_fixtures

transformers = pytest.importorskip("transformers")

CASES: dict[str, dict[str, Any]] = {
    "greedy: max_length, min_length": dict(max_length=9, min_length=5),
    "greedy: no_repeat_ngram_size": dict(max_length=16, no_repeat_ngram_size=2),
    "beam: early_stopping False, length_penalty 0.6": dict(num_beams=4, length_penalty=0.6, max_length=12),
    "beam: length_penalty 2, no_repeat_ngram_size": dict(num_beams=3, length_penalty=2.0, max_length=12,
                                                         no_repeat_ngram_size=2),
    "beam: early_stopping True": dict(num_beams=4, early_stopping=True, max_length=12),
    "beam: early_stopping never": dict(num_beams=4, early_stopping="never", length_penalty=1.5, max_length=12),
    "beam: max_new_tokens, min_new_tokens": dict(num_beams=2, max_new_tokens=7, min_new_tokens=3),
}
SENTENCES = hf_fixtures.SENTENCES[:10]


@pytest.fixture(scope="module", params=["marian", "bart"])
def family(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, Any, Any]:
    folder = hf_fixtures.FAMILIES[request.param](tmp_path_factory.mktemp(request.param))
    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(str(folder), attn_implementation="eager").eval()
    return request.param, folder, tok, hf


def configured(folder: Path, settings: dict[str, Any]) -> tuple[Imported, Any]:
    """The folder with `settings` in its generation_config.json, imported, and that config as transformers reads it."""
    path = folder / "generation_config.json"
    base = json.loads(path.read_text()) if path.is_file() else {}
    path.write_text(json.dumps({**base, **settings}))
    try:
        return import_any(folder), transformers.GenerationConfig.from_pretrained(str(folder))
    finally:
        path.write_text(json.dumps(base))


def generated(hf: Any, tok: Any, imported: Imported, text: str) -> list[int]:
    """transformers' generate() with the model's generation_config and nothing else, in attnscope's ids."""
    with torch.no_grad():
        row = hf.generate(**tok([text], return_tensors="pt"))[0].tolist()
    back = {o: i for i, o in enumerate(imported.tgt_order) if o is not None}
    ids = [back[i] for i in row[1:]]
    eos = imported.model.config.eos_id
    return ids[: ids.index(eos) + 1] if eos in ids else ids


@pytest.mark.parametrize("case", list(CASES))
def test_the_default_rules_are_generate_with_the_generation_config(family: tuple, case: str) -> None:
    name, folder, tok, hf = family
    imported, generation = configured(folder, CASES[case])
    tr = Translator(imported.model, imported.bundle)
    assert tr.rules.name == "the model's generation_config" and tr.rules.beam_size == (generation.num_beams or 1)
    hf.generation_config = generation
    cut = 0
    for text in SENTENCES:
        ours = tr.translate(text, beam_size=tr.rules.beam_size, capture=False)
        theirs = generated(hf, tok, imported, text)
        assert list(ours.target_ids) == theirs, (name, case, text)
        cut += len(theirs) == ours.budget
    if "max_length" in CASES[case] and CASES[case]["max_length"] <= 12:
        assert cut, "no output reached the limit, so the forced </s> was not tested"


def test_attnscopes_own_rules_differ_where_the_config_forces_eos(family: tuple) -> None:
    name, folder, tok, hf = family
    imported, generation = configured(folder, dict(max_length=6))
    tr = Translator(imported.model, imported.bundle)
    hf.generation_config = generation
    model_rules = [list(tr.translate(t, capture=False).target_ids) for t in SENTENCES]
    own = [list(tr.translate(t, max_len=5, capture=False, rules="attnscope").target_ids) for t in SENTENCES]
    assert model_rules == [generated(hf, tok, imported, t) for t in SENTENCES]
    eos = imported.model.config.eos_id
    assert all(m[-1] == eos for m in model_rules) and any(o[-1] != eos for o in own)

"""Hugging Face Marian, BART, mBART(-50), M2M100 and NLLB models, imported, compute what transformers computes.

Each family is a tiny random model of the real transformers class saved with save_pretrained (hf_fixtures.py),
imported, written as an attnscope checkpoint and loaded back; then, against transformers itself (eager
attention, float32): the tokenizer's ids and decoded text, teacher-forced logits (<= 1e-4) and every attention
weight (<= 1e-5) on a padded batch, greedy outputs token for token on 20 sentences, and beam search's best
hypothesis under two length penalties.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

import attnscope
from attnscope.checkpoints.importers.huggingface import import_hf
from attnscope.checkpoints.importers.parts import Imported
from attnscope.engine.decoding.translator import Translator
from attnscope.engine.recording.capture import record_attention
from tests.checkpoints import hf_fixtures
from tests.checkpoints.hf_fixtures import DE, EN, LANGS, SENTENCES, transformers

LOGITS_ATOL, ATTENTION_ATOL = 1e-4, 1e-5
KINDS = (("encoder", "encoder_attentions"), ("decoder", "decoder_attentions"), ("cross", "cross_attentions"))
VARIANTS = {"marian": hf_fixtures.marian, "bart": hf_fixtures.bart, "mbart": hf_fixtures.mbart,
            "mbart50": lambda f: hf_fixtures.mbart(f, fifty=True), "m2m100": hf_fixtures.m2m100, "nllb": hf_fixtures.nllb}


@dataclass
class Pair:
    """One family: transformers' model and tokenizer, and the imported attnscope translator."""

    name: str
    hf: Any
    tok: Any
    ours: Translator
    imported: Imported

    def to_hf(self, ids: list[int], side: str = "tgt") -> list[int]:
        order = self.imported.tgt_order if side == "tgt" else self.imported.src_order
        return [order[i] for i in ids]

    def start(self) -> list[int]:
        """transformers' decoder prefix before the first free token: the start token (and a forced language code)."""
        start = self.hf.generation_config.decoder_start_token_id
        forced = self.ours.model.config.forced_first
        return [start] + ([] if forced is None else [self.imported.tgt_order[forced]])


@pytest.fixture(scope="module", params=list(VARIANTS))
def pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Pair:
    name = request.param
    folder = VARIANTS[name](tmp_path_factory.mktemp(name))
    src, tgt = LANGS["mbart" if name == "mbart50" else name]
    imported = import_hf(folder, src_lang=src, tgt_lang=tgt)
    path = attnscope.Translator(imported.model, imported.bundle).save(folder.parent / f"{name}.safetensors")
    kw = dict(src_lang=src, tgt_lang=tgt) if name not in ("marian", "bart") else {}
    tok = transformers.AutoTokenizer.from_pretrained(str(folder), **kw)
    hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(str(folder), attn_implementation="eager").eval()
    hf.generation_config.forced_eos_token_id = None  # attnscope's own rules stop at the limit without forcing </s>
    return Pair(name, hf, tok, attnscope.load(path, rules="attnscope"), imported)


def test_the_vocabulary_keeps_the_originals_ids_and_the_config_names_its_specials(pair: Pair) -> None:
    """Every id is the original's id of the same token (specials renamed in place): no row moved or added."""
    codec, order, tok, c = pair.ours.bundle.tgt_codec, pair.imported.tgt_order, pair.tok, pair.ours.model.config
    assert order == tuple(range(pair.hf.config.vocab_size))
    bos = tok.pad_token_id if tok.bos_token_id is None else tok.bos_token_id  # Marian has none: it starts on <pad>
    assert (c.pad_id, c.bos_id, c.eos_id, c.unk_id) == (tok.pad_token_id, bos, tok.eos_token_id, tok.unk_token_id)
    specials = {c.pad_id: "<pad>", c.eos_id: "<eos>", c.unk_id: "<unk>"} | ({} if c.bos_id == c.pad_id else {c.bos_id: "<bos>"})
    names = tok.convert_ids_to_tokens(list(order))
    assert [codec.token(i) for i in order] == [specials.get(i) or n or tok.unk_token for i, n in enumerate(names)]
    assert codec.specials == {role: getattr(c, f"{role}_id") for role in ("pad", "bos", "eos", "unk")
                              if role != "bos" or c.bos_id != c.pad_id}


def test_tokenizer_gives_the_originals_ids(pair: Pair) -> None:
    for text in SENTENCES:
        source, _ = pair.ours.source(text)
        assert pair.to_hf(source, "src") == pair.tok(text)["input_ids"], text
    for text in DE + EN[:4]:
        theirs = pair.tok(text_target=text, add_special_tokens=False)["input_ids"]
        assert pair.to_hf(pair.ours.bundle.tgt_codec.encode(text)) == theirs, text


def test_decoded_text_is_the_originals(pair: Pair) -> None:
    """Generated-like id sequences (every token, language codes and <unk> included) decode as the original's
    decode(..., skip_special_tokens=True)."""
    order, c = pair.imported.tgt_order, pair.ours.model.config
    generator = torch.Generator().manual_seed(0)
    for length in (1, 3, 8, 15):
        for _ in range(8):
            ours = torch.randint(0, len(order), (length,), generator=generator).tolist()
            ours = [i for i in ours if i not in (c.pad_id, c.bos_id, c.eos_id)] + [c.eos_id]
            expected = pair.tok.decode([pair.hf.generation_config.decoder_start_token_id, *pair.to_hf(ours)],
                                       skip_special_tokens=True)
            assert pair.ours.bundle.tgt_codec.decode(ours) == expected, pair.to_hf(ours)


def _batch(pair: Pair) -> tuple[torch.Tensor, torch.Tensor, list[list[int]]]:
    """Padded sources and decoder inputs in both numberings: (ours src, ours tgt, per-row decoder inputs in theirs)."""
    sources = [pair.ours.source(text)[0] for text in EN[:4]]
    targets = [pair.ours.bundle.tgt_codec.encode(text) for text in DE[:4]]
    c = pair.ours.model.config
    prefix = [c.bos_id] + ([] if c.forced_first is None else [c.forced_first])
    inputs = [prefix + t for t in targets]
    theirs = [pair.start() + pair.to_hf(t) for t in targets]
    return _padded(sources, c.pad_id), _padded(inputs, c.pad_id), theirs


def _padded(rows: list[list[int]], pad: int) -> torch.Tensor:
    return torch.tensor([r + [pad] * (max(map(len, rows)) - len(r)) for r in rows])


def test_teacher_forced_logits_and_every_attention_weight(pair: Pair) -> None:
    src, tgt, theirs = _batch(pair)
    src_hf = torch.tensor([pair.to_hf(row, "src") for row in src.tolist()])
    pad_hf, pad = pair.tok.pad_token_id, pair.ours.model.config.pad_id
    src_hf[src == pad] = pad_hf
    tgt_hf = torch.full(tgt.shape, pad_hf)
    for i, row in enumerate(theirs):
        tgt_hf[i, :len(row)] = torch.tensor(row)
    with torch.no_grad():
        out = pair.hf(input_ids=src_hf, attention_mask=(src != pad).long(), decoder_input_ids=tgt_hf,
                      output_attentions=True)
        with record_attention(pair.ours.model) as rec:
            logits = pair.ours.model(src, tgt)
    config, order = pair.ours.model.config, pair.imported.tgt_order
    real = [i for i, o in enumerate(order) if o is not None and i not in config.suppressed]
    first = 1 if config.forced_first is not None else 0  # position 0 is forced to the language code
    for b in range(src.shape[0]):
        t, s = len(theirs[b]), int((src[b] != pad).sum())
        mine, hf = logits[b, first:t][:, real], out.logits[b, first:t][:, [order[i] for i in real]]
        assert (mine - hf).abs().max() <= LOGITS_ATOL
        assert torch.isinf(logits[b, :t][:, list(config.suppressed)]).all()
        by_kind = {kind: [rec.module(n).weights for n in names] for kind, names in
                   {k: list(v) for k, v in pair.ours.model.attention_by_kind().items()}.items()}
        for kind, field in KINDS:
            rows = s if kind == "encoder" else t
            for ours_layer, hf_layer in zip(by_kind[kind], getattr(out, field)):
                keys = s if kind != "decoder" else t
                diff = ours_layer[b, :, :rows, :keys] - hf_layer[b, :, :rows, :keys]
                assert diff.abs().max() <= ATTENTION_ATOL, (kind, float(diff.abs().max()))
    if first:
        assert (logits[:, 0].argmax(-1) == config.forced_first).all()


def _generate(pair: Pair, texts: list[str], **kw: Any) -> list[list[int]]:
    """transformers' generate() outputs, without the decoder start token and padding, in our numbering; the target
    language is forced as the model cards say (generate(..., forced_bos_token_id=...))."""
    batch = pair.tok(texts, return_tensors="pt", padding=True)
    forced = pair.ours.model.config.forced_first
    if forced is not None:
        kw["forced_bos_token_id"] = pair.imported.tgt_order[forced]
    with torch.no_grad():
        out = pair.hf.generate(**batch, do_sample=False, max_new_tokens=12, **kw)
    back = {o: i for i, o in enumerate(pair.imported.tgt_order) if o is not None}
    rows, eos = [], pair.ours.model.config.eos_id
    for row in out.tolist():
        ids = [back[i] for i in row[1:]]
        rows.append(ids[: ids.index(eos) + 1] if eos in ids else ids)
    return rows


def test_greedy_outputs_are_token_identical_on_20_sentences(pair: Pair) -> None:
    texts = (SENTENCES + EN)[:20]
    expected = _generate(pair, texts, num_beams=1)
    for text, theirs in zip(texts, expected):
        ours = pair.ours.translate(text, max_len=12, capture=False)
        assert list(ours.target_ids) == theirs, text
        assert ours.text == pair.tok.decode(pair.start()[:1] + pair.to_hf(theirs), skip_special_tokens=True)


@pytest.mark.parametrize("length_penalty", [1.0, 0.6])
def test_beam_search_finds_the_same_best_hypothesis(pair: Pair, length_penalty: float) -> None:
    """transformers with early_stopping=True stops, as attnscope does, once num_beams hypotheses are finished."""
    texts = SENTENCES[:8]
    expected = _generate(pair, texts, num_beams=4, length_penalty=length_penalty, early_stopping=True)
    for text, theirs in zip(texts, expected):
        ours = pair.ours.translate(text, beam_size=4, max_len=12, length_penalty=length_penalty, capture=False)
        assert list(ours.target_ids) == theirs, text


def test_the_saved_checkpoint_keeps_the_import_bitwise(pair: Pair, tmp_path: Path) -> None:
    src, tgt, _ = _batch(pair)
    with torch.no_grad():
        assert torch.equal(pair.ours.model(src, tgt), pair.imported.model(src, tgt))


def test_importing_marian_does_not_recommend_sacremoses(tmp_path: Path) -> None:
    """transformers' MarianTokenizer warns "Recommended: pip install sacremoses" on every load; attnscope's converted
    tokenizer does no Moses punctuation normalisation, so the advice is not for an attnscope user."""
    import warnings

    hf_fixtures.marian(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import_hf(tmp_path, src_lang="en", tgt_lang="de")
    assert not [w for w in caught if "sacremoses" in str(w.message)]

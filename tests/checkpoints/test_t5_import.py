"""Hugging Face T5 v1.0, v1.1 / Flan-T5, mT5 and ByT5 models, imported, compute what transformers computes.

Each is a tiny model of the real transformers class with trained weights shipped in tests/fixtures/t5 (so that its
outputs vary and end with </s> on every CPU: t5_fixtures.py), saved with save_pretrained, imported, written as an
attnscope checkpoint and loaded back; then, against transformers itself (T5ForConditionalGeneration.from_pretrained
of the folder, eager attention, float32): the tokenizer's ids and decoded text (sentinels and the output rows without
a token included), teacher-forced log-probs (<= 1e-4) and every attention weight (<= 1e-5), greedy outputs on 20
sentences (64 bytes for ByT5), and beam 4 under the model's generation_config.
"""
from __future__ import annotations

import subprocess
import sys
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
from tests.checkpoints.hf_fixtures import DE, EN, SENTENCES, transformers
from tests.checkpoints.t5_fixtures import LANGS, MAX_NEW_TOKENS, VARIANTS
from tests.support import CEILING, ROOT

LOG_PROBS_ATOL, ATTENTION_ATOL = 1e-4, 1e-5
KINDS = (("encoder", "encoder_attentions"), ("decoder", "decoder_attentions"), ("cross", "cross_attentions"))
TEXTS = (SENTENCES + EN)[:20]
SENTINELS = ["A dog <extra_id_0> the park.", "<extra_id_1> Zwei Hunde <extra_id_0>", "x<extra_id_2>y"]


@dataclass
class Pair:
    """One variant: transformers' model and tokenizer, the imported translator (loaded back from its checkpoint)."""

    name: str
    hf: Any
    tok: Any
    ours: Translator
    imported: Imported
    path: Path

    @property
    def prefix(self) -> str:
        return self.ours.bundle.task_prefix

    def generate(self, texts: list[str], **kw: Any) -> list[list[int]]:
        """generate()'s outputs without the decoder start token, cut after </s> (a fresh cache: the one generate()
        sizes by the config has num_layers, not num_decoder_layers, decoder layers)."""
        batch = self.tok([self.prefix + t for t in texts], return_tensors="pt", padding=True)
        cache = transformers.EncoderDecoderCache(transformers.DynamicCache(), transformers.DynamicCache())
        with torch.no_grad():
            out = self.hf.generate(**batch, do_sample=False, past_key_values=cache, **kw)
        eos = self.tok.eos_token_id
        return [row[1:][: row[1:].index(eos) + 1] if eos in row[1:] else row[1:] for row in out.tolist()]


@pytest.fixture(scope="module", params=list(VARIANTS))
def pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Pair:
    name = request.param
    folder = VARIANTS[name](tmp_path_factory.mktemp(name))
    src, tgt = LANGS[name]
    imported = import_hf(folder, src_lang=src, tgt_lang=tgt)
    path = attnscope.Translator(imported.model, imported.bundle).save(folder.parent / f"{name}.safetensors")
    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(str(folder), attn_implementation="eager").eval()
    return Pair(name, hf, tok, attnscope.load(path), imported, path)


def test_the_config_is_what_transformers_loaded(pair: Pair) -> None:
    """Tying and the output rescale as transformers 5 decides them from the folder, the ids as T5's (no <s>: the
    decoder starts on <pad>), and every id the original's."""
    c, hf = pair.ours.model.config, pair.hf
    assert c.scale_output == bool(getattr(hf.config, "scale_decoder_outputs", False))
    assert c.scale_output == (pair.name == "v1.0")
    assert c.tie_embeddings == (hf.lm_head.weight.data_ptr() == hf.shared.weight.data_ptr()) == (pair.name == "v1.0")
    assert (c.pad_id, c.bos_id, c.eos_id, c.unk_id, c.decoder_start) == (0, 0, 1, 2, None)
    assert (c.d_head is None) == (hf.config.d_kv * hf.config.num_heads == hf.config.d_model)
    assert pair.imported.tgt_order == tuple(range(hf.config.vocab_size)) and pair.ours.model.config.suppressed == ()
    assert torch.equal(pair.ours.model.generator.bias, torch.zeros(hf.config.vocab_size))


def test_tokenizer_gives_the_originals_ids(pair: Pair) -> None:
    for text in [*SENTENCES, *SENTINELS]:
        source, _ = pair.ours.source(text)
        assert source == pair.tok(pair.prefix + text)["input_ids"], text
    for text in DE:
        assert pair.ours.bundle.tgt_codec.encode(text) == pair.tok(text_target=text, add_special_tokens=False)["input_ids"]


def test_decoded_text_is_the_originals(pair: Pair) -> None:
    """Any ids (sentinels and the output rows without a token included) decode as decode(skip_special_tokens=True)."""
    size, generator = pair.hf.config.vocab_size, torch.Generator().manual_seed(0)
    spare = list(range(len(pair.tok), size))  # none in ByT5
    assert (pair.name == "byt5" or spare) and all(pair.tok.convert_ids_to_tokens(i) is None for i in spare)
    for length in (1, 3, 8, 15):
        for _ in range(12):
            ids = [i for i in torch.randint(2, size, (length,), generator=generator).tolist()] + spare[:1] + [1]
            assert pair.ours.bundle.tgt_codec.decode(ids) == pair.tok.decode([0, *ids], skip_special_tokens=True), ids


def test_teacher_forced_log_probs_and_every_attention_weight(pair: Pair) -> None:
    sources = [pair.ours.source(text)[0] for text in EN[:4]]
    targets = [[0, *pair.ours.bundle.tgt_codec.encode(text)] for text in DE[:4]]  # <pad> starts the decoder
    src, tgt = _padded(sources), _padded(targets)
    with torch.no_grad():
        out = pair.hf(input_ids=src, attention_mask=(src != 0).long(), decoder_input_ids=tgt, output_attentions=True)
        with record_attention(pair.ours.model) as rec:
            logits = pair.ours.model(src, tgt)
    by_kind = {kind: [rec.module(n).weights for n in names] for kind, names in pair.ours.model.attention_by_kind().items()}
    for b in range(src.shape[0]):
        t, s = len(targets[b]), len(sources[b])
        diff = logits[b, :t].log_softmax(-1) - out.logits[b, :t].log_softmax(-1)
        assert diff.abs().max() <= LOG_PROBS_ATOL
        for kind, field in KINDS:
            layers = getattr(out, field)
            assert len(by_kind[kind]) == len(layers)
            rows, keys = (s, s) if kind == "encoder" else (t, t) if kind == "decoder" else (t, s)
            for ours, theirs in zip(by_kind[kind], layers):
                assert (ours[b, :, :rows, :keys] - theirs[b, :, :rows, :keys]).abs().max() <= ATTENTION_ATOL, kind


def _padded(rows: list[list[int]]) -> torch.Tensor:
    return torch.tensor([r + [0] * (max(map(len, rows)) - len(r)) for r in rows])


def test_greedy_outputs_are_token_identical_on_20_sentences(pair: Pair) -> None:
    length = MAX_NEW_TOKENS[pair.name]
    expected = pair.generate(TEXTS, num_beams=1, max_new_tokens=length)
    assert len({tuple(e) for e in expected}) >= 10 and sum(e[-1:] == [1] for e in expected) >= 3  # varied, some end
    for text, theirs in zip(TEXTS, expected):
        ours = pair.ours.translate(text, max_len=length, capture=False)
        assert list(ours.target_ids) == theirs, text
        assert ours.text == pair.tok.decode([0, *theirs], skip_special_tokens=True)


def test_beam_4_under_the_models_generation_config(pair: Pair) -> None:
    """generate(num_beams=4) with the folder's generation_config (max_length 20, no early stopping) against
    attnscope's beam search under the rules recorded at import ("model")."""
    expected = pair.generate(TEXTS, num_beams=4)
    same = sum(list(pair.ours.translate(text, beam_size=4, capture=False, rules="model").target_ids) == theirs
               for text, theirs in zip(TEXTS, expected))
    assert same >= 18, f"{same}/20"


def test_the_saved_checkpoint_keeps_the_import_and_its_prefix(pair: Pair) -> None:
    src = torch.tensor([pair.ours.source(EN[0])[0]])
    tgt = torch.tensor([[0, *pair.ours.bundle.tgt_codec.encode(DE[0])]])
    with torch.no_grad():
        assert torch.equal(pair.ours.model(src, tgt), pair.imported.model(src, tgt))
    assert pair.ours.bundle.task_prefix == pair.imported.bundle.task_prefix
    assert pair.prefix == ("translate English to German: " if pair.name == "v1.0" else "")
    assert any("Task prefix" in line for line in pair.ours.bundle.summary["import"]) == bool(pair.prefix)


def test_the_checkpoint_runs_without_transformers(pair: Pair) -> None:
    """The loaded checkpoint tokenizes, translates and decodes with transformers and sentencepiece unimportable."""
    expected = pair.ours.translate(EN[1], max_len=20, capture=False)
    code = ("import sys; sys.modules['transformers'] = None; sys.modules['sentencepiece'] = None\n"
            "import attnscope\n"
            f"t = attnscope.load({str(pair.path)!r})\n"
            f"r = t.translate({EN[1]!r}, max_len=20, capture=False)\n"
            "print(list(r.source_ids)); print(list(r.target_ids)); print(r.text)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=CEILING,
                         env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.splitlines() == [str(list(expected.source_ids)), str(list(expected.target_ids)), expected.text]

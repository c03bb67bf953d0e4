"""OpenNMT-py v3 transformer checkpoints import exactly: proved against OpenNMT-py's forward written out from its code.

OpenNMT-py is in no requirements file (it pins torch 2.2), so the checkpoints are built here in its exact layout
({"model", "generator", "vocab", "opt", "optim"} with opt an argparse.Namespace, saved with torch.save)
and reference_opennmt.py computes what its NMTModel computes. Checked: logits, every attention weight,
greedy outputs, sources fed without </s>, and the refusals of what attnscope does not compute.
test_framework_fixtures.py checks a checkpoint, outputs and attention that OpenNMT-py 3.5.1 itself wrote.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import attnscope
from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.importers import import_any
from attnscope.checkpoints.importers.parts import Imported
from attnscope.engine.recording.capture import record_attention
from tests.checkpoints import reference_opennmt as ref

SRC = ref.SPECIALS + "a man rides the red bike . two dogs play in snow ! children sing song".split()
TGT = ref.SPECIALS + "ein mann fährt das rote fahrrad . zwei hunde spielen im schnee ! kinder singen lied".split()
SENTENCES = ["a man rides the red bike .", "two dogs play in the snow !", "children sing a song .", "a dog plays",
             "the man sings in the snow .", "red red red bike", "snow", "a zebra rides ."]
VARIANTS = {"interleaved sinusoids, no q/k/v biases": dict(),
            "concat sinusoids, q/k/v biases, gelu, tied generator": dict(
                position_encoding_type="SinusoidalConcat", add_qkvbias=True, pos_ffn_activation_fn="gelu",
                share_decoder_embeddings=True),
            "OpenNMT-py 3.5's default attention (scaled-dot-flash: plain dot products)": dict(self_attn_type="scaled-dot-flash")}
Case = tuple[Imported, dict]


@pytest.fixture(scope="module", params=list(VARIANTS))
def imported(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Case:
    ck = ref.checkpoint(ref.opt(**VARIANTS[request.param]), SRC, TGT)
    path = tmp_path_factory.mktemp("onmt") / "model_step_100.pt"
    torch.save(ck, path)
    return import_any(path, src_lang="en", tgt_lang="de"), ck


def test_sources_are_their_tokens_alone(imported: Case) -> None:
    imp, _ = imported
    tr = attnscope.Translator(imp.model, imp.bundle)
    ids, _ = tr.source("a man rides the zebra .")
    assert [imp.src_order[i] for i in ids] == [SRC.index(w) if w in SRC else 0 for w in "a man rides the zebra .".split()]
    c = imp.model.config
    assert (c.unk_id, c.pad_id, c.bos_id, c.eos_id) == (0, 1, 2, 3)  # OpenNMT-py's own ids, kept
    assert imp.bundle.tgt_codec.decode([imp.tgt_order.index(TGT.index("zwei")), c.unk_id, c.eos_id]) == "zwei <unk>"


def test_logits_and_every_attention_weight_are_opennmts(imported: Case) -> None:
    imp, ck = imported
    codec = imp.bundle.src_codec
    sources = [codec.encode(s) for s in SENTENCES[:4]]
    targets = [imp.bundle.tgt_codec.encode(t) for t in ("ein mann fährt das rote fahrrad .", "zwei hunde", "kinder", "ein")]
    width_s, width_t = max(map(len, sources)), max(map(len, targets)) + 1
    c = imp.model.config
    src = torch.tensor([s + [c.pad_id] * (width_s - len(s)) for s in sources])
    tgt = torch.tensor([[c.bos_id, *t] + [c.pad_id] * (width_t - 1 - len(t)) for t in targets])
    with torch.no_grad():
        expected, weights = ref.forward(ck, torch.tensor([[imp.src_order[i] for i in row] for row in src.tolist()]),
                                        torch.tensor([[imp.tgt_order[i] for i in row] for row in tgt.tolist()]))
        with record_attention(imp.model) as rec:
            logits = imp.model(src, tgt)
    by_kind = {kind: [rec.module(n).weights for n in names] for kind, names in imp.model.attention_by_kind().items()}
    for b, (s, t) in enumerate(zip(sources, targets)):
        rows = len(t) + 1
        assert (logits[b, :rows] - expected[b, :rows][:, list(imp.tgt_order)]).abs().max() <= 1e-4
        for kind in ("encoder", "decoder", "cross"):
            for ours, theirs in zip(by_kind[kind], weights[kind]):
                q, k = (len(s), len(s)) if kind == "encoder" else (rows, rows if kind == "decoder" else len(s))
                assert (ours[b, :, :q, :k] - theirs[b, :, :q, :k]).abs().max() <= 1e-5, kind


def test_greedy_outputs_are_the_reference_decoders(imported: Case) -> None:
    imp, ck = imported
    tr = attnscope.Translator(imp.model, imp.bundle)
    for text in SENTENCES:
        ours = tr.translate(text, max_len=10, capture=False)
        src = torch.tensor([[imp.src_order[i] for i in ours.source_ids]])
        prev, expected = [TGT.index("<s>")], []
        with torch.no_grad():
            for _ in range(10):
                token = int(ref.forward(ck, src, torch.tensor([prev]))[0][0, -1].argmax())
                expected.append(token)
                if token == TGT.index("</s>"):
                    break
                prev.append(token)
        assert [imp.tgt_order[i] for i in ours.target_ids] == expected, text


@pytest.mark.parametrize("change, message", [
    (dict(max_relative_positions=20), "relative positions"),
    (dict(pos_ffn_activation_fn="silu"), "gated feed-forward"),
    (dict(layer_norm="rms"), "RMSNorm"),
    (dict(position_encoding=False), "no sinusoidal positions"),
    (dict(self_attn_type="average"), "average attention"),
])
def test_what_attnscope_cannot_compute_is_refused_in_one_sentence(tmp_path: Path, change: dict, message: str) -> None:
    torch.save(ref.checkpoint(ref.opt(**change), SRC, TGT), tmp_path / "m.pt")
    with pytest.raises(CheckpointError, match=message):
        import_any(tmp_path / "m.pt")

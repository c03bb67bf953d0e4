"""fairseq transformer checkpoints import exactly: proved against fairseq's forward written out from its code.

fairseq is in no requirements file (it needs a shim on Python 3.11), so the checkpoints are built here with its exact
state_dict keys and settings (an argparse.Namespace in `args`, or a `cfg` dict whose `model` is one)
and saved with torch.save as fairseq saves them; reference_fairseq.py computes what fairseq's
TransformerModel computes. The import is checked on logits, every attention weight and greedy outputs.
test_framework_fixtures.py checks a checkpoint, outputs and attention that fairseq 0.12.2 itself wrote.
"""
from __future__ import annotations

import argparse
import sys
import types
from pathlib import Path

import pytest
import torch

import attnscope
from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.importers import import_any
from attnscope.checkpoints.importers.parts import Imported
from attnscope.engine.recording.capture import record_attention
from tests.checkpoints import reference_fairseq as ref

SRC_WORDS = "a man rides the red bike . two dogs play in snow ! children sing song".split()
TGT_WORDS = "ein mann fährt das rote fahrrad . zwei hunde spielen im schnee ! kinder singen lied".split()
SENTENCES = ["a man rides the red bike .", "two dogs play in the snow !", "children sing a song .", "a dog plays",
             "the man sings in the snow .", "red red red bike", "snow", "a zebra rides ."]
Case = tuple[Imported, dict, argparse.Namespace]  # the import, fairseq's state_dict and its args
VARIANTS = {
    "post-LN sinusoids, tied output, args": dict(),
    "pre-LN learned positions, embedding LayerNorm, gelu, own output layer, cfg": dict(
        encoder_normalize_before=True, decoder_normalize_before=True, encoder_learned_pos=True, decoder_learned_pos=True,
        layernorm_embedding=True, activation_fn="gelu", share_decoder_input_output_embed=False),
}


def write_checkpoint(folder: Path, a: argparse.Namespace, as_cfg: bool = False, extra_rows: int = 0) -> Path:
    """checkpoint_best.pt with dict.en.txt and dict.de.txt beside it, as fairseq-train leaves them."""
    for lang, words in (("en", SRC_WORDS), ("de", TGT_WORDS)):
        (folder / f"dict.{lang}.txt").write_text("".join(f"{w} {100 - i}\n" for i, w in enumerate(words)))
    rows = 4 + len(SRC_WORDS) + extra_rows, 4 + len(TGT_WORDS) + extra_rows  # + madeupwords (pad_to_multiple_)
    state = ref.state(a, *rows)
    meta = {"optimizer_history": [{"criterion_name": "LabelSmoothedCrossEntropyCriterion", "num_updates": 10}],
            "extra_state": {"epoch": 3, "val_loss": 4.2}, "last_optimizer_state": {"state": {}, "param_groups": []}}
    saved = {"args": None, "cfg": {"model": a, "task": {"source_lang": "en", "target_lang": "de"}}} if as_cfg else {"args": a}
    path = folder / "checkpoint_best.pt"
    torch.save({**saved, "model": state, **meta}, path)
    return path


@pytest.fixture(scope="module", params=list(VARIANTS))
def imported(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Case:
    a = ref.args(**VARIANTS[request.param])
    cfg_form = "cfg" in request.param
    path = write_checkpoint(tmp_path_factory.mktemp("fairseq"), a, as_cfg=cfg_form, extra_rows=4 if cfg_form else 0)
    return import_any(path), torch.load(path, weights_only=False)["model"], a


def _theirs(order: tuple, ids: list[int]) -> list[int]:
    return [order[i] for i in ids]


def test_tokens_are_the_dictionarys(imported: Case) -> None:
    imp, _, _ = imported
    codec = imp.bundle.src_codec
    ids = imp.model.config.frame_source(codec.encode("a man rides the zebra ."))
    assert _theirs(imp.src_order, ids) == [4, 5, 6, 7, 3, 10, 2]  # fairseq: symbols from 4, <unk> 3, </s> 2
    assert imp.bundle.tgt_codec.decode([imp.tgt_order.index(4 + TGT_WORDS.index(w)) for w in ("zwei", "hunde")]) == "zwei hunde"
    c = imp.model.config
    assert (c.bos_id, c.pad_id, c.eos_id, c.unk_id) == (0, 1, 2, 3)  # fairseq's Dictionary's own ids, kept
    assert imp.bundle.tgt_codec.decode([c.unk_id, c.eos_id]) == "<unk>"  # fairseq's Dictionary.string() shows it


def test_logits_and_every_attention_weight_are_fairseqs(imported: Case) -> None:
    imp, state, a = imported
    codec = imp.bundle.src_codec
    sources = [imp.model.config.frame_source(codec.encode(s)) for s in SENTENCES[:4]]
    targets = [imp.bundle.tgt_codec.encode(t) for t in ("ein mann fährt das rote fahrrad .", "zwei hunde", "kinder singen",
                                                          "ein hund")]
    width_s, width_t = max(map(len, sources)), max(map(len, targets)) + 1
    c = imp.model.config
    src = torch.tensor([s + [c.pad_id] * (width_s - len(s)) for s in sources])
    tgt = torch.tensor([[c.bos_id, *t] + [c.pad_id] * (width_t - 1 - len(t)) for t in targets])
    src_fs = torch.tensor([_theirs(imp.src_order, row) for row in src.tolist()])
    prev_fs = torch.tensor([[2, *_theirs(imp.tgt_order, row[1:])] for row in tgt.tolist()])  # fairseq starts on </s>
    with torch.no_grad():
        expected, weights = ref.forward(state, a, src_fs, prev_fs)
        with record_attention(imp.model) as rec:
            logits = imp.model(src, tgt)
    by_kind = {kind: [rec.module(n).weights for n in names] for kind, names in imp.model.attention_by_kind().items()}
    real = [i for i in range(len(imp.tgt_order)) if i != c.pad_id]  # fairseq's generator never outputs <pad>
    assert torch.isinf(logits[..., c.pad_id]).all()
    for b, (s, t) in enumerate(zip(sources, targets)):
        rows = len(t) + 1
        assert (logits[b, :rows, real] - expected[b, :rows][:, [imp.tgt_order[i] for i in real]]).abs().max() <= 1e-4
        for kind in ("encoder", "decoder", "cross"):
            for ours, theirs in zip(by_kind[kind], weights[kind]):
                q = len(s) if kind == "encoder" else rows
                k = rows if kind == "decoder" else len(s)
                assert (ours[b, :, :q, :k] - theirs[b, :, :q, :k]).abs().max() <= 1e-5, kind


def _reference_greedy(state: dict, a: argparse.Namespace, src: list[int], steps: int) -> list[int]:
    prev = [2]
    out: list[int] = []
    with torch.no_grad():
        for _ in range(steps):
            logits, _ = ref.forward(state, a, torch.tensor([src]), torch.tensor([prev]))
            logits[..., ref.PAD] = float("-inf")  # SequenceGenerator: lprobs[:, self.pad] = -math.inf
            token = int(logits[0, -1].argmax())
            out.append(token)
            if token == 2:
                break
            prev.append(token)
    return out


def test_greedy_outputs_are_the_reference_decoders(imported: Case) -> None:
    imp, state, a = imported
    tr = attnscope.Translator(imp.model, imp.bundle, rules="attnscope")  # the reference decodes without fairseq's rules
    for text in SENTENCES:
        ours = tr.translate(text, max_len=10, capture=False)
        src = _theirs(imp.src_order, list(ours.source_ids))
        assert _theirs(imp.tgt_order, list(ours.target_ids)) == _reference_greedy(state, a, src, 10), text


def test_the_cli_finds_the_dictionaries_beside_the_checkpoint(tmp_path: Path) -> None:
    from attnscope.__main__ import main
    path = write_checkpoint(tmp_path, ref.args())
    assert main(["import", str(path), "--out", str(tmp_path / "fs.safetensors")]) == 0
    tr = attnscope.load(tmp_path / "fs.safetensors")
    assert (tr.bundle.src_lang, tr.bundle.tgt_lang) == ("en", "de")
    assert tr.model.config.decoder_start == tr.model.config.eos_id == 2


class Meter:
    """Stands in for a fairseq object pickled into a checkpoint's training state."""


def fake_fairseq(monkeypatch: pytest.MonkeyPatch) -> None:
    """Modules named as fairseq's, so that torch.save can pickle a Meter as fairseq would."""
    for name in ("fairseq", "fairseq.logging", "fairseq.logging.meters"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    sys.modules["fairseq.logging.meters"].Meter = Meter
    monkeypatch.setattr(Meter, "__module__", "fairseq.logging.meters")


@pytest.mark.parametrize("change, message", [
    (dict(adaptive_softmax_cutoff="200,400"), "uses adaptive_softmax_cutoff"),
    (dict(encoder_normalize_before=True), "normalize_before"),
    (dict(activation_fn="gelu_accurate"), "activation_fn 'gelu_accurate'"),
    (dict(arch="lstm"), "not a transformer"),
])
def test_what_attnscope_cannot_compute_is_refused_in_one_sentence(tmp_path: Path, change: dict, message: str) -> None:
    path = write_checkpoint(tmp_path, ref.args(**change))
    with pytest.raises(CheckpointError, match=message):
        import_any(path)


def test_missing_dictionaries_and_foreign_objects_get_clear_messages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_checkpoint(tmp_path, ref.args())
    (tmp_path / "dict.de.txt").unlink()
    with pytest.raises(CheckpointError, match="target dictionary dict.de.txt is not beside checkpoint_best.pt"):
        import_any(path)
    data = torch.load(path, weights_only=False)
    fake_fairseq(monkeypatch)
    data["extra_state"]["metrics"] = Meter()
    torch.save(data, tmp_path / "with_meters.pt")
    with pytest.raises(CheckpointError, match=r"holds fairseq\.logging\.meters\.Meter objects .* never unpickles"):
        import_any(tmp_path / "with_meters.pt")


def unnamed_languages(folder: Path) -> Path:
    """A standard-recipe checkpoint: fairseq-train read the pair from its data folder, so args say None."""
    return write_checkpoint(folder, ref.args(source_lang=None, target_lang=None))


def test_a_checkpoint_without_its_languages_takes_them_from_the_files_beside_it(tmp_path: Path) -> None:
    path = unnamed_languages(tmp_path)
    with pytest.raises(CheckpointError, match="dict.de.txt and dict.en.txt fit both sides .* give --src-lang and --tgt-lang"):
        import_any(path)  # one size of dictionary: nothing says which side is English
    assert (import_any(path, src_lang="en").bundle.src_lang, import_any(path, tgt_lang="de").bundle.src_lang) == ("en", "en")
    (tmp_path / "train.en-de.en.bin").write_bytes(b"")  # fairseq-preprocess's output, copied beside it
    imp = import_any(path)
    assert (imp.bundle.src_lang, imp.bundle.tgt_lang) == ("en", "de")
    assert imp.bundle.src_codec.encode("a man") != imp.bundle.tgt_codec.encode("a man")  # each side its dictionary


def test_dictionary_sizes_order_the_languages(tmp_path: Path) -> None:
    path = unnamed_languages(tmp_path)
    with (tmp_path / "dict.de.txt").open("a") as f:  # eight more German symbols: only one order fits the embeddings
        f.write("".join(f"wort{i} 1\n" for i in range(8)))
    saved = torch.load(path, weights_only=False)
    torch.save(saved | {"model": ref.state(saved["args"], 4 + len(SRC_WORDS), 4 + len(TGT_WORDS) + 8)}, path)
    imp = import_any(path)
    assert (imp.bundle.src_lang, imp.bundle.tgt_lang) == ("en", "de")

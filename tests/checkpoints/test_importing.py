"""Models trained elsewhere (M1: the PyTorch tutorial's, M2: the Annotated Transformer) import exactly."""
from __future__ import annotations

import io
import json
import warnings
from pathlib import Path

import pytest
import torch

import attnscope
from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.importers.state_dict import import_module, import_weights
from attnscope.checkpoints.importers.torch_files import read_state_dict
from attnscope.checkpoints.importers.vocab_files import load_vocabulary
from tests.byom_models import (
    M2_SPECIALS,
    WORDS,
    Seq2SeqTransformer,
    m1_greedy_decode,
    m1_logits,
    m1_source,
    m1_train,
    m1_vocab,
    m2_greedy_decode,
    make_model,
)

SENTENCES = ["Zwei Hunde laufen durch den Schnee .", "ein Mann fährt Rad", "die Katze schläft auf dem Sofa ."]
TGT_WORDS = ["two", "dogs", "run", "through", "the", "snow", ".", "a", "man", "rides", "bike", "cat", "sleeps",
             "on", "sofa", ","]


@pytest.fixture(scope="module")
def m1() -> Seq2SeqTransformer:
    """Trained a few seconds with the tutorial's loop, so its greedy translations end with <eos>."""
    torch.manual_seed(1)
    model = Seq2SeqTransformer(2, 2, 32, 4, len(m1_vocab(WORDS)), len(m1_vocab(TGT_WORDS)), 64, dropout=0.0)
    m1_train(model, m1_vocab(WORDS), m1_vocab(TGT_WORDS), 150)
    return model


def saved(state: dict) -> bytes:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def m1_outputs(model: Seq2SeqTransformer, max_len: int = 12) -> list[list[int]]:
    return [m1_greedy_decode(model, m1_source(m1_vocab(WORDS), s), max_len) for s in SENTENCES]


def assert_same_logits_and_greedy(tr: attnscope.Translator, theirs_logits, theirs_greedy, src_itos, tgt_order) -> None:  # noqa: ANN001
    for sentence, their_ids in zip(SENTENCES, theirs_greedy):
        src_ids, _ = tr.source(sentence)
        assert [src_itos[i] if i > 3 else None for i in tr.bundle.src_codec.encode(sentence)]  # known words only
        result = tr.translate(sentence, max_len=len(their_ids) - 1 if their_ids[-1] != 3 else 11)
        ours = [tgt_order[i] for i in result.target_ids]
        assert ours == their_ids[1:], sentence  # the same greedy translation, token for token
        tgt_in = [tr.model.config.bos_id, *result.target_ids[:-1]]
        with torch.no_grad():
            ours_logits = tr.model(torch.tensor([src_ids]), torch.tensor([tgt_in]))[0]
        expected = theirs_logits(sentence, [tgt_order[i] for i in tgt_in])
        assert torch.allclose(ours_logits, expected[:, list(tgt_order)], atol=1e-5)


def test_m1_state_dict_with_torchtext_vocabularies_imports_exactly(m1: Seq2SeqTransformer, tmp_path: Path) -> None:
    (tmp_path / "src.json").write_text(json.dumps(m1_vocab(WORDS)))
    (tmp_path / "tgt.txt").write_text("\n".join(m1_vocab(TGT_WORDS)) + "\n")
    (tmp_path / "m1.pt").write_bytes(saved(m1.state_dict()))
    with pytest.warns(UserWarning, match="Not checked"):
        tr = attnscope.import_model(tmp_path / "m1.pt", src_vocab=tmp_path / "src.json", tgt_vocab=tmp_path / "tgt.txt",
                                    src_lang="de", tgt_lang="en", source_framing="bos-eos", n_heads=4)
    c = tr.model.config
    assert (c.unk_id, c.pad_id, c.bos_id, c.eos_id) == (0, 1, 2, 3)  # torchtext's order, kept: no row moved
    assert tr.source(SENTENCES[0])[0][0] == c.bos_id and tr.bundle.config.source_framing == "bos-eos"
    tgt_order = load_vocabulary(m1_vocab(TGT_WORDS)).plan.order

    def theirs(sentence: str, tgt_ids: list[int]) -> torch.Tensor:
        with torch.no_grad():
            return m1_logits(m1, m1_source(m1_vocab(WORDS), sentence), torch.tensor(tgt_ids).unsqueeze(1))

    assert_same_logits_and_greedy(tr, theirs, m1_outputs(m1), m1_vocab(WORDS), tgt_order)
    # Every route to the model frames the source the same way: beam search, forced tokens, teacher forcing.
    framed = tr.source(SENTENCES[0])[0]
    assert framed[0] == c.bos_id and framed[-1] == c.eos_id
    assert tr.translate(SENTENCES[0], beam_size=2).source_ids == tuple(framed)
    assert tr.translate(SENTENCES[0], prefix=[5]).source_tokens[0] == "<bos>"
    assert tr.score(SENTENCES[0], "two dogs").source_ids == tuple(framed)
    assert tr.translate_batch([SENTENCES[0]]) == [tr.translate(SENTENCES[0]).text]
    # Saved and loaded again, it is the same model (framing included).
    path = tr.save(tmp_path / "m1.safetensors")
    again = attnscope.load(path)
    assert again.translate(SENTENCES[1]).target_ids == tr.translate(SENTENCES[1]).target_ids
    assert again.translate(SENTENCES[1]).source_tokens[0] == "<bos>"


def test_m1_live_module_reads_its_settings(m1: Seq2SeqTransformer) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is left unchecked except the framing...
        with pytest.raises(UserWarning, match="source_framing"):
            attnscope.import_model(m1, m1_vocab(WORDS), m1_vocab(TGT_WORDS))
    imported = import_module(m1, m1_vocab(WORDS), m1_vocab(TGT_WORDS), source_framing="bos-eos")
    assert imported.report.settings["n_heads"] == 4 and imported.report.source["n_heads"] == "read from the model"
    assert imported.report.source["embed_scale"] == "read from the model"
    assert imported.report.unchecked == ["source_framing"]
    with pytest.raises(CheckpointError, match="you gave n_heads=8 but the model has n_heads=4"):
        import_module(m1, m1_vocab(WORDS), m1_vocab(TGT_WORDS), n_heads=8)


@pytest.mark.parametrize("wrong", [{"n_heads": 2}, {"n_heads": 8}, {"norm_first": True}, {"source_framing": "eos"}])
def test_wrong_settings_are_caught_by_the_users_own_outputs(m1: Seq2SeqTransformer, wrong: dict) -> None:
    examples = list(zip(SENTENCES, m1_outputs(m1)))
    right = {"n_heads": 4, "norm_first": False, "source_framing": "bos-eos"}
    ok = import_weights(m1.state_dict(), m1_vocab(WORDS), m1_vocab(TGT_WORDS), examples=examples, **right)
    assert ok.report.checked_on == 3 and ok.report.unchecked == []
    key = next(iter(wrong))
    with pytest.raises(CheckpointError, match=f"{key}={right[key]} \\(not {wrong[key]}\\)"):
        import_weights(m1.state_dict(), m1_vocab(WORDS), m1_vocab(TGT_WORDS), examples=examples, **(right | wrong))


def test_outputs_given_as_text_are_checked_too(m1: Seq2SeqTransformer) -> None:
    itos = m1_vocab(TGT_WORDS)
    outputs = m1_outputs(m1, 40)
    assert all(ids[-1] == 3 for ids in outputs)  # complete translations
    texts = [" ".join(itos[i] for i in ids[1:-1]) for ids in outputs]
    ok = import_weights(m1.state_dict(), m1_vocab(WORDS), itos, examples=list(zip(SENTENCES, texts)), n_heads=4)
    assert ok.report.checked_on == 3
    with pytest.raises(CheckpointError, match="n_heads=4"):
        import_weights(m1.state_dict(), m1_vocab(WORDS), itos, examples=list(zip(SENTENCES, texts)), n_heads=1)


def test_refusals_say_what_was_found_and_what_to_do(m1: Seq2SeqTransformer, tmp_path: Path) -> None:
    state = m1.state_dict()
    with pytest.raises(CheckpointError, match=r"the output layer has 20 rows but your vocabulary \(no target vocabulary "
                                              r"was given\) has 22 tokens: upload the target vocabulary"):
        import_weights(state, m1_vocab(WORDS))
    with pytest.raises(CheckpointError, match="source embedding has 22 rows but your source vocabulary has 21"):
        import_weights(state, m1_vocab(WORDS)[:-1], m1_vocab(TGT_WORDS))
    with pytest.raises(CheckpointError, match="no pad token .*bracketed tokens are <unk>, <bos>, <eos>"):
        import_weights(state, ["<unk>", "<bos>", "<eos>", *WORDS, "x"], m1_vocab(TGT_WORDS))
    with pytest.raises(CheckpointError, match="looks like a Hugging Face or fairseq encoder-decoder .* attnscope import"):
        import_weights({"model.encoder.layers.0.self_attn.k_proj.weight": torch.zeros(2, 2),
                        "model.decoder.layers.0.encoder_attn.k_proj.weight": torch.zeros(2, 2)}, m1_vocab(WORDS))
    with pytest.raises(CheckpointError, match="encoder only"):
        import_weights(torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2), 1).state_dict(), m1_vocab(WORDS))
    with pytest.raises(CheckpointError, match="not divisible"):
        import_weights(state, m1_vocab(WORDS), m1_vocab(TGT_WORDS), n_heads=5)
    from tests.byom_models import M3Seq2Seq  # hand-written layers: the recording route is the way in
    with pytest.raises(CheckpointError, match="looks like torch.nn.MultiheadAttention layers .* attnscope.record_attention"):
        import_weights(M3Seq2Seq(12, 12).state_dict(), m1_vocab(WORDS))


def test_a_pickled_model_gets_one_clean_sentence(m1: Seq2SeqTransformer, tmp_path: Path) -> None:
    buffer = io.BytesIO()
    torch.save(m1, buffer)
    with pytest.raises(CheckpointError) as err:
        read_state_dict(buffer.getvalue(), "model.pt")
    message = str(err.value)
    assert "\x1b" not in message and "\n" not in message
    assert "torch.save(model.state_dict(), 'model.pt')" in message and "attnscope.import_model(model" in message
    (tmp_path / "model.pt").write_bytes(buffer.getvalue())
    with pytest.raises(CheckpointError, match="attnscope.import_model"):
        attnscope.load(tmp_path / "model.pt")


def test_specials_in_any_spelling_and_a_tokenizer_json() -> None:
    from attnscope.model.tokenization import train_word_level
    tok = json.loads(train_word_level(["a b c"]).to_str())  # <pad> <bos> <eos> <unk> then words
    reordered = {t: (i + 2) % 7 for t, i in tok["model"]["vocab"].items()}  # specials no longer at 0-3
    tok["model"]["vocab"] = reordered
    for added in tok["added_tokens"]:
        added["id"] = reordered[added["content"]]
    vocab = load_vocabulary(json.dumps(tok).encode(), "tokenizer.json")
    assert vocab.codec.encode("b") == [vocab.plan.ours(reordered["b"])]
    sos = load_vocabulary(["<PAD>", "a", "<SOS>", "<EOS>", "<UNK>"])
    assert sos.plan.order == (0, 1, 2, 3, 4) and sos.specials["bos"] == "<SOS>"  # renamed where they are
    assert (sos.plan.pad, sos.plan.bos, sos.plan.eos, sos.plan.unk) == (0, 2, 3, 4) and sos.codec.token(2) == "<bos>"
    moved = load_vocabulary(["<unk>", "<pad>", "b", "<bos>", "<eos>"], at=sos.plan)  # a source side's specials elsewhere
    assert (moved.plan.pad, moved.plan.bos, moved.plan.eos, moved.plan.unk) == (0, 2, 3, 4)
    assert [moved.codec.token(i) for i in range(5)] == ["<pad>", "b", "<bos>", "<eos>", "<unk>"]
    with pytest.raises(CheckpointError, match="several tokens that could be bos"):
        load_vocabulary(["<pad>", "<s>", "<start>", "</s>", "<unk>"])
    explicit = load_vocabulary(["<pad>", "<s>", "<start>", "</s>", "<unk>"], specials={"bos": "<s>"})
    assert explicit.plan.bos == 1 and explicit.codec.tokenizer.id_to_token(2) == "<start>"
    with pytest.raises(CheckpointError, match="uses <bos> as an ordinary token"):
        load_vocabulary(["<pad>", "<s>", "<bos>", "</s>", "<unk>"], specials={"bos": "<s>"})


# --- M2: the Annotated Transformer ------------------------------------------------------

@pytest.fixture(scope="module")
def m2():  # noqa: ANN201
    torch.manual_seed(2)
    return make_model(len(WORDS) + 4, len(TGT_WORDS) + 4).eval()


def m2_ids(sentence: str) -> list[int]:
    itos = M2_SPECIALS + WORDS
    return [0, *[itos.index(w) for w in sentence.split()], 1]


@pytest.mark.parametrize("live", [False, True])
def test_annotated_transformer_imports_exactly(m2, live: bool) -> None:  # noqa: ANN001
    from tests.byom_models import subsequent_mask
    src_itos, tgt_itos = M2_SPECIALS + WORDS, M2_SPECIALS + TGT_WORDS
    if live:
        imported = import_module(m2, src_itos, tgt_itos, source_framing="bos-eos")
        assert imported.report.source["n_heads"] == "read from the model"
        assert imported.report.settings["norm_eps"] == 1e-6
    else:
        imported = import_weights(read_state_dict(saved(m2.state_dict()), "m2.pt"), src_itos, tgt_itos, n_heads=4,
                                  examples=[(s, m2_greedy_decode(m2, torch.tensor([m2_ids(s)]), 12)) for s in SENTENCES])
        assert imported.report.checked_on == 3
    assert imported.bundle.config.layer_norm == "annotated" and imported.bundle.config.norm == "pre"
    tr = attnscope.Translator(imported.model, imported.bundle)
    tgt_order = load_vocabulary(tgt_itos).plan.order
    for sentence in SENTENCES:
        theirs = m2_greedy_decode(m2, torch.tensor([m2_ids(sentence)]), 12)
        result = tr.translate(sentence, max_len=11)
        assert [tgt_order[i] for i in result.target_ids] == theirs[1:]
        src_ids, _ = tr.source(sentence)
        assert [load_vocabulary(src_itos).plan.order[i] for i in src_ids] == m2_ids(sentence)
        tgt_in = [tr.model.config.bos_id, *result.target_ids[:-1]]
        with torch.no_grad():
            ours = tr.model(torch.tensor([src_ids]), torch.tensor([tgt_in]))[0].log_softmax(-1)
            src = torch.tensor([m2_ids(sentence)])
            their_in = torch.tensor([[tgt_order[i] for i in tgt_in]])
            out = m2.decode(m2.encode(src, (src != 2).unsqueeze(-2)), (src != 2).unsqueeze(-2), their_in,
                            subsequent_mask(their_in.shape[1]))
            expected = m2.generator(out)[0]
        assert torch.allclose(ours, expected[:, list(tgt_order)], atol=1e-5)


def test_annotated_layer_norm_is_a_config_option_with_unchanged_default() -> None:
    from attnscope.model.blocks import AnnotatedLayerNorm
    from attnscope.model.config import ModelConfig
    from attnscope.model.transformer import Transformer
    default = Transformer(ModelConfig(10, 10, d_model=8, n_heads=2, d_ff=16))
    assert isinstance(default.encoder[0].attn_block.norm, torch.nn.LayerNorm)
    norm = AnnotatedLayerNorm(8, 1e-6)
    x = torch.randn(3, 8)
    expected = (x - x.mean(-1, keepdim=True)) / (x.std(-1, unbiased=True, keepdim=True) + 1e-6)
    assert torch.allclose(norm(x), expected, atol=1e-6)


def test_the_cli_imports_from_files_and_checks(m1: Seq2SeqTransformer, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from attnscope.__main__ import main
    (tmp_path / "m1.pt").write_bytes(saved(m1.state_dict()))
    (tmp_path / "de.json").write_text(json.dumps(m1_vocab(WORDS)))
    (tmp_path / "en.txt").write_text("\n".join(m1_vocab(TGT_WORDS)))
    (tmp_path / "check.tsv").write_text("".join(f"{s}\t{ids}\n" for s, ids in zip(SENTENCES, m1_outputs(m1))))
    base = ["import", str(tmp_path / "m1.pt"), "--src-vocab", str(tmp_path / "de.json"), "--tgt-vocab",
            str(tmp_path / "en.txt"), "--check", str(tmp_path / "check.tsv"), "--out", str(tmp_path / "m1.safetensors")]
    assert main([*base, "--heads", "8"]) == 2
    assert "n_heads=4 (not 8)" in capsys.readouterr().err
    assert main([*base, "--heads", "4"]) == 0
    assert "on all 3 examples" in capsys.readouterr().out
    tr = attnscope.load(tmp_path / "m1.safetensors")
    assert tr.bundle.config.n_heads == 4 and tr.bundle.config.source_framing == "bos-eos"


def test_old_bundles_keep_their_behaviour() -> None:
    """A config written before the import options existed reads with attnscope's own defaults."""
    from attnscope.model.config import ModelConfig
    old = ModelConfig.from_dict({"src_vocab_size": 10, "tgt_vocab_size": 10, "d_model": 8, "n_heads": 2})
    assert (old.source_framing, old.layer_norm, old.norm_eps, old.activation, old.embed_scale) == \
        ("eos", "torch", 1e-5, "relu", True)
    with pytest.raises(Exception, match="source_framing must be one of eos, bos-eos"):
        ModelConfig(10, 10, d_model=8, n_heads=2, source_framing="bos")


def test_a_live_import_does_not_share_the_users_weights(m1: Seq2SeqTransformer) -> None:
    imported = import_module(m1, m1_vocab(WORDS), m1_vocab(TGT_WORDS), source_framing="bos-eos")
    before = imported.model.encoder[0].self_attn.q_proj.weight.clone()
    weight = m1.transformer.encoder.layers[0].self_attn.in_proj_weight
    kept = weight.detach().clone()
    with torch.no_grad():
        weight.add_(1.0)  # the user keeps training
        try:
            assert torch.equal(imported.model.encoder[0].self_attn.q_proj.weight, before)
        finally:
            weight.copy_(kept)


def test_a_state_dict_without_a_positional_table_says_the_kind_was_assumed(m1: Seq2SeqTransformer) -> None:
    state = {k: v for k, v in m1.state_dict().items() if "pos" not in k}
    report = import_weights(state, m1_vocab(WORDS), m1_vocab(TGT_WORDS), n_heads=4).report
    assert "positional" in report.unchecked and report.source["positional"] == "assumed"
    stored = import_weights(m1.state_dict(), m1_vocab(WORDS), m1_vocab(TGT_WORDS), n_heads=4).report
    assert stored.source["positional"] == "read from the weights" and "positional" not in stored.unchecked

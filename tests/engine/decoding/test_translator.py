"""Translator (text in, translation and attention out) and attnscope.load()."""
from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import attnscope
from attnscope.engine.decoding.beam_result import BeamResult
from attnscope.engine.decoding.translator import MAX_BEAM, MAX_CHARS, InputError, Translator
from attnscope.model.config import BOS_ID, EOS_ID, UNK_ID
from attnscope.records.attention import AttentionRecord
from tests.engine_fixtures import MAX_LEN, SEEDS, atol, tiny_checkpoint, tiny_translator  # noqa: F401 (fixture)

# eos_bias 0: outputs run to max_len; 2: most end early with <eos> (see test_outputs_cover_both_endings)
TRANSLATORS = [(seed, bias) for seed in SEEDS for bias in (0.0, 2.0)]
TEXTS = ["a b c", "d e f g h i", "l", "k k j a"]


def check_translation(tr: Translator, result: attnscope.Translation, text: str) -> None:
    """Tokens, record and steps of one captured translation fit together and fit the model."""
    codec = tr.bundle.src_codec
    assert result.source_ids == tuple(codec.encode(text) + [EOS_ID])
    assert result.source_tokens == tuple(codec.pieces(result.source_ids))
    assert result.source_tokens[-1] == "<eos>"
    assert result.target_tokens[0] == "<bos>"
    assert result.target_tokens == tuple(tr.bundle.tgt_codec.pieces([BOS_ID, *result.target_ids[:-1]]))
    assert result.text == tr.bundle.tgt_codec.decode(result.target_ids)
    assert isinstance(result.text, str)
    s, t = len(result.source_tokens), len(result.target_tokens)
    assert t == len(result.target_ids)
    rec = result.attention
    assert isinstance(rec, AttentionRecord)
    assert rec.source_tokens == result.source_tokens and rec.target_tokens == result.target_tokens
    assert rec.encoder.shape == (2, 4, s, s)
    assert rec.decoder.shape == (3, 4, t, t)
    assert rec.cross.shape == (3, 4, t, s)
    assert len(result.steps) == t
    for i, step in enumerate(result.steps):
        assert step.index == i
        assert step.token_id == result.target_ids[i]
        assert step.token == tr.bundle.tgt_codec.pieces([step.token_id])[0]
        if i + 1 < t:
            assert result.target_tokens[i + 1] == step.token
        view = rec.step(i)
        assert view.index == i and view.prefix == result.target_tokens[: i + 1]
        np.testing.assert_array_equal(view.cross, rec.cross[:, :, i])
        np.testing.assert_array_equal(view.decoder_self, rec.decoder[:, :, i, : i + 1])
        assert np.shares_memory(view.cross, rec.cross) and np.shares_memory(view.decoder_self, rec.decoder)
        assert step.top_k[0][0] == tr.bundle.tgt_codec.pieces([step.top_ids[0]])[0]
        assert 0 < step.prob <= 1
    assert result.output_tokens == tuple(s.token for s in result.steps)
    assert result.log_prob == pytest.approx(sum(math.log(s.prob) for s in result.steps), abs=1e-4)


@pytest.mark.parametrize("seed,bias", TRANSLATORS)
def test_translate_returns_text_tokens_record_and_steps(seed: int, bias: float) -> None:
    tr = tiny_translator(seed, bias)
    for text in TEXTS:
        check_translation(tr, tr.translate(text), text)


def test_outputs_cover_both_endings() -> None:
    endings = {tiny_translator(s, b).translate(t, capture=False).target_ids[-1] == EOS_ID
               for s, b in TRANSLATORS for t in TEXTS}
    assert endings == {True, False}


@pytest.mark.parametrize("seed,bias", TRANSLATORS)
def test_capture_false_gives_no_attention_and_the_same_text(seed: int, bias: float) -> None:
    tr = tiny_translator(seed, bias)
    for text in TEXTS[:2]:
        captured, plain = tr.translate(text), tr.translate(text, capture=False)
        assert plain.attention is None and plain.steps is None
        assert plain.text == captured.text
        assert plain.target_ids == captured.target_ids
        assert plain.target_tokens == captured.target_tokens
        assert plain.log_prob == pytest.approx(captured.log_prob, abs=1e-4)


@pytest.mark.parametrize("text", ["", "   ", "\n\t ", None])
def test_empty_text_is_an_input_error(text) -> None:
    tr = tiny_translator(0)
    with pytest.raises(InputError, match="Type a sentence to translate: the text is empty"):
        tr.translate(text)


def test_text_over_max_chars_is_cut_with_a_note() -> None:
    tr = tiny_translator(1, 2.0)
    long = "a b c" + " " * MAX_CHARS + "d"  # the part past MAX_CHARS ("d") is dropped
    result = tr.translate(long)
    assert f"The text was cut to its first {MAX_CHARS:,} characters." in result.notes
    assert len(result.notes) == 1
    assert result.source_ids == tuple(tr.bundle.src_codec.encode("a b c")) + (EOS_ID,)
    assert result.text == tr.translate("a b c").text
    assert tr.translate("a b c" + " " * (MAX_CHARS - 10)).notes == ()


def test_a_sentence_longer_than_max_len_is_truncated_with_a_note() -> None:
    tr = tiny_translator(2, 2.0)
    words = ("a b c d e f g h i j k l " * 4).split()  # 48 tokens
    result = tr.translate(" ".join(words))
    limit = MAX_LEN - 1
    assert len(result.source_ids) == MAX_LEN
    assert result.source_ids[:-1] == tuple(tr.bundle.src_codec.encode(" ".join(words[:limit])))
    assert result.source_ids[-1] == EOS_ID
    assert any(f"has 48 tokens; this model reads at most {limit}" in n for n in result.notes)
    assert result.attention.encoder.shape[-1] == MAX_LEN
    exactly = tr.translate(" ".join(words[:limit]))
    assert exactly.notes == ()
    assert exactly.text == result.text


def test_unknown_characters_produce_a_note() -> None:
    tr = tiny_translator(0)
    result = tr.translate("a zz b ?")
    assert UNK_ID in result.source_ids
    assert result.source_tokens.count("<unk>") == 2
    assert len(result.notes) == 1
    assert "'zz'" in result.notes[0] and "'?'" in result.notes[0] and "<unk>" in result.notes[0]
    assert tr.translate("a b").notes == ()


@pytest.mark.parametrize("beam", [0, -1, MAX_BEAM + 1])
def test_beam_size_out_of_range_is_an_input_error(beam: int) -> None:
    tr = tiny_translator(0)
    with pytest.raises(InputError, match=f"Beam size must be between 1 and {MAX_BEAM}, got {beam}"):
        tr.translate("a b", beam_size=beam)
    with pytest.raises(InputError, match="Beam size"):
        tr.translate_batch(["a b"], beam_size=beam)


@pytest.mark.parametrize("max_len", [0, MAX_LEN + 1])
def test_max_len_out_of_range_is_an_input_error(max_len: int) -> None:
    tr = tiny_translator(0)
    with pytest.raises(InputError, match=f"between 1 and {MAX_LEN}, got {max_len}"):
        tr.translate("a b", max_len=max_len)
    with pytest.raises(InputError, match=f"between 1 and {MAX_LEN}, got {max_len}"):
        tr.translate_batch(["a b"], max_len=max_len)


@pytest.mark.parametrize("beam", [1, 3])
def test_without_a_maximum_the_source_sets_the_budget(beam: int) -> None:
    tr = tiny_translator(0, eos_bias=-50.0)  # never ends: every output runs to its budget
    for text in ("a", "a b c", "a b c d e f g h i"):
        n_src = len(tr.source(text)[0])
        result = tr.translate(text, beam_size=beam)
        assert result.budget == min(MAX_LEN, 2 * n_src + 10) == len(result.target_ids)
    chosen = tr.translate("a b c", beam_size=beam, max_len=MAX_LEN)
    assert chosen.budget == MAX_LEN == len(chosen.target_ids)  # the user's maximum is kept, past the default
    texts = ["a", "a b c", "a b c d e f g h i", "b c d"]  # sources of three budgets, batched together
    assert tr.translate_batch(texts, beam_size=beam) == [tr.translate(t, beam_size=beam).text for t in texts]


@pytest.mark.parametrize("seed,bias", TRANSLATORS)
def test_beam_translate_gives_the_search_and_a_record_of_the_best_hypothesis(seed: int, bias: float) -> None:
    tr = tiny_translator(seed, bias)
    result = tr.translate("d e f", beam_size=3, max_len=12)
    assert isinstance(result.beam, BeamResult)
    assert len(result.beam.hypotheses) == 3
    best_ids, _, best_log_prob = result.beam.hypotheses[0]
    assert list(result.target_ids) == best_ids
    check_translation(tr, result, "d e f")
    assert result.log_prob == pytest.approx(best_log_prob, abs=1e-4)
    plain = tr.translate("d e f", beam_size=3, max_len=12, capture=False)
    assert plain.attention is None and plain.text == result.text
    assert tr.translate("d e f", max_len=12).beam is None


def test_prefix_forces_the_first_tokens() -> None:
    tr = tiny_translator(1, 2.0)
    prefix = [tr.bundle.tgt_codec.encode(w)[0] for w in ("k", "l", "k")]
    result = tr.translate("a b c", prefix=prefix, max_len=10)
    assert list(result.target_ids[:3]) == prefix
    assert result.output_tokens[:3] == ("k", "l", "k")
    check_translation(tr, result, "a b c")


@pytest.mark.parametrize("seed", SEEDS)
def test_score_gives_the_probabilities_of_the_reference(seed: int) -> None:
    tr = tiny_translator(seed, 2.0)
    result = tr.score("a b c", "c b a d")
    codec = tr.bundle.tgt_codec
    reference = codec.encode("c b a d") + [EOS_ID]
    assert list(result.target_ids) == reference
    assert result.output_tokens == ("c", "b", "a", "d", "<eos>")
    check_translation(tr, result, "a b c")
    # independently: one forward pass over <bos> + reference, probability of each reference token
    src = torch.tensor([result.source_ids])
    with torch.no_grad():
        probs = tr.model(src, torch.tensor([[BOS_ID, *reference[:-1]]]))[0].softmax(-1)
    want = [float(probs[t, token]) for t, token in enumerate(reference)]
    assert [s.prob for s in result.steps] == pytest.approx(want, rel=1e-4, abs=1e-7)
    with pytest.raises(InputError, match="reference translation is empty"):
        tr.score("a b c", "  ")


def test_score_truncates_a_long_reference() -> None:
    tr = tiny_translator(0)
    result = tr.score("a b", " ".join(["a"] * 50))
    assert len(result.target_ids) == MAX_LEN and result.target_ids[-1] == EOS_ID


@pytest.mark.parametrize("seed,bias", TRANSLATORS)
@pytest.mark.parametrize("beam", [1, 3])
def test_translate_batch_equals_translate_one_by_one(seed: int, bias: float, beam: int) -> None:
    tr = tiny_translator(seed, bias)
    texts = ["a b c", "", "d e f g h i j", "  ", "l", "k k j a", "a zz"]
    batch = tr.translate_batch(texts, beam_size=beam, batch_size=3)
    alone = [tr.translate(t, beam_size=beam, capture=False).text if t.strip() else "" for t in texts]
    assert batch == alone
    assert batch[1] == "" and batch[3] == ""
    # the output of one sentence does not depend on the others in its batch
    assert tr.translate_batch(["l"], beam_size=beam) == [alone[4]]


def test_translate_batch_with_nothing_to_translate() -> None:
    tr = tiny_translator(0)
    assert tr.translate_batch([]) == []
    assert tr.translate_batch(["", " "]) == ["", ""]


def test_translate_restores_a_training_model() -> None:
    tr = tiny_translator(0, 2.0)
    tr.model.train()
    result = tr.translate("a b")
    assert tr.model.training
    assert result.notes == ()  # inference() switches to eval itself: nothing to warn about
    tr.model.eval()
    assert tr.translate("a b").text == result.text


def test_a_translator_runs_where_its_model_is(device: torch.device) -> None:
    """Inputs follow the model to its device (greedy, beam, batches, scoring); what comes back is
    CPU numpy, and equal to the CPU's results."""
    on_cpu, here = tiny_translator(1, 2.0), tiny_translator(1, 2.0, device)
    assert here.device.type == device.type
    for text in TEXTS:
        a, b = here.translate(text), on_cpu.translate(text)
        check_translation(here, a, text)
        assert a.target_ids == b.target_ids
        for kind in ("encoder", "decoder", "cross"):
            got = a.attention.array(kind)
            assert isinstance(got, np.ndarray) and got.dtype == np.float32
            np.testing.assert_allclose(got, b.attention.array(kind), atol=atol(device))
    beam = dict(beam_size=3, max_len=12)
    assert here.translate("d e f", **beam).target_ids == on_cpu.translate("d e f", **beam).target_ids
    for k in (1, 3):
        assert here.translate_batch(TEXTS, beam_size=k) == on_cpu.translate_batch(TEXTS, beam_size=k)
    scored, want = here.score("a b c", "c b a d"), on_cpu.score("a b c", "c b a d")
    assert [s.prob for s in scored.steps] == pytest.approx([s.prob for s in want.steps], abs=atol(device))


# ------------------------------------------------------------------------- attnscope.load


def test_load_a_saved_checkpoint(tiny_checkpoint: Path) -> None:  # noqa: F811 (fixture)
    loaded = attnscope.load(tiny_checkpoint)
    original = tiny_translator(0, eos_bias=2.0)  # what the fixture saved
    assert isinstance(loaded, attnscope.Translator)
    assert loaded.name == "tiny"
    assert not loaded.model.training
    assert loaded.bundle.config == original.bundle.config
    for text in TEXTS:
        a, b = loaded.translate(text), original.translate(text)
        assert a.text == b.text and a.target_ids == b.target_ids
        np.testing.assert_allclose(a.attention.cross, b.attention.cross, atol=1e-6)


def test_load_puts_the_model_on_the_device_asked_for(tiny_checkpoint: Path, device: torch.device) -> None:  # noqa: F811
    loaded = attnscope.load(tiny_checkpoint, device.type)
    assert loaded.device.type == device.type
    assert {p.device.type for p in loaded.model.parameters()} == {device.type}
    assert loaded.translate("a b c").text == tiny_translator(0, eos_bias=2.0).translate("a b c").text


def test_load_uses_the_checkpoints_folder_by_default(tiny_checkpoint: Path, tmp_path: Path,  # noqa: F811 (fixture)
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(tiny_checkpoint, tmp_path / "multi30k-en-de.safetensors")
    monkeypatch.setenv("ATTNSCOPE_CHECKPOINTS", str(tmp_path))
    assert attnscope.load().name == "multi30k-en-de"


def test_load_a_garbage_file_raises_checkpoint_error(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"\x00\x01 this is not a checkpoint " * 10)
    with pytest.raises(attnscope.CheckpointError, match="garbage.safetensors is not a safetensors file"):
        attnscope.load(garbage)
    with pytest.raises(attnscope.CheckpointError, match="does not exist"):
        attnscope.load(tmp_path / "missing.safetensors")

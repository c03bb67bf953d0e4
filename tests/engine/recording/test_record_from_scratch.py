"""Models written with the code of the three most-followed from-scratch repositories (tests/scratch_models), recorded
by a plain `with record_attention(model) as rec:` around their own decoding loops: the right kinds (although their
cross-attention is called `encoder_attention` / `enc_attn`), the weights the model itself computes (read by a
forward hook on the repository's own attention module, in one teacher-forced pass over the final sequence), the
loop's outputs bit for bit, and nothing left behind."""
from __future__ import annotations

from typing import Callable

import numpy as np
import pytest
import torch
from torch import nn

from attnscope.engine.recording.capture import record_attention
from attnscope.records.attention import AttentionRecord, RecordError
from tests.engine_fixtures import no_hooks_left
from tests.scratch_models import bentrevett, hyunwoongko, jadore
from tests.scratch_models.special_ids import EOS, PAD, SOS

V = 20
SOURCES = torch.tensor([[SOS, 5, 6, 7, 8, 9, EOS], [SOS, 9, 10, 11, EOS, PAD, PAD]])
EXACT = 1e-6


def own_weights(model: nn.Module, cls: type, index: int, run: Callable[[], object]) -> dict[str, torch.Tensor]:
    """The weights the repository's attention modules of class `cls` return (output[index]) during `run`:
    the few lines of hook a user would otherwise write, independent of attnscope."""
    got: dict[str, torch.Tensor] = {}
    handles = [m.register_forward_hook(lambda _m, _i, out, n=n: got.__setitem__(n, out[index]))
               for n, m in model.named_modules() if isinstance(m, cls)]
    try:
        with torch.no_grad():
            run()
    finally:
        for h in handles:
            h.remove()
    return got


def assert_exact(record: AttentionRecord, kinds: dict[str, str], reference: dict[str, torch.Tensor]) -> float:
    """Every layer of every kind equals the module's own weights (batch item 0 of the reference); the largest |Δ|."""
    worst = 0.0
    for kind in ("encoder", "decoder", "cross"):
        names = [n for n, k in kinds.items() if k == kind]
        assert record.array(kind).shape[0] == len(names) > 0
        for layer, name in enumerate(names):
            delta = float(np.abs(record.array(kind)[layer] - reference[name][0].numpy()).max())
            assert delta <= EXACT, (kind, name, delta)
            worst = max(worst, delta)
    return worst


def nothing_left(model: nn.Module) -> bool:
    return no_hooks_left(model) and not torch.overrides._get_current_function_mode_stack()


def tokens(ids: list[int]) -> list[str]:
    return [f"w{i}" for i in ids]


# ---------------------------------------------------------------- bentrevett/pytorch-seq2seq


@pytest.fixture(scope="module")
def bentrevett_model() -> bentrevett.Seq2Seq:
    model = bentrevett.build(V, V, seed=9, src_pad_idx=PAD, trg_pad_idx=PAD)
    with torch.no_grad():
        model.decoder.fc_out.bias[EOS] += 1.25  # sentence 0 ends with <eos> at step 5, sentence 1 runs to max_len
    return model.eval()


def test_bentrevett_translate_sentence_is_recorded_exactly(bentrevett_model: bentrevett.Seq2Seq) -> None:
    model, src = bentrevett_model, SOURCES[0].tolist()
    cpu = torch.device("cpu")
    plain_ids, plain_attention = bentrevett.translate_sentence(src, SOS, EOS, model, cpu, max_len=8)
    with record_attention(model) as rec:
        ids, attention = bentrevett.translate_sentence(src, SOS, EOS, model, cpu, max_len=8)
    assert nothing_left(model)
    assert ids == plain_ids and torch.equal(attention, plain_attention)  # the notebook's own outputs, bit for bit
    assert ids[-1] == EOS
    assert rec.kinds == {**{f"encoder.layers.{i}.self_attention": "encoder" for i in (0, 1)},
                         **{f"decoder.layers.{i}.{m}": k for i in (0, 1)
                            for m, k in (("self_attention", "decoder"), ("encoder_attention", "cross"))}}
    decoder_in = [SOS, *ids[:-1]]
    record = rec.to_record(tokens(src), tokens(decoder_in))
    reference = own_weights(model, bentrevett.MultiHeadAttentionLayer, 1,
                            lambda: model(torch.tensor([src]), torch.tensor([decoder_in])))
    assert_exact(record, rec.kinds, reference)
    # what translate_sentence itself returns (the last layer's cross-attention of its last pass) is in the record
    assert np.abs(record.cross[-1] - attention[0].numpy()).max() <= EXACT


def test_bentrevett_vectorized_batch_gives_each_sentence_its_rows(bentrevett_model: bentrevett.Seq2Seq) -> None:
    model = bentrevett_model
    cpu = torch.device("cpu")
    with record_attention(model) as rec:
        outputs, _ = bentrevett.translate_sentence_vectorized(SOURCES, SOS, EOS, model, cpu, max_len=8)
    assert [len(o) for o in outputs] == [5, 8] and outputs[0][-1] == EOS  # sentence 0 stopped 3 steps early
    for item, ids in enumerate(outputs):
        src = [t for t in SOURCES[item].tolist() if t != PAD]
        decoder_in = [SOS, *ids[:-1]]
        record = rec.to_record(tokens(src), tokens(decoder_in), item=item)  # padding and later steps cut off
        reference = own_weights(model, bentrevett.MultiHeadAttentionLayer, 1,
                                lambda src=src, decoder_in=decoder_in: model(torch.tensor([src]), torch.tensor([decoder_in])))
        assert_exact(record, rec.kinds, reference)
    with pytest.raises(RecordError, match="encoder attention puts weight on 7 positions but 4 tokens were given"):
        rec.to_record(tokens([SOS, 5, 6, EOS]), tokens([SOS]), item=0)  # sentence 0 has 7 real tokens


# ---------------------------------------------------------------- jadore801120/attention-is-all-you-need-pytorch


class NamingTranslator(jadore.Translator):
    """The repository's Translator, remembering each step's decoder input so that a test can name a hypothesis'
    batch row (the recording itself needs none of this)."""

    def _model_decode(self, trg_seq: torch.Tensor, enc_output: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        self.fed = [*getattr(self, "fed", []), trg_seq.clone()]
        return super()._model_decode(trg_seq, enc_output, src_mask)


@pytest.fixture(scope="module")
def jadore_model() -> jadore.Transformer:
    return jadore.build(V, seed=1, pad_idx=PAD)  # beam 4 moves the best hypothesis between rows


JADORE_KINDS = {**{f"encoder.layer_stack.{i}.slf_attn.attention": "encoder" for i in (0, 1)},
                **{f"decoder.layer_stack.{i}.{m}.attention": k for i in (0, 1)
                   for m, k in (("slf_attn", "decoder"), ("enc_attn", "cross"))}}


def test_jadore_greedy_translator_is_recorded_exactly(jadore_model: jadore.Transformer) -> None:
    model, src = jadore_model, SOURCES[:1]
    translator = jadore.Translator(model, 1, 8, PAD, PAD, SOS, EOS)
    plain = translator.translate_sentence(src)
    with record_attention(model) as rec:
        hypothesis = translator.translate_sentence(src)
    assert nothing_left(model) and hypothesis == plain
    assert rec.kinds == JADORE_KINDS
    decoder_in = hypothesis[:-1]  # starts with <s>
    record = rec.to_record(tokens(src[0].tolist()), tokens(decoder_in))
    reference = own_weights(model, jadore.ScaledDotProductAttention, 1, lambda: model(src, torch.tensor([decoder_in])))
    assert_exact(record, rec.kinds, reference)


def test_jadore_beam_search_gives_the_named_hypothesis(jadore_model: jadore.Transformer) -> None:
    """Beam 4: the encoder runs once, its output is repeated for the beam, every step re-runs all beams' prefixes
    and reorders them. The hypothesis is named by its row in the last step; its rows are traced back."""
    model, src = jadore_model, SOURCES[:1]
    translator = NamingTranslator(model, 4, 8, PAD, PAD, SOS, EOS)
    with record_attention(model) as rec:
        hypothesis = translator.translate_sentence(src)
    decoder_in = hypothesis[:-1]
    last = translator.fed[-1]
    row = next(r for r in range(last.shape[0]) if last[r, :len(decoder_in)].tolist() == decoder_in)
    assert [f.shape[0] for f in translator.fed] == [1, 4, 4, 4, 4, 4, 4]  # beam-sized batches after step 1
    assert len({tuple(r) for r in last.tolist()}) > 1  # the beams differ: naming the row matters
    reference = own_weights(model, jadore.ScaledDotProductAttention, 1, lambda: model(src, torch.tensor([decoder_in])))
    record = rec.to_record(tokens(src[0].tolist()), tokens(decoder_in), item=row)
    assert_exact(record, rec.kinds, reference)
    path = [next(r for r in range(f.shape[0]) if f[r].tolist() == decoder_in[:f.shape[1]]) for f in translator.fed]
    same = rec.to_record(tokens(src[0].tolist()), tokens(decoder_in), beam_rows=path)  # or its row at every step
    assert np.array_equal(same.cross, record.cross) and np.array_equal(same.decoder, record.decoder)
    assert path[1:] != [row] * (len(path) - 1)  # the beams were reordered on the way
    with pytest.raises(RecordError, match="beam_rows do not follow one hypothesis"):
        rec.to_record(tokens(src[0].tolist()), tokens(decoder_in), beam_rows=[0] + [row] * (len(path) - 1))
    other = next(r for r in range(4) if last[r].tolist() != last[row].tolist())  # another hypothesis has other rows
    mixed_up = rec.to_record(tokens(src[0].tolist()), tokens(last[other, :len(decoder_in)].tolist()), item=other)
    assert np.abs(mixed_up.cross - record.cross).max() > 1e-3


# ---------------------------------------------------------------- hyunwoongko/transformer


@pytest.fixture(scope="module")
def hyunwoongko_model() -> hyunwoongko.Transformer:
    model = hyunwoongko.build(V, seed=6, pad_idx=PAD, sos_idx=SOS)
    with torch.no_grad():
        # A trained model never emits <pad>; a random one might, and the repository's target mask pads queries
        # (trg != pad on the query axis), which would let such a row see later tokens.
        model.decoder.linear.bias[PAD] = -1e4
        model.decoder.linear.bias[EOS] += 1.25  # sentences end with <eos> at steps 2 and 6
    return model


def test_hyunwoongko_loop_rerunning_everything_is_recorded_exactly(hyunwoongko_model: hyunwoongko.Transformer) -> None:
    """No cache: every step runs the encoder again (identical calls count once) and the decoder on the whole prefix;
    the repository's MultiHeadAttention throws the weights away, which ScaleDotProductAttention computed."""
    model = hyunwoongko_model
    plain = hyunwoongko.greedy(model, SOURCES, SOS, EOS, 8)
    with record_attention(model) as rec:
        outputs = hyunwoongko.greedy(model, SOURCES, SOS, EOS, 8)
    assert nothing_left(model) and outputs == plain
    assert [len(o) for o in outputs] == [2, 6] and all(o[-1] == EOS for o in outputs)
    assert len(rec.calls["encoder.layers.0.attention.attention"]) == 6  # the encoder ran at each of the 6 steps
    assert rec.kinds == {**{f"encoder.layers.{i}.attention.attention": "encoder" for i in (0, 1)},
                         **{f"decoder.layers.{i}.{m}.attention": k for i in (0, 1)
                            for m, k in (("self_attention", "decoder"), ("enc_dec_attention", "cross"))}}
    for item, ids in enumerate(outputs):
        src = [t for t in SOURCES[item].tolist() if t != PAD]
        decoder_in = [SOS, *ids[:-1]]
        record = rec.to_record(tokens(src), tokens(decoder_in), item=item)
        reference = own_weights(model, hyunwoongko.ScaleDotProductAttention, 1,
                                lambda src=src, decoder_in=decoder_in: model(torch.tensor([src]), torch.tensor([decoder_in])))
        assert_exact(record, rec.kinds, reference)


def test_a_reordered_beam_without_its_row_is_refused_not_guessed(jadore_model: jadore.Transformer) -> None:
    """Row 0 of the last step is another hypothesis than the one returned: without item= the record would be of it."""
    model, src = jadore_model, SOURCES[:1]
    translator = NamingTranslator(model, 4, 8, PAD, PAD, SOS, EOS)
    with record_attention(model) as rec:
        hypothesis = translator.translate_sentence(src)
    with pytest.raises(RecordError, match=r"ran on 4 rows whose order changed between steps .* pass to_record\(\.\.\., item="):
        rec.to_record(tokens(src[0].tolist()), tokens(hypothesis[:-1]))

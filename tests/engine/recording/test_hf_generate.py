"""Hugging Face Marian and BART (the real transformers classes, tiny random weights, nothing downloaded), left on
transformers' default attention implementation: generate (greedy and beam 4, a padded batch of 2) becomes one
record per returned sequence with exactly the rows that chose its tokens, checked against one teacher-forced
eager pass over that sequence alone; or a clear refusal, never a wrong record."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from attnscope.engine.recording.capture import record_attention
from attnscope.engine.recording.hf_generate import from_generate, generate_with_attention
from attnscope.records.attention import AttentionRecord, RecordError

transformers = pytest.importorskip("transformers")

SOURCES = torch.tensor([[5, 6, 7, 8, 1], [9, 10, 1, 0, 0]])  # Marian and BART pad on the right; pad 0, </s> 1
MASK = (SOURCES != 0).long()
EXACT = 1e-6


class Tokens:
    """The three things from_generate asks of a tokenizer."""

    pad_token_id, eos_token_id = 0, 1

    def convert_ids_to_tokens(self, ids: list[int]) -> list[str]:
        return [f"▁w{i}" for i in ids]


SIZES = dict(vocab_size=24, d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
             decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=32,
             pad_token_id=0, eos_token_id=1, forced_eos_token_id=None, init_std=0.2)


def marian():  # noqa: ANN201
    torch.manual_seed(1)  # greedy: sentence 1 ends with </s> at step 4; beam 4 moves every hypothesis between rows
    return transformers.MarianMTModel(transformers.MarianConfig(**SIZES, decoder_start_token_id=0)).eval()


def bart():  # noqa: ANN201
    torch.manual_seed(2)  # greedy: sentence 1 ends at once; beam 4 moves sentence 1's hypotheses between rows
    config = transformers.BartConfig(**SIZES, bos_token_id=3, decoder_start_token_id=1, forced_bos_token_id=None)
    return transformers.BartForConditionalGeneration(config).eval()


@pytest.fixture(scope="module", params=[marian, bart], ids=["marian", "bart"])
def model(request: pytest.FixtureRequest):  # noqa: ANN201
    built = request.param()
    assert built.config._attn_implementation == "sdpa"  # transformers' default: computes no weights
    return built


def teacher_forced(model, sequence: torch.Tensor, source: int, n_targets: int) -> dict[str, np.ndarray]:  # noqa: ANN001
    """One eager pass over the source alone (no padding) and the sequence's first n_targets decoder inputs."""
    n_src = int(MASK[source].sum())
    before = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            out = model(input_ids=SOURCES[source:source + 1, :n_src], decoder_input_ids=sequence[None, :n_targets],
                        output_attentions=True)
    finally:
        model.set_attn_implementation(before)
    return {kind: torch.stack(getattr(out, f"{kind}_attentions"))[:, 0].numpy() for kind in ("encoder", "decoder", "cross")}


def assert_exact(record: AttentionRecord, reference: dict[str, np.ndarray]) -> float:
    worst = 0.0
    for kind, want in reference.items():
        assert record.array(kind).shape == want.shape, kind
        worst = max(worst, float(np.abs(record.array(kind) - want).max()))
    assert worst <= EXACT
    return worst


@pytest.mark.parametrize("beams", [1, 4])
def test_every_returned_sequence_gets_exactly_its_rows(model, beams: int) -> None:  # noqa: ANN001
    returned = 2 if beams > 1 else 1
    out = generate_with_attention(model, input_ids=SOURCES, attention_mask=MASK, max_new_tokens=7, num_beams=beams,
                                  num_return_sequences=returned, do_sample=False)
    assert model.config._attn_implementation == "sdpa"  # switched to eager for the call only
    assert out.sequences.shape[0] == 2 * returned
    if beams > 1:  # hypotheses changed rows on the way: reading row h at every step would be wrong
        assert any(len({int(r) % beams for r in row if r >= 0}) > 1 for row in out.beam_indices)
    for item in range(out.sequences.shape[0]):
        record = from_generate(out, SOURCES, Tokens(), attention_mask=MASK, item=item)
        source = item // returned
        n_src = int(MASK[source].sum())
        assert record.source_tokens == tuple(f"▁w{i}" for i in SOURCES[source, :n_src].tolist())
        sequence = out.sequences[item]
        assert record.target_tokens == tuple(f"▁w{i}" for i in sequence[:len(record.target_tokens)].tolist())
        generated = sequence[1:len(record.target_tokens) + 1].tolist()
        assert 1 not in generated[:-1]  # rows stop at the step that chose </s>
        assert_exact(record, teacher_forced(model, sequence, source, len(record.target_tokens)))


def test_greedy_batch_rows_stop_where_each_sentence_ended(model) -> None:  # noqa: ANN001
    out = generate_with_attention(model, input_ids=SOURCES, attention_mask=MASK, max_new_tokens=7, num_beams=1)
    lengths = [len(from_generate(out, SOURCES, Tokens(), attention_mask=MASK, item=i).target_tokens) for i in (0, 1)]
    assert lengths[1] < lengths[0] == 7  # sentence 1 produced </s> early; sentence 0 ran to max_new_tokens


def test_output_of_the_default_attention_is_refused_with_what_to_do(model) -> None:  # noqa: ANN001
    with torch.no_grad():
        out = model.generate(input_ids=SOURCES, attention_mask=MASK, max_new_tokens=3, num_beams=4,
                             output_attentions=True, return_dict_in_generate=True)
    with pytest.raises(RecordError, match=r"holds no attention weights: transformers' default attention \('sdpa'\) "
                                          r"computes none; use attnscope.generate_with_attention"):
        from_generate(out, SOURCES, Tokens(), attention_mask=MASK)
    eager = generate_with_attention(model, input_ids=SOURCES, attention_mask=MASK, max_new_tokens=3, num_beams=4)
    with pytest.raises(RecordError, match="this beam search output has no beam_indices"):
        from_generate(dataclasses.replace(eager, beam_indices=None), SOURCES, Tokens(), attention_mask=MASK)
    with pytest.raises(RecordError, match="generate\\(\\) returned sequences 0..1; asked for item 2"):
        from_generate(eager, SOURCES, Tokens(), attention_mask=MASK, item=2)


def test_a_result_without_attentions_is_refused_with_what_to_do(model) -> None:  # noqa: ANN001
    out = model.generate(input_ids=torch.tensor([[5, 1]]), max_new_tokens=2, return_dict_in_generate=True)
    with pytest.raises(RecordError, match="output_attentions=True"):
        from_generate(out, torch.tensor([[5, 1]]))


def test_record_attention_around_generate_reads_the_fused_kernel_and_asks_a_beam_for_its_rows(model) -> None:  # noqa: ANN001
    """The route for any model works on Hugging Face's too: SDPA calls are recorded as they run (no switch)."""
    with torch.no_grad(), record_attention(model) as rec:
        greedy = model.generate(input_ids=SOURCES[:1], attention_mask=MASK[:1], max_new_tokens=5, num_beams=1)
    assert set(rec.kinds.values()) == {"encoder", "decoder", "cross"}
    assert all(k == "cross" for n, k in rec.kinds.items() if n.endswith("encoder_attn"))
    n_targets = greedy.shape[1] - 1
    record = rec.to_record([f"s{i}" for i in SOURCES[0].tolist()], [f"t{i}" for i in greedy[0, :n_targets].tolist()])
    assert_exact(record, teacher_forced(model, greedy[0], 0, n_targets))
    with torch.no_grad(), record_attention(model) as rec:
        beam = model.generate(input_ids=SOURCES, attention_mask=MASK, max_new_tokens=5, num_beams=4,
                              return_dict_in_generate=True)
    tokens = [f"s{i}" for i in SOURCES[1, :3].tolist()]
    with pytest.raises(RecordError, match="its cache's rows were reordered between steps.*beam_indices"):
        rec.to_record(tokens, ["t"] * 3, item=1)
    rows = [int(r) for r in beam.beam_indices[1] if r >= 0]
    sequence = beam.sequences[1]
    record = rec.to_record(tokens, [f"t{i}" for i in sequence[:len(rows)].tolist()], item=1, beam_rows=rows)
    assert_exact(record, teacher_forced(model, sequence, 1, len(rows)))

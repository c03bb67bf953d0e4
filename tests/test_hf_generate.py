"""A Hugging Face Marian model's generate() becomes an AttentionRecord with exactly the rows it computed."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from attnscope.engine.hf_generate import from_generate
from attnscope.engine.record import RecordError

transformers = pytest.importorskip("transformers")


class Tokens:
    """The three things from_generate asks of a tokenizer."""

    pad_token_id, eos_token_id = 0, 1

    def convert_ids_to_tokens(self, ids: list[int]) -> list[str]:
        return [f"▁w{i}" for i in ids]


@pytest.fixture(scope="module")
def marian():  # noqa: ANN201
    """A tiny randomly initialised MarianMTModel: nothing is downloaded."""
    torch.manual_seed(0)
    config = transformers.MarianConfig(vocab_size=24, d_model=16, encoder_layers=2, decoder_layers=2,
                                       encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
                                       decoder_ffn_dim=32, max_position_embeddings=32, pad_token_id=0, eos_token_id=1,
                                       decoder_start_token_id=0, forced_eos_token_id=None)
    config._attn_implementation = "eager"  # attention weights need the explicit softmax
    return transformers.MarianMTModel(config).eval()


def test_generate_with_attentions_becomes_a_record_of_the_computed_rows(marian) -> None:  # noqa: ANN001
    input_ids = torch.tensor([[5, 6, 7, 8, 1], [9, 10, 1, 0, 0]])
    mask = (input_ids != 0).long()
    with torch.no_grad():
        out = marian.generate(input_ids=input_ids, attention_mask=mask, max_new_tokens=6, num_beams=1, do_sample=False,
                              output_attentions=True, return_dict_in_generate=True)
    for item in (0, 1):
        record = from_generate(out, input_ids, Tokens(), attention_mask=mask, item=item)
        n_src = int(mask[item].sum())
        assert record.source_tokens == tuple(f"▁w{i}" for i in input_ids[item, :n_src].tolist())
        assert record.target_tokens[0] == "▁w0" and record.encoder.shape == (2, 2, n_src, n_src)
        decoder_in = out.sequences[item: item + 1, : len(record.target_tokens)]
        with torch.no_grad():  # one teacher-forced pass over the same tokens: the same rows
            full = marian(input_ids=input_ids[item: item + 1, :n_src], decoder_input_ids=decoder_in, output_attentions=True)
        assert np.allclose(record.cross, torch.stack(full.cross_attentions)[:, 0].numpy(), atol=1e-5)
        assert np.allclose(record.decoder, torch.stack(full.decoder_attentions)[:, 0].numpy(), atol=1e-5)
        assert np.allclose(record.encoder, torch.stack(full.encoder_attentions)[:, 0].numpy(), atol=1e-5)


def test_a_result_without_attentions_is_refused_with_what_to_do(marian) -> None:  # noqa: ANN001
    out = marian.generate(input_ids=torch.tensor([[5, 1]]), max_new_tokens=2, return_dict_in_generate=True)
    with pytest.raises(RecordError, match="output_attentions=True"):
        from_generate(out, torch.tensor([[5, 1]]))

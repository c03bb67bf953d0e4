"""The fp16 report of `import --half`: the same sentence whether a copy or the model itself (after saving) is
rounded, so a big model is not held twice for it."""
from __future__ import annotations

import torch

from attnscope.checkpoints.checkpoint import Bundle
from attnscope.checkpoints.importers.precision import half_report
from attnscope.model.config import ModelConfig
from attnscope.model.tokenization import TextCodec, train_word_level
from attnscope.model.transformer import Transformer


def test_rounding_in_place_reports_what_a_rounded_copy_reports() -> None:
    codec = TextCodec(train_word_level(["a man rides a bike down the street . two dogs play"]))
    config = ModelConfig(src_vocab_size=codec.vocab_size, tgt_vocab_size=codec.vocab_size, d_model=16, n_heads=4,
                         d_ff=32, n_encoder_layers=1, n_decoder_layers=1, max_len=32, share_embeddings=True)
    torch.manual_seed(0)
    model = Transformer(config).eval()
    bundle = Bundle(config, codec, codec, "en", "de")
    weight = model.encoder[0].ffn.up.weight
    kept = weight.detach().clone()
    copied = half_report(model, bundle, steps=6)
    assert torch.equal(weight, kept)  # a copy was rounded
    assert half_report(model, bundle, steps=6, in_place=True) == copied
    assert torch.equal(weight, kept.half().float()) and not torch.equal(weight, kept)

"""Decoding takes the special tokens' ids from the model's config: a model whose rows are renumbered, with its
config naming the new ids, decodes exactly what the original does (greedy, a padded batch, beam search)."""
from __future__ import annotations

import dataclasses

import torch

from attnscope.engine.decoding.beam import beam_search_batch
from attnscope.engine.decoding.decode import greedy, greedy_batch
from attnscope.model.batch import pad
from attnscope.model.transformer import Transformer
from tests.engine_fixtures import random_source, tiny_model


def renumbered(model: Transformer, order: list[int]) -> Transformer:
    """The same model with token id i of the copy being id order[i] of `model` (specials included)."""
    c = model.config
    config = dataclasses.replace(c, **{name: order.index(getattr(c, name)) for name in ("pad_id", "bos_id", "eos_id",
                                                                                          "unk_id")})
    copy = Transformer(config).eval()
    state = dict(model.state_dict())
    for key in ("src_embed.weight", "tgt_embed.weight", "generator.weight", "generator.bias"):
        state[key] = state[key][torch.tensor(order)]
    copy.load_state_dict(state)
    return copy


def test_a_renumbered_model_decodes_what_the_original_decodes() -> None:
    model = tiny_model(3, eos_bias=2.0)
    size = model.config.tgt_vocab_size
    order = torch.randperm(size, generator=torch.Generator().manual_seed(7)).tolist()
    assert order[:4] != [0, 1, 2, 3]
    copy = renumbered(model, order)
    theirs = [order.index(i) for i in range(size)]  # original id -> the copy's
    sources = [random_source(s, n) for s, n in ((1, 6), (2, 2), (3, 4))]
    moved = [[theirs[i] for i in src] for src in sources]
    for src, src_copy in zip(sources, moved):
        assert [order[i] for i in greedy(copy, src_copy, max_len=12, capture=False).ids] == greedy(
            model, src, max_len=12, capture=False).ids
    batch = greedy_batch(copy, pad(moved, copy.config.pad_id), max_len=12)
    assert [[order[i] for i in row] for row in batch] == greedy_batch(model, pad(sources, model.config.pad_id), max_len=12)
    beams = beam_search_batch(copy, pad(moved, copy.config.pad_id), 3, max_len=10)
    assert [[order[i] for i in row] for row in beams] == beam_search_batch(model, pad(sources, model.config.pad_id), 3,
                                                                           max_len=10)

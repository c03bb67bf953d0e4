"""What the app shows is what the model computed: the engine's core invariants on tiny models."""
from __future__ import annotations

import threading

import pytest
import torch

from attnscope.engine.beam import beam_search
from attnscope.engine.capture import record_attention
from attnscope.engine.decode import greedy, greedy_batch, teacher_force
from attnscope.model.config import EOS_ID, ModelConfig
from attnscope.model.transformer import Transformer

SEEDS = (0, 1, 2)


def tiny(seed: int, **kw) -> Transformer:
    torch.manual_seed(seed)
    cfg = dict(src_vocab_size=23, tgt_vocab_size=29, d_model=16, n_heads=4, d_ff=32, n_encoder_layers=2,
               n_decoder_layers=3, dropout=0.0, attention_dropout=0.0, max_len=40)
    cfg.update(kw)
    return Transformer(ModelConfig(**cfg)).eval()


def source(seed: int, n: int = 7) -> list[int]:
    g = torch.Generator().manual_seed(100 + seed)
    return torch.randint(4, 23, (n,), generator=g).tolist() + [EOS_ID]


@pytest.mark.parametrize("seed", SEEDS)
def test_cached_and_uncached_decoding_agree(seed: int) -> None:
    model, src = tiny(seed), source(seed)
    cached = greedy(model, src, max_len=15)
    full = greedy(model, src, max_len=15, use_cache=False)
    assert cached.ids == full.ids
    assert [s.log_prob for s in cached.steps] == pytest.approx([s.log_prob for s in full.steps], abs=1e-5)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("norm,positional", [("post", "sinusoidal"), ("pre", "learned")])
def test_step_rows_equal_one_teacher_forced_pass(seed: int, norm: str, positional: str) -> None:
    model, src = tiny(seed, norm=norm, positional=positional), source(seed)
    decoded = greedy(model, src, max_len=12)
    forced = teacher_force(model, src, decoded.ids)
    assert (decoded.cross - forced.cross).abs().max() <= 1e-5  # row t: what step t attended to
    assert (decoded.encoder - forced.encoder).abs().max() <= 1e-5
    assert (decoded.decoder - forced.decoder).abs().max() <= 1e-5


@pytest.mark.parametrize("seed", SEEDS)
def test_rows_sum_to_one_and_the_future_is_exactly_zero(seed: int) -> None:
    decoded = greedy(tiny(seed), source(seed), max_len=10)
    for weights in (decoded.encoder, decoded.decoder, decoded.cross):
        assert torch.allclose(weights.sum(-1), torch.ones(weights.shape[:-1]), atol=1e-5)
    upper = torch.triu(torch.ones(decoded.decoder.shape[-2:], dtype=torch.bool), diagonal=1)
    assert torch.all(decoded.decoder[..., upper] == 0)


def test_padded_keys_get_exactly_zero_weight() -> None:
    model = tiny(0)
    src = torch.tensor([source(0), source(1, 4) + [0, 0, 0]])
    tgt = torch.tensor([[1, 5, 6, 7], [1, 8, 0, 0]])
    with record_attention(model) as rec:
        model(src, tgt)
    for name, w in rec.weights.items():
        if name.endswith("cross_attn") or name.startswith("encoder"):
            assert torch.all(w[1, :, :, 5:] == 0), name
        else:
            assert torch.all(w[1, :, :, 2:] == 0), name


@pytest.mark.parametrize("seed", SEEDS)
def test_batch_decoding_equals_one_by_one(seed: int) -> None:
    model = tiny(seed)
    sources = [source(seed, 7), source(seed + 5, 3), source(seed + 9, 5)]
    width = max(map(len, sources))
    batch = torch.tensor([s + [0] * (width - len(s)) for s in sources])
    together = greedy_batch(model, batch, max_len=12)
    alone = [greedy(model, s, max_len=12, capture=False).ids for s in sources]
    assert together == [[i for i in ids if i != EOS_ID] for ids in alone]
    beams_together = beam_search(model, batch, 3, max_len=12)
    for s, r in zip(sources, beams_together):
        single = beam_search(model, torch.tensor([s]), 3, max_len=12)[0]
        assert [h[0] for h in r.hypotheses] == [h[0] for h in single.hypotheses]


def test_capturing_never_changes_the_output() -> None:
    model, src = tiny(3), source(3)
    plain = greedy(model, src, max_len=12, capture=False)
    captured = greedy(model, src, max_len=12, capture=True)
    assert plain.ids == captured.ids
    assert [s.log_prob for s in plain.steps] == pytest.approx([s.log_prob for s in captured.steps], abs=1e-5)


def test_hooks_are_removed_even_when_the_forward_raises() -> None:
    model = tiny(0)
    with pytest.raises(ValueError, match="at most 40"):
        with record_attention(model):
            model(torch.ones(1, 50, dtype=torch.long), torch.ones(1, 3, dtype=torch.long))
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())
    assert torch.backends.mha.get_fastpath_enabled()


def test_concurrent_sessions_see_only_their_own_attention() -> None:
    model = tiny(4)
    sources = [source(s) for s in range(6)]
    expected = [greedy(model, s, max_len=10).cross for s in sources]
    results: dict[int, torch.Tensor] = {}

    def work(i: int) -> None:
        for _ in range(3):
            results[i] = greedy(model, sources[i], max_len=10).cross

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(sources))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, cross in results.items():
        assert torch.equal(cross, expected[i])
    assert all(not m._forward_hooks for m in model.modules())

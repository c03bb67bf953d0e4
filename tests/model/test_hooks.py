"""The model's named hook points (model/hooks.py): every row of the table is heard where it says, with the shape it
says; listeners may replace a value, hear only their own thread, and leave nothing behind; nobody listening keeps the
fused attention kernel."""
from __future__ import annotations

import copy
import threading
from contextlib import ExitStack
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from attnscope.model import hooks
from attnscope.model.config import ModelConfig
from attnscope.model.transformer import DecoderCache, Transformer

B, S, T, D, H, DH = 2, 6, 5, 16, 4, 4


def model(**kw: Any) -> Transformer:
    torch.manual_seed(0)
    c = ModelConfig(**{**dict(src_vocab_size=30, tgt_vocab_size=30, d_model=D, n_heads=H, d_ff=32, n_encoder_layers=2,
                              n_decoder_layers=2, max_len=32, dropout=0.0, attention_dropout=0.0), **kw})
    return Transformer(c).eval()


def inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randint(4, 30, (B, S), generator=torch.Generator().manual_seed(1)), torch.randint(
        4, 30, (B, T), generator=torch.Generator().manual_seed(2))


def listen_to_all(m: Transformer, listening: ExitStack) -> dict[tuple[str, str], list[Any]]:
    heard: dict[tuple[str, str], list[Any]] = {}
    for name, site in hooks.sites(m):
        for point in site.points:
            site.listen(listening, point, lambda x, key=(name, point.name): heard.setdefault(key, []).append(x))
    return heard


def shape(x: Any) -> tuple[int, ...] | None:
    return None if x is None else tuple(x.shape)


@pytest.mark.parametrize("kw", [{}, dict(positional="relative", norm="pre", layer_norm="rms", scale_scores=False)])
def test_every_point_is_heard_at_its_sites_with_the_table_s_shape(kw: dict[str, Any]) -> None:
    m, (src, tgt) = model(**kw), inputs()
    with torch.no_grad(), ExitStack() as listening:
        heard = listen_to_all(m, listening)
        m(src, tgt)
    sites = dict(hooks.sites(m))
    assert {site.site for site in sites.values()} == {hooks.ENCODER, hooks.DECODER, hooks.LAYER, hooks.BLOCK,
                                                      hooks.ATTENTION}
    assert set(heard) == {(name, p.name) for name, site in sites.items() for p in site.points}  # each point, each site
    for stack, n in (("encoder", S), ("decoder", T)):
        assert shape(heard[(stack, "embed")][0]) == (B, n, D) and shape(heard[(stack, "pos")][0]) == (n, D)
        assert shape(heard[(stack, "embedded")][0]) == (B, n, D)
    assert shape(heard[("encoder", "memory")][0]) == (B, S, D) and shape(heard[("decoder", "final")][0]) == (B, T, D)
    for point in ("resid_pre", "norm_in", "norm_out", "resid_post"):
        assert shape(heard[("decoder.1.cross_block", point)][0]) == (B, T, D)
    assert shape(heard[("encoder.0", "resid_pre")][0]) == shape(heard[("encoder.0", "resid_post")][0]) == (B, S, D)
    cross = {p: heard[("decoder.0.cross_attn", p)][0] for p in ("q", "k", "v", "mask", "bias", "scores", "pattern",
                                                                 "z", "result")}
    assert shape(cross["q"]) == (B, H, T, DH) and shape(cross["k"]) == shape(cross["v"]) == (B, H, S, DH)
    assert cross["mask"] is None and cross["bias"] is None  # an unpadded source; cross-attention has no position bias
    assert shape(cross["scores"]) == shape(cross["pattern"]) == (B, H, T, S)
    assert shape(cross["z"]) == (B, T, H * DH) and shape(cross["result"]) == (B, T, D)
    bias = heard[("encoder.1.self_attn", "bias")][0]
    assert (bias is not None and shape(bias) == (1, H, S, S)) == (kw.get("positional") == "relative")
    assert shape(heard[("decoder.0.self_attn", "mask")][0]) == (B, 1, T, T)


def test_what_the_points_carry_is_what_the_model_computed() -> None:
    """Read against the model's own pieces: the embedded input, the weights it returns, the output projection."""
    m, src = model(), inputs()[0]
    with torch.no_grad(), ExitStack() as listening:
        heard = listen_to_all(m, listening)
        source = m.encode(src, output_attentions=True)
        attn = m.encoder[0].self_attn
    embedded = heard[("encoder", "embed")][0] * m.embedding_scale + heard[("encoder", "pos")][0]
    assert torch.equal(heard[("encoder", "embedded")][0], embedded)  # no norm on the embeddings, dropout off
    assert torch.equal(heard[("encoder.0.self_attn", "pattern")][0], source.attentions[0])
    z, result = heard[("encoder.0.self_attn", "z")][0], heard[("encoder.0.self_attn", "result")][0]
    assert torch.equal(result, attn.out_proj(z))
    assert torch.equal(heard[("encoder", "memory")][0], source.memory)
    assert torch.equal(heard[("encoder.1", "resid_post")][0], source.memory)  # post-LN: no final norm


def test_a_listener_replaces_the_value_and_leaves_nothing_behind() -> None:
    m, (src, tgt) = model(), inputs()
    attn = m.decoder[1].cross_attn
    with torch.no_grad():
        plain = m(src, tgt)
        with ExitStack() as listening:
            attn.hooks.listen(listening, hooks.Z, lambda z: torch.zeros_like(z))
            results: list[torch.Tensor] = []
            attn.hooks.listen(listening, hooks.RESULT, results.append)
            gated = m(src, tgt)
        again = m(src, tgt)
    assert torch.equal(results[0], attn.out_proj.bias.expand(B, T, D))  # the heads' output zeroed before W_O
    assert not torch.allclose(gated, plain) and torch.equal(again, plain)
    assert all(not site.listeners for _, site in hooks.sites(m))


def test_listeners_hear_only_their_own_thread() -> None:
    m, src = model(), inputs()[0]
    heard: list[torch.Tensor] = []
    with ExitStack() as listening:
        m.encoder.hooks.listen(listening, hooks.EMBED, heard.append)
        worker = threading.Thread(target=lambda: m.encode(src))
        worker.start()
        worker.join()
        assert heard == []
        with torch.no_grad():
            m.encode(src)
        assert len(heard) == 1


def test_a_point_is_listened_to_only_where_the_table_puts_it() -> None:
    m = model()
    with ExitStack() as listening, pytest.raises(ValueError, match="'pattern' is not at a block"):
        m.encoder[0].attn_block.hooks.listen(listening, hooks.PATTERN, print)


class CountFused(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.fused = 0

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.fused += func is F.scaled_dot_product_attention
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("cached", [False, True])
def test_nobody_listening_keeps_the_fused_kernel_and_listening_changes_nothing(cached: bool) -> None:
    """Unheard, every attention call runs the fused kernel; listeners that only read (anything but the weights)
    leave the computation, and so every bit of the output, as it was; listening to the weights makes them."""
    m, (src, tgt) = model(), inputs()

    def run() -> tuple[torch.Tensor, int]:
        with torch.no_grad(), CountFused() as counted:
            if not cached:
                return m(src, tgt), counted.fused
            source, cache = m.encode(src), DecoderCache.empty(2)
            return torch.cat([m.next_logits(tgt[:, t:t + 1], source, cache) for t in range(T)]), counted.fused

    plain, fused = run()
    assert fused == 2 + (T if cached else 1) * 4  # encoder self x 2, then each decoder pass: self and cross x 2
    with ExitStack() as listening:
        for _, site in hooks.sites(m):
            for point in site.points:
                if point not in (hooks.SCORES, hooks.PATTERN):
                    site.listen(listening, point, lambda _x: None)
        heard, still_fused = run()
    assert still_fused == fused and torch.equal(heard, plain)
    with ExitStack() as listening:
        m.encoder[0].self_attn.hooks.listen(listening, hooks.PATTERN, lambda _x: None)
        assert run()[1] == fused - 1


def test_a_copied_model_keeps_the_table_s_points() -> None:
    """A deep copy (the fp16 check rounds one) listens on the same rows of the table."""
    copied, (src, tgt) = copy.deepcopy(model()), inputs()
    heard: list[torch.Tensor] = []
    with torch.no_grad(), ExitStack() as listening:
        copied.decoder[0].cross_attn.hooks.listen(listening, hooks.PATTERN, heard.append)
        copied(src, tgt)
    assert [tuple(w.shape) for w in heard] == [(B, H, T, S)]

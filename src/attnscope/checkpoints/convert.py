"""Import a model trained elsewhere: a `torch.nn.Transformer` state_dict plus its tokenizers.

Models like the seed tutorials' (nn.Transformer between token embeddings scaled by
sqrt(d_model), a positional encoding and a linear generator) map one-to-one onto ours:
in_proj weights split into Q/K/V, linear1/linear2 into the FFN, norm1-3 into the residual
blocks, and nn.Transformer's final encoder/decoder norms into `final_norm`. Loading uses
`torch.load(weights_only=True)`, so nothing in the file is executed.
"""
from __future__ import annotations

import io
import re
from dataclasses import dataclass

import torch
from torch import Tensor

from attnscope.checkpoints.checkpoint import Bundle, CheckpointError, check_shapes, expected_shapes, unique_state
from attnscope.model.config import ConfigError, ModelConfig
from attnscope.model.tokenization import TextCodec
from attnscope.model.transformer import Transformer, sinusoidal_table

LAYER = re.compile(r"^(?P<prefix>.*?)(?P<stack>encoder|decoder)\.layers\.(?P<i>\d+)\.self_attn\.in_proj_weight$")


@dataclass(frozen=True)
class ImportSettings:
    """What the weights cannot tell: filled in by the user on the upload form."""

    n_heads: int
    norm_first: bool = False  # nn.Transformer(norm_first=...)
    src_lang: str = "src"
    tgt_lang: str = "tgt"
    max_len: int = 256  # positions a sinusoidal encoding covers (learned tables give their own)


def read_state_dict(data: bytes, name: str) -> dict[str, Tensor]:
    """Tensors of a .pt/.pth file, loaded without executing code; nested dicts are unwrapped."""
    try:
        obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as err:  # UnpicklingError, RuntimeError, EOFError, zip errors...
        first = str(err).strip().splitlines()[0][:160] if str(err).strip() else type(err).__name__
        raise CheckpointError(f"{name} is not a PyTorch weights file that can be loaded safely ({first})") from None
    for key in ("state_dict", "model_state_dict", "model"):
        if isinstance(obj, dict) and isinstance(obj.get(key), dict):
            obj = obj[key]
    if not isinstance(obj, dict) or not obj or not all(isinstance(v, Tensor) for v in obj.values()):
        raise CheckpointError(f"{name} does not hold a state_dict (a mapping of names to tensors)")
    return {str(k): v for k, v in obj.items()}


def _find_prefix(state: dict[str, Tensor]) -> tuple[str, int, int]:
    layers: dict[str, set[int]] = {"encoder": set(), "decoder": set()}
    prefixes = set()
    for key in state:
        m = LAYER.match(key)
        if m:
            prefixes.add(m["prefix"])
            layers[m["stack"]].add(int(m["i"]))
    if len(prefixes) != 1 or not layers["encoder"] or not layers["decoder"]:
        raise CheckpointError("no nn.Transformer found: expected keys like 'transformer.encoder.layers.0."
                              "self_attn.in_proj_weight' and '...decoder.layers.0...'")
    return prefixes.pop(), len(layers["encoder"]), len(layers["decoder"])


def _outside(state: dict[str, Tensor], prefix: str) -> dict[str, Tensor]:
    return {k: v for k, v in state.items() if not k.startswith(prefix + "encoder.") and not k.startswith(prefix + "decoder.")}


def _pick(candidates: list[str], hints: tuple[str, ...], what: str) -> str:
    if len(candidates) == 1:
        return candidates[0]
    named = [k for k in candidates if any(h in k.lower() for h in hints)]
    if len(named) == 1:
        return named[0]
    raise CheckpointError(f"cannot tell which tensor is the {what} among {', '.join(candidates) or 'none'}")


def _embeddings(rest: dict[str, Tensor], d: int, v_src: int, v_tgt: int) -> tuple[str, str, str, bool]:
    """Names of the source embedding, target embedding and generator weight; whether src = tgt."""
    gens = [k for k, v in rest.items() if k.endswith("weight") and v.shape == (v_tgt, d)
            and k[: -len("weight")] + "bias" in rest]
    generator = _pick(gens, ("generator", "out", "fc", "proj"), f"output layer [{v_tgt}, {d}] with a bias")
    tables = [k for k, v in rest.items() if v.dim() == 2 and v.shape[1] == d and k != generator
              and k[: -len("weight")] + "bias" not in rest and "pos" not in k.lower()]
    src = _pick([k for k in tables if rest[k].shape[0] == v_src], ("src", "source", "enc"), f"source embedding [{v_src}, {d}]")
    tgt = _pick([k for k in tables if rest[k].shape[0] == v_tgt], ("tgt", "trg", "target", "dec"),
                f"target embedding [{v_tgt}, {d}]")
    return src, tgt, generator, src == tgt


def _positions(rest: dict[str, Tensor], d: int, max_len: int) -> tuple[str, Tensor | None]:
    """("learned", table) or ("sinusoidal", None) after checking a stored sinusoid is the standard one."""
    found = [(k, v) for k, v in rest.items() if "pos" in k.lower() and v.shape[-1] == d]
    if not found:
        return "sinusoidal", None
    key, value = found[0]
    table = value.reshape(-1, d).float()
    if torch.allclose(table, sinusoidal_table(table.shape[0], d), atol=1e-4):
        return "sinusoidal", None
    if value.dim() == 2:
        return "learned", table
    raise CheckpointError(f"{key} looks like a positional encoding but is neither the paper's sinusoid nor a learned table")


def from_torch_transformer(state: dict[str, Tensor], src_codec: TextCodec, tgt_codec: TextCodec,
                           settings: ImportSettings) -> tuple[Transformer, Bundle]:
    """Our model with the same weights as an nn.Transformer-based seq2seq model."""
    p, n_enc, n_dec = _find_prefix(state)
    d = state[f"{p}encoder.layers.0.self_attn.in_proj_weight"].shape[1]
    d_ff = state[f"{p}encoder.layers.0.linear1.weight"].shape[0]
    rest = _outside(state, p)
    src_key, tgt_key, gen_key, shared = _embeddings(rest, d, src_codec.vocab_size, tgt_codec.vocab_size)
    positional, learned = _positions(rest, d, settings.max_len)
    try:
        config = ModelConfig(src_vocab_size=src_codec.vocab_size, tgt_vocab_size=tgt_codec.vocab_size, d_model=d,
                             n_heads=settings.n_heads, n_encoder_layers=n_enc, n_decoder_layers=n_dec, d_ff=d_ff,
                             dropout=0.0, attention_dropout=0.0,
                             max_len=learned.shape[0] if learned is not None else settings.max_len,
                             positional=positional, norm="pre" if settings.norm_first else "post",
                             tie_embeddings=bool(torch.equal(rest[gen_key], rest[tgt_key])),
                             share_embeddings=shared, final_norm=f"{p}encoder.norm.weight" in state)
    except ConfigError as err:
        raise CheckpointError(f"these weights do not make a valid model: {err}") from None
    mapped = _map_weights(state, p, config, src_key, tgt_key, gen_key, learned)
    check_shapes({k: tuple(v.shape) for k, v in mapped.items()}, expected_shapes(config), "the imported state_dict")
    model = Transformer(config)
    with torch.no_grad():
        for key, tensor in unique_state(model).items():
            tensor.copy_(mapped[key].float())
    return model.eval(), Bundle(config, src_codec, tgt_codec, settings.src_lang, settings.tgt_lang,
                                {"data": "imported nn.Transformer state_dict", "name": "imported"})


def _attention(state: dict[str, Tensor], src: str, dst: str) -> dict[str, Tensor]:
    q, k, v = state[f"{src}.in_proj_weight"].chunk(3)
    qb, kb, vb = state[f"{src}.in_proj_bias"].chunk(3)
    return {f"{dst}.q_proj.weight": q, f"{dst}.k_proj.weight": k, f"{dst}.v_proj.weight": v,
            f"{dst}.q_proj.bias": qb, f"{dst}.k_proj.bias": kb, f"{dst}.v_proj.bias": vb,
            f"{dst}.out_proj.weight": state[f"{src}.out_proj.weight"], f"{dst}.out_proj.bias": state[f"{src}.out_proj.bias"]}


def _copy(state: dict[str, Tensor], src: str, dst: str) -> dict[str, Tensor]:
    return {f"{dst}.weight": state[f"{src}.weight"], f"{dst}.bias": state[f"{src}.bias"]}


def _map_weights(state: dict[str, Tensor], p: str, c: ModelConfig, src_key: str, tgt_key: str, gen_key: str,
                 learned: Tensor | None) -> dict[str, Tensor]:
    try:
        out = {"tgt_embed.weight": state[tgt_key], "generator.bias": state[gen_key[: -len("weight")] + "bias"]}
        if not c.share_embeddings:
            out["src_embed.weight"] = state[src_key]
        if not c.tie_embeddings:
            out["generator.weight"] = state[gen_key]
        if learned is not None:
            out["positions.table.weight"] = learned
        for i in range(c.n_encoder_layers):
            e, o = f"{p}encoder.layers.{i}", f"encoder.{i}"
            out |= _attention(state, f"{e}.self_attn", f"{o}.self_attn") | _copy(state, f"{e}.linear1", f"{o}.ffn.up")
            out |= _copy(state, f"{e}.linear2", f"{o}.ffn.down") | _copy(state, f"{e}.norm1", f"{o}.attn_block.norm")
            out |= _copy(state, f"{e}.norm2", f"{o}.ffn_block.norm")
        for i in range(c.n_decoder_layers):
            e, o = f"{p}decoder.layers.{i}", f"decoder.{i}"
            out |= _attention(state, f"{e}.self_attn", f"{o}.self_attn")
            out |= _attention(state, f"{e}.multihead_attn", f"{o}.cross_attn")
            out |= _copy(state, f"{e}.linear1", f"{o}.ffn.up") | _copy(state, f"{e}.linear2", f"{o}.ffn.down")
            out |= _copy(state, f"{e}.norm1", f"{o}.self_block.norm") | _copy(state, f"{e}.norm2", f"{o}.cross_block.norm")
            out |= _copy(state, f"{e}.norm3", f"{o}.ffn_block.norm")
        if c.has_final_norm:
            out |= _copy(state, f"{p}encoder.norm", "encoder_norm") | _copy(state, f"{p}decoder.norm", "decoder_norm")
    except KeyError as err:
        raise CheckpointError(f"the state_dict lacks tensor {err.args[0]}") from None
    return out

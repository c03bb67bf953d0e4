"""Recognise the layout of a state_dict trained elsewhere and rename its tensors to ours.

Two families map one-to-one onto attnscope's Transformer:
- **nn.Transformer** (the PyTorch tutorials; also nn.TransformerEncoder/Decoder pairs): in_proj
  weights split into Q/K/V, linear1/linear2 into the FFN, norm1-3 into the residual blocks,
  the stacks' final norms into `encoder_norm`/`decoder_norm`.
- **The Annotated Transformer** (harvardnlp): `MultiHeadedAttention.linears[0..3]` are Q, K, V
  and the output projection, `feed_forward.w_1/w_2` the FFN, `sublayer.N.norm.a_2/b_2` its own
  pre-LN LayerNorm (unbiased std, eps added to the std), `generator.proj` the output layer.

Around the stacks, the token embeddings, output layer and positional table are found by
shape and name. What the weights cannot tell (heads, norm placement, activation...) is the
importer's business (state_dict.py); the file is read by torch_files.py.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import Tensor

from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.model.parameters import (
    FINAL_NORMS,
    OUTPUT,
    OUTPUT_BIAS,
    POSITIONS,
    PROJECTIONS,
    SIDES,
    SRC_EMBED,
    TGT_EMBED,
    part,
)
from attnscope.model.positions import sinusoidal_table


@dataclass(frozen=True)
class Layout:
    """What the weights reveal about a model, with its tensors under attnscope's names.

    Vocabulary rows (embeddings, output layer) are still in the user's id order.
    """

    family: str  # "nn.Transformer" or "Annotated Transformer"
    tensors: dict[str, Tensor]
    d_model: int
    d_ff: int
    n_encoder_layers: int
    n_decoder_layers: int
    src_rows: int  # rows of the source embedding
    tgt_rows: int  # rows of the output layer (= the target embedding's)
    final_norm: bool
    positional: str  # "sinusoidal" or "learned"
    max_len: int | None  # positions a stored table covers (None: no table stored)
    share_embeddings: bool
    tie_embeddings: bool
    embedding_keys: tuple[str, str]  # the user's names of the source and target embedding weights
    implied: dict[str, Any] = field(default_factory=dict)  # config fields the family's code fixes


# --- finding the two stacks -------------------------------------------------------------

TORCH_LAYER = re.compile(r"^(?P<stack>.*?)layers\.(?P<i>\d+)\.self_attn\.in_proj_weight$")
ANNOTATED_LAYER = re.compile(r"^(?P<stack>.*?)layers\.(?P<i>\d+)\.self_attn\.linears\.0\.weight$")


def _stacks(state: dict[str, Tensor], pattern: re.Pattern[str], cross: str) -> tuple[str, int, str, int] | None:
    """(encoder prefix, layers, decoder prefix, layers), or None when this family's stacks are absent."""
    stacks: dict[str, set[int]] = {}
    for key in state:
        m = pattern.match(key)
        if m:
            stacks.setdefault(m["stack"], set()).add(int(m["i"]))
    decoders = [p for p in stacks if any(k.startswith(f"{p}layers.0.{cross}.") for k in state)]
    encoders = [p for p in stacks if p not in decoders]
    if len(encoders) != 1 or len(decoders) != 1:
        return None
    return encoders[0], len(stacks[encoders[0]]), decoders[0], len(stacks[decoders[0]])


def describe(state: dict[str, Tensor]) -> str:
    """What a state_dict that fits no family looks like, in a few words for the refusal."""
    keys = list(state)

    def has(*parts: str) -> bool:
        return any(all(p in k for p in parts) for k in keys)

    if has("attention.self.query"):
        return "a BERT-style encoder (attention.self.query): it has no decoder to translate with"
    if has("self_attn.k_proj") and has("encoder_attn"):
        return ("a Hugging Face or fairseq encoder-decoder (self_attn.k_proj, encoder_attn): import the Hugging Face "
                "model's whole folder (config.json, tokenizer files), or the fairseq checkpoint with its args and "
                "dict.*.txt, with python -m attnscope import SOURCE --out model.safetensors")
    if has("SelfAttention.q") or has("EncDecAttention"):
        return ("a Hugging Face T5 model, whose relative position buckets attnscope's model does not compute: turn its "
                "generate(..., output_attentions=True, return_dict_in_generate=True) into a record with "
                "attnscope.from_generate instead")
    if has("in_proj_weight") and not has("multihead_attn"):
        return ("torch.nn.MultiheadAttention layers but no nn.TransformerDecoder (no multihead_attn): an encoder only, "
                "or your own layers; record them in your code with attnscope.record_attention(model)")
    if has("linears.0") and not has("src_attn"):
        return "Annotated-Transformer attention (linears.0-3) but no decoder with src_attn"
    return f"{len(keys)} tensors such as " + ", ".join(keys[:3])


def _refuse(state: dict[str, Tensor]) -> CheckpointError:
    return CheckpointError(f"this state_dict looks like {describe(state)}; attnscope imports nn.Transformer models "
                           "(keys like 'transformer.encoder.layers.0.self_attn.in_proj_weight') and the Annotated "
                           "Transformer (keys like 'encoder.layers.0.self_attn.linears.0.weight')")


# --- the parts around the stacks --------------------------------------------------------

def _name_hint(candidates: list[str], hints: tuple[str, ...]) -> list[str]:
    return [k for k in candidates if any(h in k.lower() for h in hints)]


def _around(state: dict[str, Tensor], stack_prefixes: tuple[str, str], d: int) -> tuple[str, str | None, str, str]:
    """Keys of the output weight, its bias (None: no bias), the source and the target embedding."""
    rest = {k: v for k, v in state.items() if not any(k.startswith(p + "layers.") or k.startswith(p + "norm.")
                                                      for p in stack_prefixes)}

    def is_pos(k: str) -> bool:
        return "pos" in k.lower() or k.endswith(".pe")

    matrices = [k for k, v in rest.items() if v.dim() == 2 and v.shape[1] == d and k.endswith("weight") and not is_pos(k)]
    biased = [k for k in matrices if k[: -len("weight")] + "bias" in rest]
    outputs = biased if len(biased) == 1 else _name_hint(biased or matrices, ("generator", "proj", "out", "fc", "head"))
    if len(outputs) != 1:
        raise CheckpointError("cannot tell which tensor is the output layer (a [vocabulary, d_model] weight) among " +
                              (", ".join(f"{k} {list(rest[k].shape)}" for k in matrices) or "none"))
    out = outputs[0]
    bias = out[: -len("weight")] + "bias" if out[: -len("weight")] + "bias" in rest else None
    tables = [k for k in matrices if k != out and k not in biased]
    if len(tables) == 1:
        return out, bias, tables[0], tables[0]
    src = _name_hint(tables, ("src", "source", "enc"))
    tgt = _name_hint(tables, ("tgt", "trg", "target", "dec"))
    if len(tables) == 2 and len(src) == 1 and len(tgt) == 1 and src != tgt:
        return out, bias, src[0], tgt[0]
    raise CheckpointError("cannot tell the source and target embeddings apart among " +
                          (", ".join(f"{k} {list(rest[k].shape)}" for k in tables) or "no [vocabulary, d_model] tables") +
                          ": name them with 'src'/'tgt' in their module names")


def _positions(state: dict[str, Tensor], d: int) -> tuple[str, Tensor | None, int | None]:
    """("learned", table, rows) or ("sinusoidal", None, rows or None) after checking a stored sinusoid."""
    found = [(k, v) for k, v in state.items() if ("pos" in k.lower() or k.endswith(".pe")) and v.shape[-1] == d]
    if not found:
        return "sinusoidal", None, None
    key, value = found[0]
    table = value.reshape(-1, d).float()
    if table.shape[0] and torch.allclose(table, sinusoidal_table(table.shape[0], d), atol=1e-4):
        return "sinusoidal", None, table.shape[0]
    if value.dim() == 2:
        return "learned", table, table.shape[0]
    raise CheckpointError(f"{key} looks like a positional encoding {list(value.shape)} but is neither the paper's "
                          "sinusoid nor a learned table")


def _copy(state: dict[str, Tensor], src: str, dst: str, names: tuple[str, str] = ("weight", "bias")) -> dict[str, Tensor]:
    return {f"{dst}.weight": state[f"{src}.{names[0]}"], f"{dst}.bias": state[f"{src}.{names[1]}"]}


def _in_proj(state: dict[str, Tensor], src: str, dst: str) -> dict[str, Tensor]:
    """nn.MultiheadAttention's packed q/k/v split into our three projections, and its output projection."""
    weights, biases = state[f"{src}.in_proj_weight"].chunk(3), state[f"{src}.in_proj_bias"].chunk(3)
    out: dict[str, Tensor] = {}
    for proj, weight, bias in zip(PROJECTIONS, weights, biases):
        out |= {f"{dst}.{proj}.weight": weight, f"{dst}.{proj}.bias": bias}
    return out | _copy(state, f"{src}.out_proj", f"{dst}.{PROJECTIONS[3]}")


def _linears(state: dict[str, Tensor], src: str, dst: str) -> dict[str, Tensor]:
    out: dict[str, Tensor] = {}
    for i, name in enumerate(PROJECTIONS):
        out |= _copy(state, f"{src}.linears.{i}", f"{dst}.{name}")
    return out


# Each family's layer parts (their module name -> our role, parameters.LAYER_PARTS)
TORCH_PARTS = {"encoder": {"self_attn": "self_attn", "linear1": "ffn_up", "linear2": "ffn_down", "norm1": "self_norm",
                           "norm2": "ffn_norm"},
               "decoder": {"self_attn": "self_attn", "multihead_attn": "cross_attn", "linear1": "ffn_up",
                           "linear2": "ffn_down", "norm1": "self_norm", "norm2": "cross_norm", "norm3": "ffn_norm"}}
ANNOTATED_PARTS = {"encoder": {"self_attn": "self_attn", "feed_forward.w_1": "ffn_up", "feed_forward.w_2": "ffn_down",
                               "sublayer.0.norm": "self_norm", "sublayer.1.norm": "ffn_norm"},
                   "decoder": {"self_attn": "self_attn", "src_attn": "cross_attn", "feed_forward.w_1": "ffn_up",
                               "feed_forward.w_2": "ffn_down", "sublayer.0.norm": "self_norm",
                               "sublayer.1.norm": "cross_norm", "sublayer.2.norm": "ffn_norm"}}


def _mapped(state: dict[str, Tensor], prefixes: tuple[str, str], counts: tuple[int, int], parts: dict[str, dict[str, str]],
            attention: Callable[[dict[str, Tensor], str, str], dict[str, Tensor]],
            norm: tuple[str, str]) -> dict[str, Tensor]:
    """Both stacks under our names, with each family's attention layout and LayerNorm parameter names."""
    out: dict[str, Tensor] = {}
    for side, prefix, count in zip(SIDES, prefixes, counts):
        for i in range(count):
            for theirs, role in parts[side].items():
                src, dst = f"{prefix}layers.{i}.{theirs}", part(side, i, role)
                out |= attention(state, src, dst) if role.endswith("attn") else _copy(
                    state, src, dst, norm if role.endswith("norm") else ("weight", "bias"))
        if f"{prefix}norm.{norm[0]}" in state:
            out |= _copy(state, f"{prefix}norm", FINAL_NORMS[side], norm)
    return out


def _torch_layers(state: dict[str, Tensor], e: str, n_enc: int, dec: str, n_dec: int) -> dict[str, Tensor]:
    return _mapped(state, (e, dec), (n_enc, n_dec), TORCH_PARTS, _in_proj, ("weight", "bias"))


def _annotated_layers(state: dict[str, Tensor], e: str, n_enc: int, dec: str, n_dec: int) -> dict[str, Tensor]:
    tensors = _mapped(state, (e, dec), (n_enc, n_dec), ANNOTATED_PARTS, _linears, ("a_2", "b_2"))
    for side, prefix in zip(SIDES, (e, dec)):
        if FINAL_NORMS[side] + ".weight" not in tensors:
            raise KeyError(f"{prefix}norm.a_2")
    return tensors


Mapper = Callable[[dict[str, Tensor], str, int, str, int], dict[str, Tensor]]
FAMILIES: tuple[tuple[str, re.Pattern[str], str, str, Mapper, dict[str, Any]], ...] = (
    ("nn.Transformer", TORCH_LAYER, "multihead_attn", "linear1.weight", _torch_layers, {}),
    ("Annotated Transformer", ANNOTATED_LAYER, "src_attn", "feed_forward.w_1.weight", _annotated_layers,
     {"norm": "pre", "layer_norm": "annotated"}),
)


def recognise(state: dict[str, Tensor]) -> Layout:
    """The family of a state_dict and its tensors under attnscope's names, or a refusal saying what it looks like."""
    for family, pattern, cross, ffn_key, mapper, implied in FAMILIES:
        stacks = _stacks(state, pattern, cross)
        if stacks is None:
            continue
        e, n_enc, dec, n_dec = stacks
        attn = state[f"{e}layers.0.self_attn." + ("in_proj_weight" if family == "nn.Transformer" else "linears.0.weight")]
        d = attn.shape[1]
        try:
            tensors = mapper(state, e, n_enc, dec, n_dec)
            d_ff = state[f"{e}layers.0.{ffn_key}"].shape[0]
        except KeyError as err:
            raise CheckpointError(f"this looks like an {family} state_dict but it lacks tensor {err.args[0]}") from None
        out, bias, src, tgt = _around(state, (e, dec), d)
        positional, learned, rows = _positions(state, d)
        tensors[TGT_EMBED] = state[tgt]
        tensors[SRC_EMBED] = state[src]
        tensors[OUTPUT] = state[out]
        tensors[OUTPUT_BIAS] = state[bias] if bias else torch.zeros(state[out].shape[0])
        if learned is not None:
            tensors[POSITIONS] = learned
        return Layout(family, tensors, d, d_ff, n_enc, n_dec, state[src].shape[0], state[out].shape[0],
                      f"{FINAL_NORMS['encoder']}.weight" in tensors, positional, rows, src == tgt,
                      out == tgt or bool(torch.equal(state[out], state[tgt])), (src, tgt), dict(implied))
    raise _refuse(state)

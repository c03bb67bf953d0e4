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
importer's business (checkpoints/importing.py). Loading uses `torch.load(weights_only=True)`,
so nothing in a file is executed.
"""
from __future__ import annotations

import io
import pickle
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import Tensor

from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.model.positions import sinusoidal_table

PICKLED_MODULE = ("{name} holds a whole pickled model, which attnscope never unpickles because that would run its code: "
                  "save the weights with torch.save(model.state_dict(), '{stem}.pt') and import that, or pass the live "
                  "model to attnscope.import_model(model, ...) in Python.")


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


def is_torch_file(data: bytes) -> bool:
    """Whether `data` starts like something torch.save wrote: a zip archive (since torch 1.6) or a pickle
    (the legacy format); anything else is not a PyTorch checkpoint, whatever its name says."""
    return data[:4] == b"PK\x03\x04" or (data[:1] == b"\x80" and data[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"))


NOT_TORCH = ("{name} is not a PyTorch checkpoint (torch.save writes a zip archive; this file is neither that nor a "
             "pickle): pick the file you saved with torch.save(model.state_dict(), ...)")


def read_state_dict(data: bytes, name: str) -> dict[str, Tensor]:
    """Tensors of a .pt/.pth file, loaded without executing code; nested dicts are unwrapped."""
    if _is_safetensors(data):
        raise CheckpointError(f"{name} is a safetensors file, not a PyTorch state_dict: a Hugging Face model imports as "
                              "its whole folder (or a zip of it, or its hub name); an attnscope checkpoint opens as it is")
    if not is_torch_file(data):
        raise CheckpointError(NOT_TORCH.format(name=name))
    try:
        obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        found = re.search(r"GLOBAL ([\w.]+)", str(err))
        if found and found[1] == "argparse.Namespace":
            raise CheckpointError(f"{name} keeps its settings in an argparse.Namespace, as fairseq and OpenNMT-py "
                                  "checkpoints do, but is neither of theirs: import it with python -m attnscope import "
                                  "(it reads fairseq's args/cfg with model, and OpenNMT-py's model/generator/vocab/opt), "
                                  "or save model.state_dict() alone") from None
        if found and pickled_model(found[1]):
            stem = name.rsplit(".", 1)[0] or "model"
            raise CheckpointError(PICKLED_MODULE.format(name=name, stem=stem)) from None
        held = f"holds pickled {found[1]} objects" if found else "needs code to unpickle"
        raise CheckpointError(f"{name} is not a PyTorch weights file that can be loaded safely: it {held}, which "
                              "attnscope never unpickles because that would run their code; save model.state_dict() "
                              "alone (of a fairseq or OpenNMT-py checkpoint, keep only its model and settings) and "
                              "import that") from None
    except Exception as err:  # RuntimeError, EOFError, zip errors...
        first = str(err).strip().splitlines()[0][:160] if str(err).strip() else type(err).__name__
        raise CheckpointError(f"{name} is not a PyTorch weights file that can be loaded safely ({first})") from None
    for key in ("state_dict", "model_state_dict", "model"):
        if isinstance(obj, dict) and isinstance(obj.get(key), dict):
            obj = obj[key]
    if not isinstance(obj, dict) or not obj or not all(isinstance(v, Tensor) for v in obj.values()):
        raise CheckpointError(f"{name} does not hold a state_dict (a mapping of names to tensors)")
    return {str(k): v for k, v in obj.items()}


def pickled_model(global_name: str) -> bool:
    """Whether a pickled class (as the unpickler names it) looks like a whole model rather than a value beside it."""
    return ".nn.modules." in global_name or global_name.rsplit(".", 1)[-1][:1].isupper()


def _is_safetensors(data: bytes) -> bool:
    """A safetensors file: an 8-byte little-endian header length, then a JSON header."""
    return len(data) > 9 and data[8:9] == b"{" and int.from_bytes(data[:8], "little") < len(data)


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
    q, k, v = state[f"{src}.in_proj_weight"].chunk(3)
    qb, kb, vb = state[f"{src}.in_proj_bias"].chunk(3)
    return {f"{dst}.q_proj.weight": q, f"{dst}.k_proj.weight": k, f"{dst}.v_proj.weight": v,
            f"{dst}.q_proj.bias": qb, f"{dst}.k_proj.bias": kb, f"{dst}.v_proj.bias": vb,
            **_copy(state, f"{src}.out_proj", f"{dst}.out_proj")}


def _linears(state: dict[str, Tensor], src: str, dst: str) -> dict[str, Tensor]:
    out: dict[str, Tensor] = {}
    for i, name in enumerate(("q_proj", "k_proj", "v_proj", "out_proj")):
        out |= _copy(state, f"{src}.linears.{i}", f"{dst}.{name}")
    return out


def _torch_layers(state: dict[str, Tensor], e: str, n_enc: int, dec: str, n_dec: int) -> dict[str, Tensor]:
    out: dict[str, Tensor] = {}
    for i in range(n_enc):
        s, o = f"{e}layers.{i}", f"encoder.{i}"
        out |= _in_proj(state, f"{s}.self_attn", f"{o}.self_attn") | _copy(state, f"{s}.linear1", f"{o}.ffn.up")
        out |= _copy(state, f"{s}.linear2", f"{o}.ffn.down") | _copy(state, f"{s}.norm1", f"{o}.attn_block.norm")
        out |= _copy(state, f"{s}.norm2", f"{o}.ffn_block.norm")
    for i in range(n_dec):
        s, o = f"{dec}layers.{i}", f"decoder.{i}"
        out |= _in_proj(state, f"{s}.self_attn", f"{o}.self_attn") | _in_proj(state, f"{s}.multihead_attn", f"{o}.cross_attn")
        out |= _copy(state, f"{s}.linear1", f"{o}.ffn.up") | _copy(state, f"{s}.linear2", f"{o}.ffn.down")
        out |= _copy(state, f"{s}.norm1", f"{o}.self_block.norm") | _copy(state, f"{s}.norm2", f"{o}.cross_block.norm")
        out |= _copy(state, f"{s}.norm3", f"{o}.ffn_block.norm")
    if f"{e}norm.weight" in state:
        out |= _copy(state, f"{e}norm", "encoder_norm") | _copy(state, f"{dec}norm", "decoder_norm")
    return out


def _annotated_layers(state: dict[str, Tensor], e: str, n_enc: int, dec: str, n_dec: int) -> dict[str, Tensor]:
    ab = ("a_2", "b_2")
    out: dict[str, Tensor] = {}
    for i in range(n_enc):
        s, o = f"{e}layers.{i}", f"encoder.{i}"
        out |= _linears(state, f"{s}.self_attn", f"{o}.self_attn") | _copy(state, f"{s}.feed_forward.w_1", f"{o}.ffn.up")
        out |= _copy(state, f"{s}.feed_forward.w_2", f"{o}.ffn.down")
        out |= _copy(state, f"{s}.sublayer.0.norm", f"{o}.attn_block.norm", ab)
        out |= _copy(state, f"{s}.sublayer.1.norm", f"{o}.ffn_block.norm", ab)
    for i in range(n_dec):
        s, o = f"{dec}layers.{i}", f"decoder.{i}"
        out |= _linears(state, f"{s}.self_attn", f"{o}.self_attn") | _linears(state, f"{s}.src_attn", f"{o}.cross_attn")
        out |= _copy(state, f"{s}.feed_forward.w_1", f"{o}.ffn.up") | _copy(state, f"{s}.feed_forward.w_2", f"{o}.ffn.down")
        for j, block in enumerate(("self_block", "cross_block", "ffn_block")):
            out |= _copy(state, f"{s}.sublayer.{j}.norm", f"{o}.{block}.norm", ab)
    return out | _copy(state, f"{e}norm", "encoder_norm", ab) | _copy(state, f"{dec}norm", "decoder_norm", ab)


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
        tensors["tgt_embed.weight"] = state[tgt]
        tensors["src_embed.weight"] = state[src]
        tensors["generator.weight"] = state[out]
        tensors["generator.bias"] = state[bias] if bias else torch.zeros(state[out].shape[0])
        if learned is not None:
            tensors["positions.table.weight"] = learned
        return Layout(family, tensors, d, d_ff, n_enc, n_dec, state[src].shape[0], state[out].shape[0],
                      "encoder_norm.weight" in tensors, positional, rows, src == tgt,
                      out == tgt or bool(torch.equal(state[out], state[tgt])), (src, tgt), dict(implied))
    raise _refuse(state)

"""The layer layout Hugging Face's BART-derived translation models share (Marian, BART, mBART, M2M100/NLLB; fairseq's
layers carry the same names) as attnscope tensors and config fields.

All four share one layer layout (`model.encoder.layers.N.self_attn.q_proj`, `fc1`, `final_layer_norm`,
`encoder_attn`...) and config.json's names for the sizes, the activation, `scale_embedding` and the special tokens;
they differ in what surrounds the stacks (positions, where the norms sit, an embeddings LayerNorm), which each
architecture's module in hf_families/ gives as its `layout`.
"""
from __future__ import annotations

from typing import Any

from torch import Tensor

from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.importers.assemble import Weights
from attnscope.checkpoints.importers.hf_config import MAX_VOCAB
from attnscope.model import parameters
from attnscope.model.config import MAX_LEN

SIZES: dict[str, int] = {  # required field -> largest value accepted (hf_config.check_config)
    "d_model": 16_384, "encoder_layers": 64, "decoder_layers": 64, "encoder_attention_heads": 1_024,
    "decoder_attention_heads": 1_024, "encoder_ffn_dim": 262_144, "decoder_ffn_dim": 262_144, "vocab_size": MAX_VOCAB}
OPTIONAL = {"decoder_vocab_size": MAX_VOCAB, "max_position_embeddings": MAX_LEN}
SETTINGS = ("activation", "norm", "final_norm", "positional", "sinusoid", "position_offset", "embed_norm",
            "embed_scale", "source_framing", "source_prefix", "source_suffix", "decoder_start", "forced_first",
            "suppressed")
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "silu", "silu": "silu"}
LEARNED_OFFSET = 2  # BartLearnedPositionalEmbedding's "hack": position i reads row i + 2


def architecture(config: dict[str, Any], layout: dict[str, Any]) -> dict[str, Any]:
    """ModelConfig fields read from a Hugging Face config.json (vocabulary sizes and token ids aside), around the
    stacks as the architecture's `layout` (positional, sinusoid, norm, final_norm, embed_norm) fixes them."""
    heads = {config.get("encoder_attention_heads"), config.get("decoder_attention_heads")}
    ffn = {config.get("encoder_ffn_dim"), config.get("decoder_ffn_dim")}
    if len(heads) != 1 or len(ffn) != 1:
        raise CheckpointError("attnscope's model has one head count and one feed-forward size for both stacks, but this "
                              f"config has heads {sorted(map(str, heads))} and ffn sizes {sorted(map(str, ffn))}")
    activation = ACTIVATIONS.get(str(config.get("activation_function", "gelu")))
    if activation is None:
        raise CheckpointError(f"activation_function {config.get('activation_function')!r} is not one attnscope computes "
                              f"({', '.join(ACTIVATIONS)})")
    fields = dict(layout, d_model=int(config["d_model"]), n_heads=int(heads.pop()),
                  n_encoder_layers=int(config["encoder_layers"]), n_decoder_layers=int(config["decoder_layers"]),
                  d_ff=int(ffn.pop()), max_len=int(config.get("max_position_embeddings", 1024)), activation=activation,
                  embed_scale=bool(config.get("scale_embedding", False)), dropout=0.0, attention_dropout=0.0)
    if fields["positional"] == "learned":
        fields["position_offset"] = LEARNED_OFFSET
    elif fields["sinusoid"] == "fairseq":
        fields["position_offset"] = int(config.get("pad_token_id", 1)) + 1  # fairseq's positions start at padding_idx + 1
    return fields


def weights(state: dict[str, Tensor], fields: dict[str, Any], config: dict[str, Any]) -> Weights:
    """The whole model's tensors (layers, then the embeddings and output layer) under attnscope's names."""
    return Weights(layers(state, fields), *embeddings(state, config))


def _prefix(state: dict[str, Tensor]) -> str:
    for prefix in ("model.", ""):
        if f"{prefix}encoder.layers.0.self_attn.q_proj.weight" in state:
            return prefix
    raise CheckpointError("these weights have no model.encoder.layers.0.self_attn.q_proj.weight: not a Marian, BART, "
                          "mBART or M2M100 model's state")


# their layer parts -> our roles (parameters.LAYER_PARTS); fairseq's layers carry the same names
ENCODER_PARTS = {"self_attn": "self_attn", "self_attn_layer_norm": "self_norm", "fc1": "ffn_up", "fc2": "ffn_down",
                 "final_layer_norm": "ffn_norm"}
DECODER_PARTS = {"self_attn": "self_attn", "self_attn_layer_norm": "self_norm", "encoder_attn": "cross_attn",
                 "encoder_attn_layer_norm": "cross_norm", "fc1": "ffn_up", "fc2": "ffn_down", "final_layer_norm": "ffn_norm"}
PROJECTIONS = dict(zip(("q_proj", "k_proj", "v_proj", "out_proj"), parameters.PROJECTIONS))


def layers(state: dict[str, Tensor], fields: dict[str, Any]) -> dict[str, Tensor]:
    """The stacks, their norms and the positional tables under attnscope's names."""
    p = _prefix(state)
    out: dict[str, Tensor] = {}
    for side, count, parts in (("encoder", fields["n_encoder_layers"], ENCODER_PARTS),
                               ("decoder", fields["n_decoder_layers"], DECODER_PARTS)):
        for i in range(count):
            for theirs, role in parts.items():
                ours = parameters.part(side, i, role)
                for their_proj, our_proj in PROJECTIONS.items() if role.endswith("attn") else (("", ""),):
                    for kind in ("weight", "bias"):
                        name = f"{ours}.{our_proj}" if our_proj else ours
                        out[f"{name}.{kind}"] = _get(state, f"{p}{side}.layers.{i}.{theirs}" +
                                                     (f".{their_proj}" if their_proj else "") + f".{kind}")
    for side in parameters.SIDES:
        for kind in ("weight", "bias"):
            if fields["final_norm"]:
                out[f"{parameters.FINAL_NORMS[side]}.{kind}"] = _get(state, f"{p}{side}.layer_norm.{kind}")
            if fields["embed_norm"]:
                out[f"{parameters.EMBED_NORMS[side]}.{kind}"] = _get(state, f"{p}{side}.layernorm_embedding.{kind}")
        if fields["positional"] == "learned":
            table = parameters.DECODER_POSITIONS if side == "decoder" else parameters.POSITIONS
            out[table] = _get(state, f"{p}{side}.embed_positions.weight")
    return out


def _get(state: dict[str, Tensor], key: str) -> Tensor:
    if key not in state:
        raise CheckpointError(f"the weights lack {key}: the folder's model.safetensors does not fit its config.json")
    return state[key]


def embeddings(state: dict[str, Tensor], config: dict[str, Any]) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """Token embeddings, output layer and logits bias (final_logits_bias) of a Hugging Face state."""
    p = _prefix(state)
    shared = state.get(f"{p}shared.weight")
    enc = state.get(f"{p}encoder.embed_tokens.weight", shared)
    dec = state.get(f"{p}decoder.embed_tokens.weight", shared)
    if enc is None or dec is None:
        raise CheckpointError("the weights have no token embeddings (model.shared.weight or embed_tokens.weight)")
    tied = bool(config.get("tie_word_embeddings", True)) or "lm_head.weight" not in state
    return enc, dec, dec if tied else state["lm_head.weight"], state.get("final_logits_bias")

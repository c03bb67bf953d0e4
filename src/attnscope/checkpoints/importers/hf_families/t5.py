"""Hugging Face's T5 family (T5 v1.0, v1.1, Flan-T5, mT5, ByT5) as attnscope tensors and config fields.

T5 (Raffel et al. 2020) has no absolute positions but a learned bias by bucket of each query-key offset, kept in
each stack's first layer; RMS norms before each sublayer and after each stack; no biases anywhere; unscaled scores;
heads of width d_kv; a ReLU (v1.0) or gated GELU (v1.1, mT5) feed-forward network. Its output layer is the shared
embedding (v1.0; its input rescaled by d_model^-0.5) or lm_head (v1.1, mT5), exactly as transformers 5 loads them:
`lm_head.weight` is the output layer when the weights hold it with other values than `shared.weight` (transformers
then leaves it untied whatever the config says), else the embedding; T5 rescales when config.json says
`scale_decoder_outputs`, or else unless it says `tie_word_embeddings: false`; mT5 never does. A checkpoint trained
with task prefixes ("translate English to German: ") names them in task_specific_params (`task_prefix`). The
tokenizer is a SentencePiece one copied from its tokenizer.json, or ByT5's bytes (hf_bytes.py); one vocabulary with
no <s>: the decoder starts on <pad>.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import Tensor

from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.importers.assemble import Weights
from attnscope.checkpoints.importers.hf_bytes import byte_codec
from attnscope.checkpoints.importers.hf_config import MAX_VOCAB
from attnscope.checkpoints.importers.hf_families.architecture import Architecture
from attnscope.checkpoints.importers.hf_files import HFFolder
from attnscope.checkpoints.importers.hf_tokens import Tokens, framed_tokens, one_codec, one_vocabulary, start_and_forced
from attnscope.checkpoints.importers.vocab_plan import VocabPlan
from attnscope.model import parameters
from attnscope.model.config import MAX_LEN
from attnscope.model.tokenization import TextCodec

# T5 and mT5 (ByT5 is a T5) name their sizes otherwise than BART; the bucket limits are ModelConfig's
SIZES: dict[str, int] = {"d_model": 16_384, "num_layers": 64, "num_heads": 1_024, "d_kv": 16_384, "d_ff": 262_144,
                         "vocab_size": MAX_VOCAB}
OPTIONAL = {"num_decoder_layers": 64, "relative_attention_num_buckets": 1_024,
            "relative_attention_max_distance": MAX_LEN, "n_positions": MAX_LEN}
SETTINGS = ("activation", "ffn", "layer_norm", "positional", "relative_buckets", "relative_max_distance", "d_head",
            "scale_output", "tie_embeddings", "source_framing", "decoder_start", "suppressed")

ACTIVATIONS = {"relu": "relu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu",
               "silu": "silu", "swish": "silu"}
ATTENTION = dict(zip(("q", "k", "v", "o"), parameters.PROJECTIONS))
# (side, sublayer index) -> (their module in the block's layer, our attention role, our norm role)
SUBLAYERS = {("encoder", 0): ("SelfAttention", "self_attn", "self_norm"),
             ("decoder", 0): ("SelfAttention", "self_attn", "self_norm"),
             ("decoder", 1): ("EncDecAttention", "cross_attn", "cross_norm")}
DEFAULT_POSITIONS = 512  # T5's n_positions (its tokenizers' model_max_length): what sources are cut to


def architecture(config: dict[str, Any]) -> dict[str, Any]:
    """ModelConfig fields read from a T5 or mT5 config.json (its sizes checked)."""
    gated, activation = _feed_forward(str(config.get("feed_forward_proj", "relu")))
    heads, d_kv, d_model = int(config["num_heads"]), int(config["d_kv"]), int(config["d_model"])
    try:
        eps = float(config.get("layer_norm_epsilon", 1e-6))
    except (TypeError, ValueError):
        raise CheckpointError(f"config.json has layer_norm_epsilon {config.get('layer_norm_epsilon')!r}, not a number") from None
    return dict(d_model=d_model, n_heads=heads, d_head=None if heads * d_kv == d_model else d_kv, d_ff=int(config["d_ff"]),
                n_encoder_layers=int(config["num_layers"]),
                n_decoder_layers=int(config.get("num_decoder_layers") or config["num_layers"]),
                max_len=int(config.get("n_positions") or DEFAULT_POSITIONS), dropout=0.0, attention_dropout=0.0,
                positional="relative", relative_buckets=int(config.get("relative_attention_num_buckets", 32)),
                relative_max_distance=int(config.get("relative_attention_max_distance", 128)), norm="pre",
                final_norm=True, layer_norm="rms", norm_eps=eps, ffn="gated" if gated else "dense", activation=activation,
                qkv_bias=False, out_bias=False, ffn_bias=False, scale_scores=False, embed_scale=False,
                scale_output=scale_output(config))


def _feed_forward(proj: str) -> tuple[bool, str]:
    """Whether the feed-forward network is gated, and its activation, as T5Config reads feed_forward_proj."""
    parts = proj.split("-")
    gated = len(parts) == 2 and parts[0] == "gated"
    act = "gelu_new" if proj == "gated-gelu" else parts[-1]  # transformers' "for backwards compatibility"
    if len(parts) > 2 or (len(parts) == 2 and not gated) or act not in ACTIVATIONS:
        raise CheckpointError(f"feed_forward_proj {proj!r} is not a feed-forward network attnscope computes (relu, "
                              f"gated-gelu, or [gated-]one of {', '.join(ACTIVATIONS)})")
    return gated, ACTIVATIONS[act]


def scale_output(config: dict[str, Any]) -> bool:
    """Whether the output layer's input is multiplied by d_model^-0.5, as transformers 5's T5Config decides it."""
    if config.get("model_type") != "t5":
        return False
    if "scale_decoder_outputs" in config:
        return bool(config["scale_decoder_outputs"])
    return config.get("tie_word_embeddings") is not False


def layers(state: dict[str, Tensor], fields: dict[str, Any]) -> dict[str, Tensor]:
    """The stacks, their norms and the two relative bias tables under attnscope's names."""
    out: dict[str, Tensor] = {}
    gated = fields["ffn"] == "gated"
    for side, count in (("encoder", fields["n_encoder_layers"]), ("decoder", fields["n_decoder_layers"])):
        for i in range(count):
            block = f"{side}.block.{i}.layer"
            for (s, j), (module, attn, norm) in SUBLAYERS.items():
                if s != side:
                    continue
                for theirs, ours in ATTENTION.items():
                    out[f"{parameters.part(side, i, attn)}.{ours}.weight"] = _get(state, f"{block}.{j}.{module}.{theirs}.weight")
                out[f"{parameters.part(side, i, norm)}.weight"] = _get(state, f"{block}.{j}.layer_norm.weight")
            ffn = f"{block}.{2 if side == 'decoder' else 1}"
            out[f"{parameters.part(side, i, 'ffn_norm')}.weight"] = _get(state, f"{ffn}.layer_norm.weight")
            out[f"{parameters.part(side, i, 'ffn_down')}.weight"] = _get(state, f"{ffn}.DenseReluDense.wo.weight")
            if gated:
                out[f"{parameters.gate(side, i)}.weight"] = _get(state, f"{ffn}.DenseReluDense.wi_0.weight")
                out[f"{parameters.part(side, i, 'ffn_up')}.weight"] = _get(state, f"{ffn}.DenseReluDense.wi_1.weight")
            else:
                out[f"{parameters.part(side, i, 'ffn_up')}.weight"] = _get(state, f"{ffn}.DenseReluDense.wi.weight")
        out[parameters.relative_bias(side)] = _get(state, f"{side}.block.0.layer.0.SelfAttention.relative_attention_bias.weight")
        out[f"{parameters.FINAL_NORMS[side]}.weight"] = _get(state, f"{side}.final_layer_norm.weight")
    return out


def _get(state: dict[str, Tensor], key: str) -> Tensor:
    if key not in state:
        raise CheckpointError(f"the weights lack {key}: the folder's weights do not fit its config.json (a T5 model's "
                              "weights, as T5ForConditionalGeneration.save_pretrained writes them)")
    return state[key]


def embeddings(state: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor, None]:
    """Token embeddings and output layer as transformers 5 loads them (the module docstring); T5 has no output bias."""
    shared = state.get("shared.weight")
    enc = state.get("encoder.embed_tokens.weight", shared)
    dec = state.get("decoder.embed_tokens.weight", shared)
    if enc is None or dec is None:
        raise CheckpointError("the weights have no token embeddings (shared.weight): not a T5 model's weights")
    head = state.get("lm_head.weight")
    untied = head is not None and not (head.shape == dec.shape and bool(torch.equal(head, dec)))
    return enc, dec, head if untied else dec, None


def weights(state: dict[str, Tensor], fields: dict[str, Any], config: dict[str, Any]) -> Weights:
    """The whole model's tensors under attnscope's names (config.json aside: the weights say how the output is tied)."""
    return Weights(layers(state, fields), *embeddings(state))


def tokens(folder: HFFolder, tok: Any, src_lang: str | None, tgt_lang: str | None) -> Tokens:
    """T5's vocabulary, codec, languages (those of the task prefix picked) and token-level fields."""
    plan = one_vocabulary(folder, tok)
    codec = _codec(tok, plan)
    start, forced = start_and_forced(folder, plan)
    prefix, pair = task_prefix(folder.config, src_lang, tgt_lang)
    langs = pair or (src_lang or "src", tgt_lang or "tgt")
    return framed_tokens(folder, tok, plan, codec, langs, start, forced, prefix)


def _codec(tok: Any, plan: VocabPlan) -> TextCodec:
    """ByT5's bytes (ByT5Tokenizer has no vocabulary file, nor a tokenizer.json), else T5's tokenizer.json."""
    if not hasattr(tok, "backend_tokenizer") and type(tok).__name__ == "ByT5Tokenizer":
        return byte_codec(tok, plan)
    return one_codec(tok, plan)


def task_prefix(config: dict[str, Any], src_lang: str | None, tgt_lang: str | None) -> tuple[str, tuple[str, str] | None]:
    """The prefix a T5 trained on several tasks expects before a sentence to translate, and the language pair it
    names (None: no translation task was picked): task_specific_params' `translation_{src}_to_{tgt}` for the given
    languages, or the only translation task without them; "" when the config names no translation task."""
    tasks = config.get("task_specific_params")
    pairs: dict[tuple[str, str], str] = {}
    for name, params in (tasks.items() if isinstance(tasks, dict) else ()):
        src, sep, tgt = str(name).removeprefix("translation_").partition("_to_")
        if str(name).startswith("translation_") and sep and isinstance(params, dict):
            prefix = params.get("prefix", "")
            if not isinstance(prefix, str):
                raise CheckpointError(f"config.json's task_specific_params gives {name} the prefix {prefix!r}, not text")
            pairs[(src, tgt)] = prefix
    if not pairs:
        return "", None
    listed = ", ".join(f"{s} {t}" for s, t in pairs)
    if src_lang or tgt_lang:
        if (src_lang, tgt_lang) not in pairs:
            raise CheckpointError(f"this T5 model was trained to translate {listed} (source target) with a task prefix "
                                  f"each, not {src_lang} to {tgt_lang}: pass one of these pairs as --src-lang/--tgt-lang")
        return pairs[(src_lang, tgt_lang)], (str(src_lang), str(tgt_lang))
    if len(pairs) > 1:
        raise CheckpointError(f"this T5 model translates several language pairs, each with its own task prefix: pass one "
                              f"of {listed} (source target) as --src-lang/--tgt-lang")
    (pair, prefix), = pairs.items()
    return prefix, pair


T5 = Architecture("T5", SIZES, OPTIONAL, SETTINGS, architecture, weights, tokens)
MT5 = dataclasses.replace(T5, name="mT5")  # the same code; scale_output tells them apart by model_type

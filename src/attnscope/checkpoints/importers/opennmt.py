"""OpenNMT-py v3 transformer checkpoints: `{"model", "generator", "vocab", "opt", "optim"}` in one .pt file.

What OpenNMT-py's code fixes: pre-LN layers (`layer_norm`, then each sublayer; the feed-forward keeps
its own `feed_forward.layer_norm`) with final norms, LayerNorm eps `opt.norm_eps` (1e-6), embeddings
scaled by sqrt(d) and the sinusoid of `opt.position_encoding_type` (SinusoidalInterleaved: the paper's
layout; SinusoidalConcat: [sin | cos] with tensor2tensor's frequencies) added from position 0, q/k/v
and output projections with biases only with `add_qkvbias`, sources fed as their tokens alone (no
</s>), targets started with `vocab["decoder_start_token"]` (<s>). Vocabularies are the checkpoint's own
lists (<unk> <blank> <s> </s> first by default); text is split at spaces into their tokens, as
OpenNMT-py reads already-tokenized text.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import Tensor

from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.decoding_rules import DecodingRules, opennmt_defaults
from attnscope.checkpoints.importers.assemble import Family, Vocabularies, Weights, assemble
from attnscope.checkpoints.importers.parts import Imported
from attnscope.checkpoints.importers.training_files import Recognised, read, setting, word_codec
from attnscope.checkpoints.importers.vocab_plan import VocabPlan
from attnscope.model import parameters
from attnscope.model.config import ModelConfig

PAD, BOS, EOS, UNK = "<blank>", "<s>", "</s>", "<unk>"  # onmt.constants.DefaultTokens
SINUSOIDS = {"SinusoidalInterleaved": "interleaved", "SinusoidalConcat": "fairseq"}
SETTINGS = ("activation", "norm", "norm_eps", "sinusoid", "qkv_bias", "source_framing")
# their layer parts -> our roles (parameters.LAYER_PARTS)
ENCODER = {"layer_norm": "self_norm", "feed_forward.layer_norm": "ffn_norm", "feed_forward.w_1": "ffn_up",
           "feed_forward.w_2": "ffn_down"}
DECODER = {"layer_norm_1": "self_norm", "layer_norm_2": "cross_norm", "feed_forward.layer_norm": "ffn_norm",
           "feed_forward.w_1": "ffn_up", "feed_forward.w_2": "ffn_down"}
ATTENTIONS = {"self_attn": "self_attn", "context_attn": "cross_attn"}
PROJECTIONS = dict(zip(("linear_query", "linear_keys", "linear_values", "final_linear"), parameters.PROJECTIONS))


def recognise(path: Path) -> Recognised | None:
    """An OpenNMT-py checkpoint: a dict with `model`, `generator`, `vocab` and `opt`."""
    data = read(path)
    if data is None or not {"model", "generator", "vocab", "opt"} <= set(data):
        return None
    return Recognised("OpenNMT-py", lambda **kw: import_opennmt(path, data, **kw))


def architecture(opt: Any) -> dict[str, Any]:
    """ModelConfig fields from OpenNMT-py's options, refusing what attnscope's model does not compute."""
    checks = [(setting(opt, "encoder_type", "transformer") == "transformer"
               and setting(opt, "decoder_type", "transformer") == "transformer", "a non-transformer encoder or decoder"),
              (setting(opt, "position_encoding", False), "no sinusoidal positions (relative or rotary positions)"),
              (not setting(opt, "max_relative_positions", 0), "relative positions"),
              (setting(opt, "layer_norm", "standard") == "standard", "RMSNorm"),
              # 3.5's default, scaled-dot-flash, is the same dot products through torch's fused kernel
              (setting(opt, "self_attn_type", "scaled-dot") in ("scaled-dot", "scaled-dot-flash"), "average attention"),
              (not setting(opt, "parallel_residual", False), "parallel residuals"),
              (not setting(opt, "num_kv", 0), "grouped key/value heads"),
              (setting(opt, "pos_ffn_activation_fn", "relu") in ("relu", "gelu"), "a gated feed-forward layer"),
              (setting(opt, "position_encoding_type", "SinusoidalInterleaved") in SINUSOIDS, "an unknown sinusoid")]
    for ok, what in checks:
        if not ok:
            raise CheckpointError(f"this OpenNMT-py model uses {what}, which attnscope's model does not compute")
    d = int(setting(opt, "hidden_size", 0) or setting(opt, "enc_hid_size", 512))
    return dict(d_model=d, n_heads=int(setting(opt, "heads", 8)), d_ff=int(setting(opt, "transformer_ff", 2048)),
                n_encoder_layers=int(setting(opt, "enc_layers", 6)), n_decoder_layers=int(setting(opt, "dec_layers", 6)),
                dropout=0.0, attention_dropout=0.0, norm="pre", final_norm=True, embed_scale=True,
                norm_eps=float(setting(opt, "norm_eps", 1e-6)), activation=setting(opt, "pos_ffn_activation_fn", "relu"),
                positional="sinusoidal", sinusoid=SINUSOIDS[setting(opt, "position_encoding_type", "SinusoidalInterleaved")],
                qkv_bias=bool(setting(opt, "add_qkvbias", False)), source_framing="none")


def layers(state: dict[str, Tensor], fields: dict[str, Any]) -> dict[str, Tensor]:
    """OpenNMT-py's layers under attnscope's names; absent biases (add_ffnbias / add_qkvbias off) become zeros
    where attnscope keeps one (the output projection, the feed-forward layers)."""
    out: dict[str, Tensor] = {}
    stacks = (("encoder", "encoder.transformer", fields["n_encoder_layers"], ENCODER, ("self_attn",)),
              ("decoder", "decoder.transformer_layers", fields["n_decoder_layers"], DECODER, ("self_attn", "context_attn")))
    for side, prefix, count, blocks, attentions in stacks:
        for i in range(count):
            src = f"{prefix}.{i}"
            for theirs, role in blocks.items():
                out |= _linear(state, f"{src}.{theirs}", parameters.part(side, i, role), bias=True)
            for attn in attentions:
                ours = parameters.part(side, i, ATTENTIONS[attn])
                for theirs, proj in PROJECTIONS.items():
                    out |= _linear(state, f"{src}.{attn}.{theirs}", f"{ours}.{proj}",
                                   bias=proj == parameters.PROJECTIONS[3] or fields["qkv_bias"])
        out |= _linear(state, f"{side}.layer_norm", parameters.FINAL_NORMS[side], bias=True)
    return out


def _linear(state: dict[str, Tensor], src: str, dst: str, *, bias: bool) -> dict[str, Tensor]:
    if f"{src}.weight" not in state:
        raise CheckpointError(f"this OpenNMT-py checkpoint lacks {src}.weight: its options and weights disagree")
    weight = state[f"{src}.weight"]
    out = {f"{dst}.weight": weight}
    if bias:
        out[f"{dst}.bias"] = state.get(f"{src}.bias", torch.zeros(weight.shape[0]))
    return out


def import_opennmt(path: Path, data: dict[str, Any], *, src_lang: str | None = None, tgt_lang: str | None = None,
                   name: str | None = None, vocabularies: Sequence[Any] = (None, None)) -> Imported:
    """An attnscope model computing what OpenNMT-py's NMTModel computes (tests/checkpoints/test_opennmt.py)."""
    vocab = data["vocab"]
    if not isinstance(vocab, dict) or not isinstance(vocab.get("src"), list) or not isinstance(vocab.get("tgt"), list):
        raise CheckpointError(f"{path.name} is not an OpenNMT-py v3 checkpoint (its vocab is not lists of tokens): convert "
                              "older ones with OpenNMT-py's tools/convertv2_v3.py")
    return assemble(OpenNMT(path, data, (src_lang or "src", tgt_lang or "tgt"), name or path.stem))


@dataclass(frozen=True)
class OpenNMT(Family):
    """An OpenNMT-py v3 checkpoint's family: its opt, model, generator and vocabulary lists."""

    path: Path
    checkpoint: dict[str, Any]
    langs: tuple[str, str]
    name: str
    label = "OpenNMT-py transformer"

    @property
    def data(self) -> str:
        return f"imported OpenNMT-py transformer {self.path.name}"

    def config_fields(self) -> dict[str, Any]:
        pe = self.checkpoint["model"].get("encoder.embeddings.make_embedding.pe.pe", torch.zeros(5000))
        return architecture(self.checkpoint["opt"]) | {"max_len": int(pe.shape[0])}

    def vocabularies(self) -> Vocabularies:
        vocab = self.checkpoint["vocab"]
        lists = [[str(t) for t in vocab[side]] for side in ("src", "tgt")]
        def plan(tokens: list[str], at: VocabPlan | None = None) -> VocabPlan:
            return VocabPlan.build(len(tokens), pad=_index(tokens, PAD), bos=_index(tokens, BOS), eos=_index(tokens, EOS),
                                   unk=_index(tokens, UNK), at=at)

        tgt = plan(lists[1])
        plans = [plan(lists[0], tgt), tgt]
        start = plans[1].ours(_index(lists[1], str(vocab.get("decoder_start_token") or BOS)))
        codecs = [word_codec(tokens, plan, UNK, set()) for tokens, plan in zip(lists, plans)]  # <unk> shown, as in OpenNMT-py
        return Vocabularies(plans[0], plans[1], codecs[0], codecs[1], self.langs,
                            {"decoder_start": None if start == tgt.bos else start})

    def weights(self, fields: dict[str, Any]) -> Weights:
        state, generator = self.checkpoint["model"], self.checkpoint["generator"] or {}
        enc = state["encoder.embeddings.make_embedding.emb_luts.0.weight"]
        dec = state["decoder.embeddings.make_embedding.emb_luts.0.weight"]
        head = dec if setting(self.checkpoint["opt"], "share_decoder_embeddings", False) else generator.get("weight", dec)
        return Weights(layers(state, fields), enc, dec, head, generator.get("bias"))

    def settings(self, config: ModelConfig) -> dict[str, tuple[Any, str]]:
        return {k: (getattr(config, k), "the checkpoint's settings") for k in SETTINGS}

    def rules(self) -> DecodingRules:
        return opennmt_defaults()  # onmt_translate's


def _index(tokens: list[str], token: str) -> int:
    try:
        return tokens.index(token)
    except ValueError:
        raise CheckpointError(f"the OpenNMT-py vocabulary has no {token} token") from None

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

from pathlib import Path
from typing import Any, Sequence

import torch
from torch import Tensor

from attnscope.checkpoints.checkpoint import Bundle, CheckpointError
from attnscope.checkpoints.decoding_rules import KEY as RULES_KEY
from attnscope.checkpoints.decoding_rules import opennmt_defaults
from attnscope.checkpoints.importers.hf_models import vocab_tensors
from attnscope.checkpoints.importers.training_files import Recognised, read, setting, word_codec
from attnscope.checkpoints.importers.vocab_plan import VocabPlan
from attnscope.checkpoints.importing import Imported, ImportReport, build, checked
from attnscope.model.config import BOS_ID, ConfigError, ModelConfig

PAD, BOS, EOS, UNK = "<blank>", "<s>", "</s>", "<unk>"  # onmt.constants.DefaultTokens
SINUSOIDS = {"SinusoidalInterleaved": "interleaved", "SinusoidalConcat": "fairseq"}
ENCODER = {"layer_norm": "attn_block.norm", "feed_forward.layer_norm": "ffn_block.norm", "feed_forward.w_1": "ffn.up",
           "feed_forward.w_2": "ffn.down"}
DECODER = {"layer_norm_1": "self_block.norm", "layer_norm_2": "cross_block.norm",
           "feed_forward.layer_norm": "ffn_block.norm", "feed_forward.w_1": "ffn.up", "feed_forward.w_2": "ffn.down"}
PROJECTIONS = {"linear_query": "q_proj", "linear_keys": "k_proj", "linear_values": "v_proj", "final_linear": "out_proj"}


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
            src, dst = f"{prefix}.{i}", f"{side}.{i}"
            for theirs, ours in blocks.items():
                out |= _linear(state, f"{src}.{theirs}", f"{dst}.{ours}", bias=True)
            for attn in attentions:
                ours = "cross_attn" if attn == "context_attn" else "self_attn"
                for theirs, proj in PROJECTIONS.items():
                    out |= _linear(state, f"{src}.{attn}.{theirs}", f"{dst}.{ours}.{proj}",
                                   bias=proj == "out_proj" or fields["qkv_bias"])
        out |= _linear(state, f"{side}.layer_norm", f"{side}_norm", bias=True)
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
    opt, vocab, state = data["opt"], data["vocab"], data["model"]
    if not isinstance(vocab, dict) or not isinstance(vocab.get("src"), list) or not isinstance(vocab.get("tgt"), list):
        raise CheckpointError(f"{path.name} is not an OpenNMT-py v3 checkpoint (its vocab is not lists of tokens): convert "
                              "older ones with OpenNMT-py's tools/convertv2_v3.py")
    fields = architecture(opt)
    lists = [[str(t) for t in vocab[side]] for side in ("src", "tgt")]
    plans = [VocabPlan.build(len(tokens), pad=_index(tokens, PAD), bos=_index(tokens, BOS), eos=_index(tokens, EOS),
                             unk=_index(tokens, UNK)) for tokens in lists]
    start = plans[1].ours(_index(lists[1], str(vocab.get("decoder_start_token") or BOS)))
    enc = state["encoder.embeddings.make_embedding.emb_luts.0.weight"]
    dec = state["decoder.embeddings.make_embedding.emb_luts.0.weight"]
    generator = data["generator"] or {}
    head = dec if setting(opt, "share_decoder_embeddings", False) else generator.get("weight", dec)
    vocab_part, share, tie = vocab_tensors(enc, dec, head, generator.get("bias"), *plans)
    max_len = int(state.get("encoder.embeddings.make_embedding.pe.pe", torch.zeros(5000)).shape[0])
    codecs = [word_codec(tokens, plan, UNK, set()) for tokens, plan in zip(lists, plans)]  # <unk> is shown, as OpenNMT-py does
    try:
        config = ModelConfig(src_vocab_size=plans[0].size, tgt_vocab_size=plans[1].size, tie_embeddings=tie,
                             share_embeddings=share, max_len=max_len, decoder_start=None if start == BOS_ID else start,
                             **fields)
    except ConfigError as err:
        raise CheckpointError(f"this OpenNMT-py model does not make a valid attnscope config: {err}") from None
    model = build(config, checked(layers(state, fields) | vocab_part))
    settings = {k: getattr(config, k) for k in ("activation", "norm", "norm_eps", "sinusoid", "qkv_bias", "source_framing")}
    report = ImportReport("OpenNMT-py transformer", settings, {k: "the checkpoint's settings" for k in settings})
    summary = {"data": f"imported OpenNMT-py transformer {path.name}", "name": name or path.stem, "import": report.lines(),
               RULES_KEY: opennmt_defaults().to_dict()}  # onmt_translate's, used by default
    bundle = Bundle(config, codecs[0], codecs[1], src_lang or "src", tgt_lang or "tgt", summary)
    return Imported(model, bundle, report, plans[0].order, plans[1].order)


def _index(tokens: list[str], token: str) -> int:
    try:
        return tokens.index(token)
    except ValueError:
        raise CheckpointError(f"the OpenNMT-py vocabulary has no {token} token") from None

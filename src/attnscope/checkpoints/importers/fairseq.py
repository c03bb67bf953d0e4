"""fairseq transformer checkpoints (`checkpoint_best.pt` with `dict.SRC.txt`/`dict.TGT.txt` beside it).

The settings are the checkpoint's `args` (an argparse.Namespace, fairseq < 0.10) or `cfg["model"]`
(a Namespace or a dict); the layers are named as in Hugging Face's BART, which was ported from
fairseq (hf_models.layers). What fairseq's code fixes: sinusoids of tensor2tensor's frequencies (or
learned tables) read from position padding_idx + 1, embeddings scaled by sqrt(d) unless
`no_scale_embedding`, final norms with pre-LN only, sources `x </s>`, a decoder that starts on `</s>`,
and an output layer without a bias. The vocabulary is fairseq's Dictionary: `<s> <pad> </s> <unk>`,
then the dict file's tokens, then `madeupwordNNNN` up to the embedding's rows. Text is split at
spaces into the dictionary's tokens (as fairseq-interactive reads already-cut text); a SentencePiece
model (the file `--sentencepiece-model` in its args names, or one *.model, read only from beside the
checkpoint: a path in a file is never followed) cuts it instead.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from torch import Tensor

from attnscope.checkpoints.checkpoint import Bundle, CheckpointError
from attnscope.checkpoints.decoding_rules import KEY as RULES_KEY
from attnscope.checkpoints.decoding_rules import fairseq_defaults
from attnscope.checkpoints.importers.hf_models import layers, vocab_tensors
from attnscope.checkpoints.importers.hf_tokenizers import spm_codec
from attnscope.checkpoints.importers.training_files import Recognised, read, setting, word_codec
from attnscope.checkpoints.importers.vocab_plan import VocabPlan
from attnscope.checkpoints.importing import Imported, ImportReport, build, checked
from attnscope.model.config import EOS_ID, PAD_ID, ConfigError, ModelConfig

SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")  # fairseq's Dictionary puts these at ids 0-3
BINARISED = re.compile(r"^[^.]+\.([^.-]+)-([^.]+)\.\1\.(?:bin|idx)$")  # fairseq-preprocess's train.en-de.en.bin
POST_PROCESS = {"sentencepiece": ((" ", ""), ("\u2581", " ")), "subword_nmt": (("@@ ", ""),), "@@ ": (("@@ ", ""),)}
UNSUPPORTED = ("adaptive_input", "adaptive_softmax_cutoff", "cross_self_attention", "no_cross_attention",
               "no_token_positional_embeddings", "tie_adaptive_weights")


def recognise(path: Path) -> Recognised | None:
    """A fairseq checkpoint: a dict with `model` and `args` or `cfg`."""
    data = read(path)
    if data is None or not isinstance(data.get("model"), dict) or not ({"args", "cfg"} & set(data)):
        return None
    args = data.get("args") or setting(data.get("cfg") or {}, "model")
    if args is None:
        raise CheckpointError(f"{path.name} is a fairseq checkpoint without its model settings (args or cfg['model'])")
    return Recognised("fairseq", lambda **kw: import_fairseq(path, data["model"], args, data.get("cfg") or {}, **kw))


def read_dictionary(path: Path) -> list[str]:
    """fairseq's Dictionary: its four specials, then the file's symbols (lines 'symbol count [#fairseq:overwrite]')."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise CheckpointError(f"cannot read {path}: {err.strerror or err}") from None
    symbols = list(SPECIALS)
    for number, line in enumerate(lines, 1):
        parts = line.rstrip().split(" ")
        if parts[-1] == "#fairseq:overwrite":
            parts = parts[:-1]
        if len(parts) < 2 or not parts[-1].lstrip("-").isdigit():
            raise CheckpointError(f"{path.name} line {number} is not 'symbol count' as fairseq dictionaries are")
        symbols.append(" ".join(parts[:-1]))
    return symbols


def _dictionary(path: Path, given: Any, lang: str | None, side: str, rows: int) -> list[str]:
    """A side's dictionary padded with madeupwordNNNN to the embedding's rows (fairseq's pad_to_multiple_)."""
    found = Path(given) if given is not None else path.parent / f"dict.{lang}.txt"
    if not found.is_file():
        raise CheckpointError(f"the {side} dictionary {found.name} is not beside {path.name}: give it (--src-vocab/"
                              "--tgt-vocab dict.LANG.txt)")
    symbols = read_dictionary(found)
    if len(symbols) > rows:
        raise CheckpointError(f"{found.name} has {len(symbols):,} symbols but the {side} embedding has {rows:,} rows: "
                              "give the dictionary the model was trained with")
    return symbols + [f"madeupword{i:04d}" for i in range(rows - len(symbols))]


def languages(path: Path, src: str | None, tgt: str | None, rows: tuple[int, int]) -> tuple[str, str]:
    """The language pair of a checkpoint that does not name it (fairseq-train took it from its data folder's file
    names): from a binarised file beside it (`train.en-de.en.bin`), else from the two dict.LANG.txt beside it,
    ordered by one language given or by which dictionary fits which embedding (fairseq pads a dictionary to a
    multiple of 8 rows); refused in one sentence when that leaves a choice."""
    if src and tgt:
        return src, tgt
    folder = path.parent
    named = (BINARISED.match(f.name) for f in folder.iterdir())
    pairs = {(m[1], m[2]) for m in named if m and src in (None, m[1]) and tgt in (None, m[2])}
    if len(pairs) == 1:
        return pairs.pop()
    found = sorted(f.name[len("dict."):-len(".txt")] for f in folder.glob("dict.*.txt"))
    ask = "give --src-lang and --tgt-lang (src_lang=, tgt_lang= in Python)"
    if len(found) != 2:
        raise CheckpointError(f"{path.name} does not name its languages and {len(found)} dict.LANG.txt files are beside "
                              f"it ({', '.join(found) or 'none'}): {ask}")
    if src or tgt:
        given = src or tgt
        if given not in found:
            raise CheckpointError(f"there is no dict.{given}.txt beside {path.name} (found {', '.join(found)}): {ask}")
        other = found[1 - found.index(given)]
        return (given, other) if src else (other, given)

    def fits(lang: str, n_rows: int) -> bool:
        n = len(read_dictionary(folder / f"dict.{lang}.txt"))
        return n <= n_rows < n + 8

    orders = [(a, b) for a, b in (found, found[::-1]) if fits(a, rows[0]) and fits(b, rows[1])]
    if len(orders) != 1:
        raise CheckpointError(f"{path.name} does not name its languages, and dict.{found[0]}.txt and dict.{found[1]}.txt "
                              f"fit {'both sides' if orders else 'neither side'} of its embeddings: {ask}")
    return orders[0]


def import_fairseq(path: Path, state: dict[str, Tensor], args: Any, cfg: Any, *, src_lang: str | None = None,
                   tgt_lang: str | None = None, name: str | None = None,
                   vocabularies: Sequence[Any] = (None, None)) -> Imported:
    """An attnscope model computing what fairseq's TransformerModel computes (tests/checkpoints/test_fairseq.py)."""
    task = setting(cfg, "task") or {}
    src_lang = src_lang or setting(args, "source_lang") or setting(task, "source_lang")
    tgt_lang = tgt_lang or setting(args, "target_lang") or setting(task, "target_lang")
    enc, dec = _get(state, "encoder.embed_tokens.weight"), _get(state, "decoder.embed_tokens.weight")
    if not all(vocabularies):
        src_lang, tgt_lang = languages(path, src_lang, tgt_lang, (enc.shape[0], dec.shape[0]))
    fields = architecture(args)
    if fields["positional"] == "learned":  # tables of max_positions + padding_idx + 1 rows; attnscope has one length
        rows = {_get(state, f"{side}.embed_positions.weight").shape[0] for side in ("encoder", "decoder")}
        if len(rows) > 1:
            raise CheckpointError(f"the learned position tables have {sorted(rows)} rows; attnscope needs one length")
        fields["max_len"] = rows.pop() - fields["position_offset"]
    head = state.get("decoder.output_projection.weight", state.get("decoder.embed_out", dec))
    symbols = [_dictionary(path, given, lang, side, t.shape[0])
               for given, lang, side, t in zip(vocabularies, (src_lang, tgt_lang), ("source", "target"), (enc, dec))]
    plans = [VocabPlan.build(len(s), pad=1, bos=0, eos=2, unk=3) for s in symbols]
    tensors = layers(state, fields)
    vocab, share, tie = vocab_tensors(enc, dec, head, None, *plans)
    codecs = [_codec(path, args, s, plan) for s, plan in zip(symbols, plans)]
    try:
        config = ModelConfig(src_vocab_size=plans[0].size, tgt_vocab_size=plans[1].size, tie_embeddings=tie,
                             share_embeddings=share, source_framing="eos", decoder_start=EOS_ID, suppressed=(PAD_ID,),
                             **fields)  # fairseq starts the decoder on </s>; its SequenceGenerator never outputs <pad>
    except ConfigError as err:
        raise CheckpointError(f"this fairseq model does not make a valid attnscope config: {err}") from None
    model = build(config, checked(tensors | vocab))
    settings = {k: getattr(config, k) for k in ("activation", "norm", "final_norm", "positional", "sinusoid",
                                                "position_offset", "embed_norm", "embed_scale")}
    report = ImportReport("fairseq transformer", settings, {k: "the checkpoint's settings" for k in settings})
    rules = fairseq_defaults(int(setting(args, "max_target_positions", 1024)))  # fairseq-generate's, used by default
    summary = {"data": f"imported fairseq transformer {path.name}", "name": name or path.stem, "import": report.lines(),
               RULES_KEY: rules.to_dict()}
    bundle = Bundle(config, codecs[0], codecs[1], src_lang or "src", tgt_lang or "tgt", summary)
    return Imported(model, bundle, report, plans[0].order, plans[1].order)


def _get(state: dict[str, Tensor], key: str) -> Tensor:
    if key not in state:
        raise CheckpointError(f"this fairseq checkpoint lacks {key}: only fairseq's transformer models are imported")
    return state[key]


def architecture(args: Any) -> dict[str, Any]:
    """ModelConfig fields from fairseq's transformer arguments (its base_architecture's defaults where absent)."""
    arch = str(setting(args, "arch", "transformer"))
    if not arch.startswith("transformer"):
        raise CheckpointError(f"fairseq arch {arch!r} is not a transformer: attnscope imports fairseq's transformer models")
    bad = [k for k in UNSUPPORTED if setting(args, k)]
    if bad:
        raise CheckpointError(f"this fairseq model uses {bad[0]}, which attnscope's model does not compute")
    d = int(setting(args, "encoder_embed_dim", 512))
    pre = [bool(setting(args, f"{side}_normalize_before", False)) for side in ("encoder", "decoder")]
    dims = {d, int(setting(args, "decoder_embed_dim", d)), int(setting(args, "decoder_output_dim", d) or d)}
    if len(set(pre)) > 1 or len(dims) > 1 or (pre[1] and setting(args, "no_decoder_final_norm", False)):
        raise CheckpointError("attnscope's model puts LayerNorm in the same place in both stacks with one width: this "
                              f"fairseq model has normalize_before {pre} and widths {sorted(dims)}")
    activation = str(setting(args, "activation_fn", "relu"))
    if activation not in ("relu", "gelu"):
        raise CheckpointError(f"activation_fn {activation!r} is not one attnscope computes (relu, gelu)")
    learned = [bool(setting(args, f"{side}_learned_pos", False)) for side in ("encoder", "decoder")]
    if len(set(learned)) > 1:
        raise CheckpointError("this fairseq model has learned positions on one side only; attnscope needs the same kind "
                              "on both")
    heads = {int(setting(args, "encoder_attention_heads", 8)), int(setting(args, "decoder_attention_heads", 8))}
    ffn = {int(setting(args, "encoder_ffn_embed_dim", 2048)), int(setting(args, "decoder_ffn_embed_dim", 2048))}
    if len(heads) > 1 or len(ffn) > 1:
        raise CheckpointError(f"attnscope's model has one head count and one ffn size; this model has {heads} and {ffn}")
    max_len = min(int(setting(args, "max_source_positions", 1024)), int(setting(args, "max_target_positions", 1024)))
    return dict(d_model=d, n_heads=heads.pop(), d_ff=ffn.pop(), n_encoder_layers=int(setting(args, "encoder_layers", 6)),
                n_decoder_layers=int(setting(args, "decoder_layers", 6)), max_len=max_len, dropout=0.0,
                attention_dropout=0.0, activation=activation, norm="pre" if pre[0] else "post", final_norm=pre[0],
                embed_scale=not setting(args, "no_scale_embedding", False),
                embed_norm=bool(setting(args, "layernorm_embedding", False)),
                positional="learned" if learned[0] else "sinusoidal", separate_positions=learned[0],
                sinusoid="fairseq", position_offset=2)  # padding_idx (1) + 1


def _codec(path: Path, args: Any, symbols: list[str], plan: VocabPlan) -> Any:
    """SentencePiece when the model has its .model file, else text split at spaces; decoding as fairseq post-processes."""
    bpe = setting(args, "bpe") or setting(args, "post_process") or setting(args, "remove_bpe")
    given = setting(args, "sentencepiece_model")
    named = path.parent / Path(str(given)).name if given else None  # only beside the checkpoint: never a path it names
    model = named if named is not None and named.is_file() else next(iter(sorted(path.parent.glob("*.model"))), None)
    special: set[int] = set()  # Dictionary.string() shows <unk>; <pad>, <s> and </s> are dropped anyway
    if bpe == "sentencepiece" and model is not None:
        ids = {s: i for i, s in enumerate(symbols)}
        return spm_codec(plan, model, ids, 3, symbols.__getitem__, special, cleanup=False)
    return word_codec(symbols, plan, "<unk>", special, replace=POST_PROCESS.get(str(bpe), ()),
                      strip=bpe == "sentencepiece")

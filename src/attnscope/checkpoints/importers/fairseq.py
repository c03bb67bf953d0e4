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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from torch import Tensor

from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.decoding_rules import DecodingRules, fairseq_defaults
from attnscope.checkpoints.importers.assemble import Family, Vocabularies, Weights, assemble
from attnscope.checkpoints.importers.hf_models import layers
from attnscope.checkpoints.importers.hf_tokenizers import spm_codec
from attnscope.checkpoints.importers.parts import Imported
from attnscope.checkpoints.importers.training_files import Recognised, read, setting, word_codec
from attnscope.checkpoints.importers.vocab_plan import VocabPlan
from attnscope.model.config import ModelConfig

SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")  # fairseq's Dictionary puts these at ids 0-3
BINARISED = re.compile(r"^[^.]+\.([^.-]+)-([^.]+)\.\1\.(?:bin|idx)$")  # fairseq-preprocess's train.en-de.en.bin
POST_PROCESS = {"sentencepiece": ((" ", ""), ("\u2581", " ")), "subword_nmt": (("@@ ", ""),), "@@ ": (("@@ ", ""),)}
SETTINGS = ("activation", "norm", "final_norm", "positional", "sinusoid", "position_offset", "embed_norm", "embed_scale")
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
    return assemble(Fairseq(path, state, args, (src_lang or "src", tgt_lang or "tgt"), tuple(vocabularies),
                            name or path.stem))


@dataclass(frozen=True)
class Fairseq(Family):
    """A fairseq checkpoint's family: its args, its state (named as Hugging Face's BART) and its dict.LANG.txt."""

    path: Path
    state: dict[str, Tensor]
    args: Any
    langs: tuple[str, str]
    given: tuple[Any, ...]  # the dictionaries given instead of those beside the checkpoint (None: beside it)
    name: str
    label = "fairseq transformer"

    @property
    def data(self) -> str:
        return f"imported fairseq transformer {self.path.name}"

    def config_fields(self) -> dict[str, Any]:
        fields = architecture(self.args)
        if fields["positional"] == "learned":  # tables of max_positions + padding_idx + 1 rows; attnscope has one length
            rows = {_get(self.state, f"{side}.embed_positions.weight").shape[0] for side in ("encoder", "decoder")}
            if len(rows) > 1:
                raise CheckpointError(f"the learned position tables have {sorted(rows)} rows; attnscope needs one length")
            fields["max_len"] = rows.pop() - fields["position_offset"]
        return fields

    def vocabularies(self) -> Vocabularies:
        tables = (self.state["encoder.embed_tokens.weight"], self.state["decoder.embed_tokens.weight"])
        symbols = [_dictionary(self.path, given, lang, side, t.shape[0])
                   for given, lang, side, t in zip(self.given, self.langs, ("source", "target"), tables)]
        tgt = VocabPlan.build(len(symbols[1]), pad=1, bos=0, eos=2, unk=3)  # fairseq's Dictionary: <s> <pad> </s> <unk>
        plans = [VocabPlan.build(len(symbols[0]), pad=1, bos=0, eos=2, unk=3, at=tgt), tgt]
        codecs = [_codec(self.path, self.args, s, plan) for s, plan in zip(symbols, plans)]
        # fairseq starts the decoder on </s>; its SequenceGenerator never outputs <pad>
        return Vocabularies(plans[0], plans[1], codecs[0], codecs[1], self.langs,
                            dict(source_framing="eos", decoder_start=tgt.eos, suppressed=(tgt.pad,)))

    def weights(self, fields: dict[str, Any]) -> Weights:
        enc, dec = self.state["encoder.embed_tokens.weight"], self.state["decoder.embed_tokens.weight"]
        head = self.state.get("decoder.output_projection.weight", self.state.get("decoder.embed_out", dec))
        return Weights(layers(self.state, fields), enc, dec, head)

    def settings(self, config: ModelConfig) -> dict[str, tuple[Any, str]]:
        return {k: (getattr(config, k), "the checkpoint's settings") for k in SETTINGS}

    def rules(self) -> DecodingRules:
        return fairseq_defaults(int(setting(self.args, "max_target_positions", 1024)))  # fairseq-generate's


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

"""`python -m attnscope import SOURCE [--out NAME.safetensors]`: a model trained elsewhere as an attnscope checkpoint,
written by default into the user-models folder the Checkpoints page lists ($ATTNSCOPE_USER_MODELS, else user_models/).

SOURCE is a Hugging Face folder (MarianMT, BART, mBART, M2M100/NLLB, T5/Flan-T5/mT5/ByT5), a zip of one, a hub name read from
the local Hugging Face cache (downloaded when absent and online), a fairseq transformer checkpoint
(dict.SRC.txt/dict.TGT.txt beside it), an OpenNMT-py v3 checkpoint, or a .pt/.pth state_dict with its
vocabularies. Examples:

    python -m attnscope import Helsinki-NLP/opus-mt-en-de --out opus-mt-en-de.safetensors
    python -m attnscope import facebook/nllb-200-distilled-600M --src-lang eng_Latn --tgt-lang deu_Latn --half \\
        --out nllb-en-de.safetensors
    python -m attnscope import checkpoints/checkpoint_best.pt --out fairseq-en-de.safetensors
    python -m attnscope import model.pt --src-vocab de.json --tgt-vocab en.json --src-lang de --tgt-lang en \\
        --heads 8 --source-framing bos-eos --check examples.tsv --out tutorial.safetensors

For a state_dict, `--check` names a file of lines "source<TAB>your model's output", the output as text or as
a JSON list of its ids; the import then proves the settings reproduce those outputs (or names the ones that do).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m attnscope import", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("source", help="a Hugging Face folder, zip or hub name; a fairseq or OpenNMT-py checkpoint; or a "
                                   ".pt/.pth state_dict (torch.save(model.state_dict(), ...))")
    p.add_argument("--src-vocab", type=Path, default=None, help="a state_dict's vocabulary (tokenizer.json, JSON list of "
                                                                   "tokens, or one token a line); fairseq: dict.SRC.txt")
    p.add_argument("--tgt-vocab", type=Path, default=None, help="the same for the target (omit for a joint vocabulary)")
    p.add_argument("--out", type=Path, default=None, help="the attnscope checkpoint to write (.safetensors; default: "
                                                          "SOURCE's name in the user-models folder, $ATTNSCOPE_USER_MODELS "
                                                          "or the checkout's user_models/, which the Checkpoints page lists)")
    p.add_argument("--half", action="store_true", help="store the weights in fp16 (half the file; the import reports "
                                                       "whether fp16 keeps the outputs)")
    p.add_argument("--src-lang", default=None, help="source language: a code of a multilingual model (en_XX, eng_Latn, "
                                                    "en), of a T5's translation task (en: its task prefix), or a label")
    p.add_argument("--tgt-lang", default=None, help="target language, likewise (Marian models into several languages "
                                                    "need it too)")
    p.add_argument("--name", default=None, help="shown in the app (default: the --out file's name)")
    p.add_argument("--specials", default=None, help="special tokens by role when their names are unusual: pad=<blank>,bos=<s>")
    p.add_argument("--heads", type=int, default=None, help="attention heads (default 8)")
    p.add_argument("--norm-first", choices=("true", "false"), default=None, help="pre-LN (nn.Transformer(norm_first=True))")
    p.add_argument("--activation", choices=("relu", "gelu"), default=None)
    p.add_argument("--norm-eps", type=float, default=None, help="LayerNorm epsilon (default 1e-5)")
    p.add_argument("--embed-scale", choices=("true", "false"), default=None, help="embeddings times sqrt(d_model) (default true)")
    p.add_argument("--source-framing", choices=("bos-eos", "eos"), default=None, help="'<bos> x <eos>' (default) or 'x <eos>'")
    p.add_argument("--max-len", type=int, default=None, help="longest sequence, for sinusoidal positions (default 256)")
    p.add_argument("--check", type=Path, default=None, help="lines 'source<TAB>your model's output' to verify the import")
    return p


def default_out(source: str) -> Path:
    """Where an import without --out goes: the user-models folder, so the Checkpoints page lists it, under the
    source's own name (`Helsinki-NLP/opus-mt-en-de` -> opus-mt-en-de.safetensors)."""
    from attnscope.checkpoints.registry import user_dir

    name = Path(source.rstrip("/\\")).name
    for suffix in (".zip", ".pt", ".pth", ".bin"):
        name = name.removesuffix(suffix)
    return user_dir() / f"{name or 'imported'}.safetensors"


def _flag(value: str | None) -> bool | None:
    """A 'true'/'false' option as a bool; None (unset) keeps the model's own setting."""
    return None if value is None else value == "true"


def main(argv: Sequence[str]) -> int:
    """Exit code 2 with one line on stderr when the import is rejected."""
    from attnscope.checkpoints import checkpoint
    from attnscope.checkpoints.checkpoint import CheckpointError
    from attnscope.checkpoints.import_inputs import parse_specials, read_examples
    from attnscope.checkpoints.importers import import_any
    from attnscope.checkpoints.importers.precision import half_report

    args = parser().parse_args(argv)
    args.out = args.out or default_out(args.source)
    settings: dict[str, Any] = {k: v for k, v in dict(
        n_heads=args.heads, norm_first=_flag(args.norm_first), activation=args.activation, norm_eps=args.norm_eps,
        embed_scale=_flag(args.embed_scale), source_framing=args.source_framing).items() if v is not None}
    try:
        imported = import_any(args.source, src_vocab=args.src_vocab, tgt_vocab=args.tgt_vocab, src_lang=args.src_lang,
                              tgt_lang=args.tgt_lang, name=args.name or args.out.stem,
                              specials=parse_specials(args.specials), max_len=args.max_len,
                              examples=read_examples(args.check) if args.check else (), **settings)
        path = checkpoint.save(imported.model, imported.bundle, args.out, half=args.half, known_finite=True)  # checked
    except CheckpointError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for line in imported.report.lines():
        print(line)
    if args.half:
        print(half_report(imported.model, imported.bundle, in_place=True))  # saved already: rounding it costs no copy
    print(f"wrote {path}")
    return 0

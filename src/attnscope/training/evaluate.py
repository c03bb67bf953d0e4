"""Corpus BLEU and chrF of a checkpoint on a Multi30k split (`python -m attnscope evaluate`)."""
from __future__ import annotations

import argparse
import json
import time
from typing import Any, Sequence

from attnscope.checkpoints import checkpoint
from attnscope.engine.analysis.bleu import scores
from attnscope.engine.decoding.translator import Translator
from attnscope.model.device import pick_device
from attnscope.training.data import data_dir, load_pairs


def exact_match(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Fraction of hypotheses equal to their reference after whitespace normalisation: the
    toy tasks' measure of success (a reversal is right or wrong; BLEU gives partial credit)."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    if not references:
        return 0.0
    same = sum(h.split() == r.split() for h, r in zip(hypotheses, references))
    return same / len(references)


def evaluate(translator: Translator, sources: Sequence[str], references: Sequence[str],
             beam_size: int = 1) -> dict[str, float]:
    hyps = translator.translate_batch(list(sources), beam_size=beam_size)
    return scores(hyps, references)


def markdown_table(results: Sequence[dict[str, Any]]) -> str:
    """Results of `main` as one Markdown table, a row per split and beam (as checkpoints/README.md reports them)."""
    rows = ["| split | beam | BLEU | BLEU lowercased | chrF | sentences | seconds |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    rows += [f"| {r['split']} | {r['beam']} | {r['bleu']:.2f} | {r['bleu_lc']:.2f} | {r['chrf']:.2f} | {r['sentences']} "
             f"| {r['seconds']} |" for r in results]
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m attnscope evaluate", description=__doc__)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--split", action="append", help="split name (repeatable); default test_2016_flickr")
    parser.add_argument("--beam", type=int, action="append", help="beam size (repeatable); default 1")
    parser.add_argument("--data-dir", default=None, help="Multi30k directory (default $ATTNSCOPE_DATA)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--markdown", action="store_true", help="also print the results as one Markdown table")
    args = parser.parse_args(argv)
    device = pick_device(args.device)
    model, bundle = checkpoint.load(args.checkpoint, device)
    translator = Translator(model, bundle, device)
    results = []
    for split in args.split or ["test_2016_flickr"]:
        pairs = load_pairs(data_dir(args.data_dir), split, bundle.src_lang, bundle.tgt_lang)
        for beam in args.beam or [1]:
            start = time.perf_counter()
            result = evaluate(translator, [s for s, _ in pairs], [t for _, t in pairs], beam)
            result.update(split=split, beam=beam, sentences=len(pairs),
                          seconds=round(time.perf_counter() - start, 1))
            print(json.dumps(result), flush=True)
            results.append(result)
    if args.markdown:
        print(markdown_table(results))

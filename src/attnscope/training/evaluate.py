"""Corpus BLEU and chrF of a checkpoint on a Multi30k split (for `python -m attnscope evaluate`)."""
from __future__ import annotations

import time
from typing import Any, Iterator, Sequence

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
    """Results of `evaluate_splits` as one Markdown table, a row per split and beam (as checkpoints/README.md reports them)."""
    rows = ["| split | beam | BLEU | BLEU lowercased | chrF | sentences | seconds |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    rows += [f"| {r['split']} | {r['beam']} | {r['bleu']:.2f} | {r['bleu_lc']:.2f} | {r['chrf']:.2f} | {r['sentences']} "
             f"| {r['seconds']} |" for r in results]
    return "\n".join(rows)


def evaluate_splits(checkpoint_path: str, splits: Sequence[str], beams: Sequence[int], data: str | None = None,
                    device: str = "auto") -> Iterator[dict[str, Any]]:
    """Scores of the checkpoint on every split at every beam size, each with its split, beam, sentences and
    seconds; yielded one at a time, so a caller can show each as soon as it is known."""
    where = pick_device(device)
    model, bundle = checkpoint.load(checkpoint_path, where)
    translator = Translator(model, bundle, where)
    for split in splits:
        pairs = load_pairs(data_dir(data), split, bundle.src_lang, bundle.tgt_lang)
        for beam in beams:
            start = time.perf_counter()
            result: dict[str, Any] = evaluate(translator, [s for s, _ in pairs], [t for _, t in pairs], beam)
            result.update(split=split, beam=beam, sentences=len(pairs), seconds=round(time.perf_counter() - start, 1))
            yield result

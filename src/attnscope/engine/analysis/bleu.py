"""Corpus scores of translations against references (sacreBLEU)."""
from __future__ import annotations

from typing import Sequence


def scores(hypotheses: Sequence[str], references: Sequence[str]) -> dict[str, float]:
    """sacreBLEU cased (13a), lowercased (-lc, as in published Multi30k tables) and chrF."""
    import sacrebleu  # with lxml, tabulate and more (~6 MB): imported when a score is asked for, not by every page

    refs = [list(references)]
    return {"bleu": round(sacrebleu.corpus_bleu(hypotheses, refs).score, 2),
            "bleu_lc": round(sacrebleu.corpus_bleu(hypotheses, refs, lowercase=True).score, 2),
            "chrf": round(sacrebleu.corpus_chrf(hypotheses, refs).score, 2)}

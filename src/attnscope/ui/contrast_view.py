"""The Step page's “why this token and not that one?”: once a rival or a typed word is forced at a step, the two
branches' attention side by side with their difference (the explorer's compare mode), and the contrastive
attributions of the step (gradient × input at once, integrated gradients on request, to the completeness the page
reports), with their download."""
from __future__ import annotations

import json

import numpy as np
import streamlit as st

from attnscope.engine.attribution.contrastive import CONTRASTIVE_INTEGRATED, Contrast, as_rows
from attnscope.engine.attribution.registry import CONTRAST, explanations
from attnscope.engine.attribution.sentence import contrast_attribute
from attnscope.engine.decoding.translator import Translation, Translator
from attnscope.ui import widgets
from attnscope.ui.attribution.sentence import NO_IG, completeness_report, ig_controls, ig_settings, method_table
from attnscope.ui.cache import cached
from attnscope.ui.explorer import explorer
from attnscope.ui.query import Query
from attnscope.ui.state import ViewState
from attnscope.ui.text import plain
from attnscope.viz.attribution import contrast_bars
from attnscope.viz.explorer import Compared

TOP = 3  # inputs named on each side of the contrast


def branches_compared(view: ViewState, query: Query, result: Translation, branch: Translation, t: int,
                      forced: tuple[int, ...]) -> None:
    """The model's choice (A) and the forced branch (B) in the explorer's compare mode: same kind, layer and head of
    both, and A − B. Up to step t the branches read the same prefix, so their rows agree there; they part after it."""
    other = Compared("branches", "model's choice", "forced branch", branch.attention, branch.output_tokens)
    explorer(result.attention, view, ("branches", query.key, forced, t), "explorer-branches", steps=result.steps,
             mode="compare", other=other, caption=False)
    st.caption(f"A: the model's choice; B: the branch forced at step {t}; A − B: their difference, row by row. Rows 0 "
               f"to {t} read the same prefix in both, so they are equal; the branches part after step {t}.")


def _named(tokens: list[str], scores: np.ndarray, sign: float) -> str:
    order = [j for j in np.argsort(-sign * scores, kind="stable")[:TOP] if sign * scores[j] > 0]
    return " · ".join(f"“{plain(tokens[j])}” {scores[j]:+.3g}" for j in order) or "none"


def contrast_view(tr: Translator, query: Query, result: Translation, t: int, foil: int) -> None:
    """Contrastive gradient × input of step t's token against `foil`, and integrated gradients on request; a figure of
    the signed scores over source and prefix, the inputs that pushed most either way, and a JSON download."""
    query.check(tr)
    codec = tr.bundle.tgt_codec
    token, rival = codec.piece(result.target_ids[t]), codec.piece(foil)
    st.markdown(f"**Why “{plain(token)}” and not “{plain(rival)}” at step {t}?** Attributions of "
                f"log p(“{plain(token)}”) − log p(“{plain(rival)}”), both read on the same prefix (Yin & Neubig, "
                "EMNLP 2022).")
    with st.expander("What these measures are"):
        st.markdown(f"{method_table(CONTRAST)}\n\n{explanations(CONTRAST)}")
    ig = ig_controls() if st.toggle("Add contrastive integrated gradients", key="contrast_ig") else NO_IG
    try:
        results = cached("contrast", query, lambda: contrast_attribute(tr, result, Contrast(t, foil), ig_settings(ig)),
                         t, foil, ig, spinner="Attributing the contrast…")
    except ValueError as err:
        st.warning(plain(err))
        return
    source, prefix = list(result.source_tokens), list(result.attention.target_tokens[: t + 1])
    widgets.chart(contrast_bars({name: (s.source[0], s.prefix[0]) for name, s in results.items()}, source, prefix,
                                f"Step {t}: “{token}” rather than “{rival}”"), "contrast-bars")
    for s in results.values():
        scores = np.concatenate([s.source[0], s.prefix[0]])
        st.markdown(f"*{plain(s.method)}* — towards “{plain(token)}”: {_named(source + prefix, scores, 1.0)}; towards "
                    f"“{plain(rival)}”: {_named(source + prefix, scores, -1.0)}. The difference is "
                    f"{s.score[0]:.3f} nats (at zero embeddings {s.baseline_score[0]:.3f}); the scores sum to "
                    f"{s.total[0]:.3f}.")
    completeness_report(results.get(CONTRASTIVE_INTEGRATED), "the change of the log-probability difference")
    rows = as_rows(results, source, prefix, token, rival, t)
    st.download_button("Contrastive attributions (JSON)", json.dumps(rows, ensure_ascii=False, indent=1),
                       f"attnscope-contrast-step{t}.json", "application/json", key="contrast_download")

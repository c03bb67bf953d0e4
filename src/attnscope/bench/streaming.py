"""A long output on opus-mt-en-de's shape (issue 44): the streamed decode's total time beside Hugging Face's
generate(output_attentions=True) on the same weights, and in the app, the first token on screen after Ctrl+Enter,
the estimate said before a large budget starts, and the whole output's time.

The model is hf_peer's: a random MarianMTModel of opus-mt-en-de's shape with a real MarianTokenizer, its </s> pushed
down so every output runs to its length, imported by the README's command. Both sides decode on one thread, as
interleaved pairs (paired.py), the output tokens checked identical. In the app (headless Chromium against
`streamlit run`), the browser itself times each first token: from its Ctrl+Enter keydown to the first row of the
live view in the page; between trials the running decode is stopped, as a user would.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import quote_plus

import torch

from attnscope.bench.app_latency import HEATMAPS_DRAWN, NOT_STALE, served
from attnscope.bench.hf_peer import CHECKPOINT, ENDS, OPUS_MT_EN_DE, TINY_MARIAN, _their_tokens, opus_mt_folder
from attnscope.bench.paired import paired
from attnscope.engine.decoding.loading import load
from attnscope.engine.decoding.translator import Translator
from attnscope.model.device import apply_thread_policy
from attnscope.ui.live_decode import LARGE_BUDGET

STOPPED = "Decoding was stopped after"
TRANSLATED = """sentence => !document.querySelector('.attn-live') && [...document.querySelectorAll('.attn-translation')]
  .some(e => decodeURIComponent(e.dataset.source || '') === sentence)"""
# Installed before each Ctrl+Enter: the keydown's time, then the time the live view's first row appears (or, for an
# output decoded before the browser drew its live view, the translation of the new sentence).
FIRST_TOKEN_TIMER = """sentence => {
  const shown = () => document.querySelector('.attn-live tbody tr') || [...document.querySelectorAll('.attn-translation')]
    .some(e => decodeURIComponent(e.dataset.source || '') === sentence);
  window.__first = null; window.__t0 = null;
  document.addEventListener('keydown', e => {
    if (e.key === 'Enter' && e.ctrlKey && window.__t0 === null) window.__t0 = performance.now();
  }, {capture: true});
  const seen = new MutationObserver(() => {
    if (window.__t0 !== null && window.__first === null && shown()) {
      window.__first = performance.now() - window.__t0; seen.disconnect();
    }
  });
  seen.observe(document.body, {childList: true, subtree: true});
}"""


def imported(folder: Path) -> Path:
    """The model in `folder` imported by the README's command."""
    out = folder / CHECKPOINT
    subprocess.run([sys.executable, "-m", "attnscope", "import", str(folder), "--out", str(out)], check=True,
                   capture_output=True, text=True)
    return out


def streamed(tr: Translator, sentence: str, n: int) -> list[int]:
    """The sentence's `n`-token output decoded as the app decodes it: streamed, each step's rows read out."""
    stream = tr.stream(sentence, max_len=n)
    for _ in stream:
        pass
    return list(stream.result().target_ids)


def engine_row(tr: Translator, folder: Path, sentence: str, n: int, pairs: int) -> dict[str, Any]:
    """The streamed decode of `n` tokens beside generate(output_attentions=True), one thread each."""
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(str(folder), attn_implementation="eager").eval()
    encoded = tokenizer([sentence], return_tensors="pt")

    def generate() -> list[str]:
        result = model.generate(**encoded, max_new_tokens=n, num_beams=1, do_sample=False, output_attentions=True,
                                return_dict_in_generate=True)
        return _their_tokens(tokenizer, model, result.sequences[0].tolist())

    one = (lambda: torch.set_num_threads(1), lambda: torch.set_num_threads(1))
    torch.set_num_threads(1)
    mine = [t for t in map(tr.bundle.tgt_codec.token, streamed(tr, sentence, n)) if t not in ENDS]
    row = {"what": f"{n}-token output, every head captured, streamed (ours) vs generate(output_attentions=True)",
           "threads (ours, HF)": [1, 1], "load average": round(os.getloadavg()[0], 1),
           "tokens identical": mine == generate(), "output tokens": len(mine)}
    row |= paired(lambda: streamed(tr, sentence, n), generate, pairs, one)
    apply_thread_policy()
    return row


def stop_decoding(page: Any) -> None:
    """Stop the decode running on `page`, if one is (a tiny model's may have ended already), and wait for the page."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    stop = page.get_by_role("button", name="Stop")
    if stop.count():
        try:
            stop.click(timeout=5_000)
        except PlaywrightTimeout:
            pass  # the decode ended (and its Stop went) meanwhile
    page.locator(".attn-live").wait_for(state="detached")
    page.locator(HEATMAPS_DRAWN).first.wait_for()
    page.wait_for_function(NOT_STALE)


def first_tokens(path: Path, sentences: Sequence[str], n: int) -> dict[str, Any]:
    """In the app: ms from Ctrl+Enter to the first token on screen for each sentence (each decode stopped after
    it), then one whole `n`-token output: the estimate shown before it started and the seconds it took."""
    with served(path) as app:
        page = app.page
        page.goto(f"{app.url}/?sentence={quote_plus(sentences[0])}&max_len={n}")  # the model loads, its cost measured
        page.locator(f".attn-live tbody tr, {HEATMAPS_DRAWN}").first.wait_for()
        box = page.locator("textarea[aria-label^=\"Sentence\"]")
        firsts = []
        for sentence in sentences[1:-1]:
            stop_decoding(page)
            box.fill(sentence)
            page.evaluate(FIRST_TOKEN_TIMER, sentence)
            box.press("Control+Enter")
            page.wait_for_function("window.__first !== null")
            firsts.append(page.evaluate("window.__first"))
        stop_decoding(page)
        box.fill(sentences[-1])
        start = time.perf_counter()
        box.press("Control+Enter")
        estimate = "(none: a small budget)"
        if n >= LARGE_BUDGET:
            told = page.get_by_text("output tokens: at most about").first
            told.wait_for()
            estimate = told.inner_text().split(":")[1].split(" as measured")[0].strip()
        page.locator(".attn-live tbody tr").first.wait_for()
        page.wait_for_function(TRANSLATED, arg=sentences[-1])  # its whole output, the live view gone
        page.locator(HEATMAPS_DRAWN).first.wait_for()
        whole = time.perf_counter() - start
    firsts.sort()
    return {"first token on screen ms (each try)": [round(f) for f in firsts],
            "first token ms (median)": round(firsts[len(firsts) // 2]),
            "whole output: estimate shown before it started": estimate,
            f"whole {n}-token output in the app s (Ctrl+Enter to its heatmaps)": round(whole, 1)}


def streaming(sentences: Sequence[str], tiny: bool, app: bool) -> list[dict[str, Any]]:
    """The section: the model built and imported, the engine beside generate, then (with `app`) the app."""
    n, pairs, tries = (40, 1, 3) if tiny else (400, 5, 6)
    texts = [f"{sentences[i % len(sentences)]} ({i})" for i in range(tries + 2)]  # never a cached translation
    with tempfile.TemporaryDirectory(prefix="attnscope-stream-") as tmp:
        folder = opus_mt_folder(Path(tmp), TINY_MARIAN if tiny else OPUS_MT_EN_DE)
        path = imported(folder)
        rows = [engine_row(load(path), folder, sentences[0], n, pairs)]
        if app:
            rows.append({"what": f"the app, max {n} output tokens", "load average": round(os.getloadavg()[0], 1),
                         **first_tokens(path, texts, n)})
    return rows

"""The head atlas (issue 46, section `atlas` of `python -m attnscope.bench`): computing it, and looking at it.

Computing: the sample's sentences decoded and traced in batches, then every head projected (what the page's
"Map every head" runs), in seconds, with the peak of the process's resident memory above where it started
(sampled every 5 ms), on the shipped model and on a random model of opus-mt-en-de's shape (its outputs, which
never end by themselves, cut at a typical 25 tokens). Looking: the page served by `streamlit run` in headless
Chromium, 200 sentences of the shipped model mapped, then pan (a drag), zoom (the wheel), hover and a switch of
head in the matrix, each timed inside the page from the event dispatched to the next animation frame (so the
drawing is included, Playwright's round trip is not), p95 of 20; the target (50 ms) is for pan, zoom and hover.
The machine's load is printed beside each row.
"""
from __future__ import annotations

import os
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

from attnscope.bench.app_latency import served
from attnscope.bench.explorer_latency import FIND, p95
from attnscope.bench.imported_shapes import TYPICAL, shaped_checkpoint
from attnscope.checkpoints import checkpoint
from attnscope.engine.analysis.atlas import atlas, vectors_each
from attnscope.engine.decoding.translator import Translator

TARGETS = {"shipped seconds": 30, "opus-mt seconds": 180, "look p95 ms": 50, "memory MB": 1024}
LOOKS_JS = """async ([look, n]) => {
  const root = EXPLORER, head = root.querySelector('canvas.atlas-over');
  const matrix = root.querySelector('canvas.atlas-matrix');
  const frame = () => new Promise(r => requestAnimationFrame(() => r()));
  const box = head.getBoundingClientRect(), out = [];
  const at = (i) => ({clientX: box.left + 40 + (i * 37) % (box.width - 80),
    clientY: box.top + 40 + (i * 23) % (box.height - 80)});
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    if (look === 'pan') head.dispatchEvent(new MouseEvent('mousemove', {...at(i), buttons: 1, bubbles: true}));
    else if (look === 'zoom') {
      head.dispatchEvent(new WheelEvent('wheel', {...at(i), deltaY: i % 2 ? 100 : -100, bubbles: true}));
    }
    else if (look === 'hover') head.dispatchEvent(new MouseEvent('mousemove', {...at(i), buttons: 0, bubbles: true}));
    else {
      const d = matrix.dataset, r = matrix.getBoundingClientRect(), step = Number(d.size) + Number(d.gap);
      matrix.dispatchEvent(new MouseEvent('click', {clientX: r.left + Number(d.left) + (i % 2) * step + 5,
        clientY: r.top + Number(d.top) + 5, bubbles: true}));
    }
    await frame();
    out.push(performance.now() - t);
  }
  return out;
}""".replace("EXPLORER", FIND)


def _resident() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@contextmanager
def peak_memory() -> Iterator[dict[str, float]]:
    """The peak resident memory above the start, in MB, sampled every 5 ms while the block runs."""
    out, start, done = {"MB": 0.0}, _resident(), threading.Event()

    def sample() -> None:
        while not done.is_set():
            out["MB"] = max(out["MB"], (_resident() - start) / 2**20)
            time.sleep(0.005)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield out
    finally:
        done.set()
        thread.join()


def compute_row(what: str, tr: Translator, sentences: Sequence[str], max_len: int | None,
                target: float) -> dict[str, Any]:
    """Seconds and peak memory of the atlas of `sentences`: capture and projection."""
    load = os.getloadavg()[0]
    with peak_memory() as memory:
        start = time.perf_counter()
        results = sorted(vectors_each(tr, sentences, max_len=max_len))
        captured = time.perf_counter() - start
        mapped = atlas(results)
        total = time.perf_counter() - start
    heads = sum(m.shape[0] * m.shape[1] for m in mapped.maps.values())
    return {"what": what, "sentences": len(results), "heads": heads, "capture s": round(captured, 2),
            "projection s": round(total - captured, 2), "total s": round(total, 2),
            "peak memory MB": round(memory["MB"]),
            "load before / after": [round(load, 1), round(os.getloadavg()[0], 1)],
            "met": total <= target and memory["MB"] <= TARGETS["memory MB"]}


def looks_row(shipped: Path, n: int, looks: int) -> dict[str, Any]:
    """The page in Chromium: `n` sentences of the shipped model mapped, then each look's p95 over `looks`."""
    load = os.getloadavg()[0]
    with served(shipped) as app:
        page = app.page
        page.goto(f"{app.url}/atlas")
        box = page.locator('input[aria-label^="Sentences (max"]')
        box.fill(str(n))
        box.press("Enter")
        page.get_by_role("button", name=f"for {n} sentences", exact=False).click()
        page.locator('.atsx[data-mode="atlas"] canvas.atlas-head').wait_for()
        page.wait_for_function("() => !document.querySelector('[data-stale=\"true\"]')")
        times = {look: p95(page.evaluate(LOOKS_JS, [look, looks])) for look in ("pan", "zoom", "hover", "head")}
    return {"what": f"the page, {n} sentences of {shipped.name}", **{f"{k} p95 ms": v for k, v in times.items()},
            "load before / after": [round(load, 1), round(os.getloadavg()[0], 1)],
            "met": max(times["pan"], times["zoom"], times["hover"]) <= TARGETS["look p95 ms"]}


def atlas_bench(tr: Translator, shipped: Path, sentences: Sequence[str], tiny: bool, app: bool) -> list[dict[str, Any]]:
    """The section's rows: the model at `shipped` (`tr`) and the opus-mt shape computed, then, with `app`, the
    page's looks."""
    rows = [compute_row(f"{len(sentences)} sentences, {shipped.name}", tr, sentences, None, TARGETS["shipped seconds"])]
    words = sorted({w for s in sentences for w in s.split()})
    with tempfile.TemporaryDirectory(prefix="attnscope-atlas-") as tmp:
        path = shaped_checkpoint("tiny-marian" if tiny else "opus-mt-en-de", Path(tmp), words)
        shaped = Translator(*checkpoint.load(path))
        rows.append(compute_row(f"{len(sentences)} sentences, {path.stem} shape (outputs cut at {TYPICAL} tokens)",
                                shaped, sentences, TYPICAL, TARGETS["opus-mt seconds"]))
    return rows + ([looks_row(shipped, len(sentences), 5 if tiny else 20)] if app else [])

"""App latency in headless Chromium against a real `streamlit run` (section 7 of `python -m attnscope.bench`).

The journeys, against the targets of issues 17 and 42:
- cold start: server process started -> first heatmap drawn (target 8 s);
- sentence submitted (Ctrl+Enter) -> translation shown and every heatmap of the page drawn (target 1 s);
- the Step page: the explorer moved one step -> drawn (50 ms: answered in the page, no server rerun);
- Inside one head: opened -> its sections drawn (1.5 s); another head picked, or the step moved -> drawn (50 ms).
Picks are timed inside the page, from the pick to the next animation frame; "drawn" for a page means the expected
text or the explorer is in the page and Streamlit marks no element stale.
"""
from __future__ import annotations

import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence
from urllib.parse import quote_plus

TARGETS = {"cold start s": 8.0, "sentence to heatmaps s": 1.0, "step click browser ms": 50, "inside open s": 1.5,
           "inside head switch browser ms": 50, "inside step move browser ms": 50}  # picks: answered in the page
NOT_STALE = "document.querySelectorAll('[data-stale=\"true\"]').length === 0"
HEATMAPS_DRAWN = ".atsx canvas.cells"  # the attention explorer has drawn (a locator: it lives in a shadow root)
FIND = ("[...document.querySelectorAll('*')].map(e => e.shadowRoot).filter(Boolean)"  # the explorer, in its shadow root
        ".map(s => s.querySelector('.atsx')).find(Boolean)")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(url: str, server: subprocess.Popen, limit: float = 120) -> None:
    deadline = time.perf_counter() + limit
    while time.perf_counter() < deadline and server.poll() is None:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).read() == b"ok":
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("streamlit did not start")


def _settle(page: Any) -> None:
    page.wait_for_function(NOT_STALE)


# In the page: a pick made on the explorer (inside its shadow root) and timed to the next animation frame, as a user
# sees it: what `explorer.set` changes is drawn in the page, with no server rerun.
PICKS_JS = """async ([picks, gap]) => {
  const root = EXPLORER;
  const frame = () => new Promise(r => requestAnimationFrame(() => r()));
  const out = [];
  for (const pick of picks) {
    const t = performance.now();
    root.explorer.set(pick);
    await frame();
    out.push(performance.now() - t);
    await new Promise(r => setTimeout(r, gap));
  }
  return out;
}""".replace("EXPLORER", FIND)
GAP_MS = 600  # between picks: each lands while the page reruns for the one before (the pick is reported at 0.4 s)


def _picks(page: Any, picks: list[dict[str, int]]) -> list[float]:
    """Seconds from each pick on the explorer to the next frame drawn."""
    return [ms / 1e3 for ms in page.evaluate(PICKS_JS, [picks, GAP_MS])]


def _step_picks(page: Any, url: str, sentence: str, clicks: int, n_steps: int) -> list[float]:
    """The Step page: the explorer moved one step at a time, forward and back."""
    page.goto(f"{url}/step?sentence={quote_plus(sentence)}")
    page.locator(HEATMAPS_DRAWN).first.wait_for()
    _settle(page)
    return _picks(page, [{"step": _bounce(t, n_steps)} for t in range(1, clicks + 1)])


def _inside(page: Any, url: str, sentence: str, changes: int, n_heads: int, n_steps: int) -> dict[str, list[float]]:
    """Inside one head: opened on a translated sentence (to its sections drawn), then the head picked and the step
    moved in turn, each answered in the page."""
    start = time.perf_counter()
    page.goto(f"{url}/inside?sentence={quote_plus(sentence)}")
    page.locator('.atsx[data-mode="inside"]').first.wait_for()
    opened = time.perf_counter() - start
    _settle(page)
    heads = _picks(page, [{"head": (i + 1) % n_heads} for i in range(changes)])
    steps = _picks(page, [{"step": _bounce(i + 1, n_steps)} for i in range(changes)])
    return {"open": [opened], "head": heads, "step": steps}


def _bounce(i: int, n: int) -> int:
    """The i-th position of a walk that goes 0, 1, ..., n - 1 and back again."""
    period = max(1, 2 * (n - 1))
    at = i % period
    return at if at < n else period - at


@dataclass
class Served:
    """A browser page and `streamlit run app.py` serving one checkpoint."""

    page: Any
    url: str
    server: subprocess.Popen
    started: float  # time.perf_counter() when the server process was started


@contextmanager
def served(path: Path, script: Path | None = None) -> Iterator[Served]:
    """`streamlit run app.py` (or `script`) serving checkpoint `path` alone, healthy, and a headless Chromium page."""
    from playwright.sync_api import sync_playwright

    from attnscope.checkpoints.registry import checkout

    root = checkout()
    if not (root / "app.py").is_file():
        raise RuntimeError("the app section serves the checkout's app.py: run it from the source checkout "
                           "(the folder with app.py and checkpoints/)")
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        folder = Path(tmp)
        _place(path, folder / path.name)
        env = dict(os.environ, ATTNSCOPE_CHECKPOINTS=str(folder), ATTNSCOPE_USER_MODELS=tempfile.mkdtemp())
        url = f"http://127.0.0.1:{_free_port()}"
        browser = p.chromium.launch(executable_path=os.environ.get("ATTNSCOPE_CHROMIUM", "/usr/bin/chromium"),
                                    args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(180_000)
        started = time.perf_counter()
        server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(script or root / "app.py"), "--server.port",
                                   url.rsplit(":", 1)[1], "--server.headless", "true", "--browser.gatherUsageStats", "false"],
                                  cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait_healthy(url, server)
            yield Served(page, url, server, started)
        finally:
            browser.close()
            server.terminate()
            server.wait(timeout=30)


def _place(path: Path, target: Path) -> None:
    """The checkpoint served: a hard link where the file system allows (a 3.3B model's is 13 GB), else a copy."""
    try:
        os.link(path, target)
    except OSError:
        shutil.copy(path, target)


@contextmanager
def busy_neighbour(on: bool) -> Iterator[None]:
    """With `on`, one other process keeps a core busy meanwhile (what a user's machine is doing besides)."""
    if not on:
        yield
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()


def app_latency(path: Path, sentences: Sequence[str], clicks: int = 8, neighbour: bool = False) -> dict[str, Any]:
    """The journeys on checkpoint `path` (served alone, with the app's default decoding budget), medians with the
    targets; with `neighbour`, while one other process keeps a core busy."""
    from attnscope.checkpoints import checkpoint
    from attnscope.engine.decoding.translator import Translator

    tr = Translator(*checkpoint.load(path))
    expected = [tr.translate(s, capture=False).text for s in sentences]
    load_before = os.getloadavg()[0]
    with busy_neighbour(neighbour), served(path) as app:
        page, url = app.page, app.url
        page.goto(url)
        page.locator(HEATMAPS_DRAWN).first.wait_for()
        cold = time.perf_counter() - app.started
        _settle(page)
        box = page.locator(f"textarea[aria-label=\"Sentence ({tr.bundle.src_lang})\"]")
        submit = []
        for sentence, text in zip(sentences, expected):
            start = time.perf_counter()
            box.fill(sentence)
            box.press("Control+Enter")
            page.get_by_text(text, exact=False).first.wait_for()
            page.locator(HEATMAPS_DRAWN).first.wait_for()
            _settle(page)
            submit.append(time.perf_counter() - start)
        n_steps = len(tr.translate(sentences[-1]).steps)
        steps = _step_picks(page, url, sentences[-1], clicks, n_steps)
        inside = _inside(page, url, sentences[-1], clicks, tr.model.config.n_heads, n_steps)

    def ms(seconds: list[float]) -> int:
        return round(1e3 * statistics.median(seconds))

    measured = {"cold start s": round(cold, 2), "sentence to heatmaps s": round(statistics.median(submit), 2),
                "step click browser ms": ms(steps),
                "inside open s": round(inside["open"][0], 2), "inside head switch browser ms": ms(inside["head"]),
                "inside step move browser ms": ms(inside["step"])}
    return {**{f"{k} (target {TARGETS[k]})": v for k, v in measured.items()},
            "met": [k for k, v in measured.items() if v <= TARGETS[k]],
            "step clicks": clicks, "sentences": len(submit), "busy neighbour process": neighbour,
            "sentence to heatmaps max s": round(max(submit), 2), "step click browser max ms": round(1e3 * max(steps)),
            "load average (1 min) before / after": [round(load_before, 1), round(os.getloadavg()[0], 1)],
            "cpu cores": os.cpu_count()}

"""App latency in headless Chromium against a real `streamlit run` (section 7 of `python -m attnscope.bench`).

Three journeys, each against the targets of issue 17:
- cold start: server process started -> first heatmap drawn (target 8 s);
- sentence submitted (Ctrl+Enter) -> translation shown and every heatmap of the page drawn (target 1 s);
- one Next click on the Step page -> the new step's figures drawn (targets 150 ms server, 300 ms browser);
- Inside one head: another head picked, or the decoding step moved, -> every panel of the head drawn
  (issue 14: "well under a second"; we hold it to 500 ms in the browser).
"Server" is the browser's rerun request -> the server's script-finished message, both seen on the
websocket (the fragment rerun, without the browser's drawing); "server CPU" is the CPU time the server process used meanwhile,
which a busy shared machine inflates less than wall time. "Drawn" means the expected text is in
the page and Streamlit marks no element stale.
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

TARGETS = {"cold start s": 8.0, "sentence to heatmaps s": 1.0, "step click server ms": 150, "step click browser ms": 300,
           "inside open s": 1.5, "inside head switch browser ms": 500, "inside step move browser ms": 500}
NOT_STALE = "document.querySelectorAll('[data-stale=\"true\"]').length === 0"
HEATMAPS_DRAWN = ".atsx canvas.cells"  # the attention explorer has drawn (a locator: it lives in a shadow root)
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc); 0 where unavailable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


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


def _websocket_times(page: Any) -> tuple[list[float], list[float]]:
    """Times the browser sent a message (e.g. a click's rerun request) and the server reported a finished run."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    sent: list[float] = []
    finished: list[float] = []

    def watch(ws: Any) -> None:
        def received(payload: Any) -> None:
            if not isinstance(payload, (bytes, bytearray)):
                return
            if ForwardMsg.FromString(bytes(payload)).WhichOneof("type") == "script_finished":
                finished.append(time.perf_counter())
        ws.on("framesent", lambda payload: sent.append(time.perf_counter()))
        ws.on("framereceived", received)

    page.on("websocket", watch)
    return sent, finished


def _server_seconds(page: Any, sent: list[float], finished: list[float], asked: int, seen: int) -> float:
    """The rerun request sent as message `asked` -> the first run finished after `seen` had (waits for it)."""
    while len(finished) == seen:
        page.wait_for_timeout(5)
    return finished[seen] - sent[asked]


def _step_clicks(page: Any, url: str, sentence: str, clicks: int, server_pid: int) -> dict[str, list[float]]:
    sent, finished = _websocket_times(page)
    page.goto(f"{url}/step?sentence={quote_plus(sentence)}")
    page.get_by_text("Step 0: chose").first.wait_for()
    _settle(page)
    out: dict[str, list[float]] = {"server": [], "browser": [], "cpu": []}
    for t in range(1, clicks + 1):
        seen, cpu = len(finished), _cpu_seconds(server_pid)
        start = time.perf_counter()
        asked = len(sent)
        page.get_by_role("button", name="Next ▶").click()
        page.get_by_text(f"Step {t}: chose").first.wait_for()
        _settle(page)
        out["browser"].append(time.perf_counter() - start)
        out["server"].append(_server_seconds(page, sent, finished, asked, seen))
        out["cpu"].append(_cpu_seconds(server_pid) - cpu)
    return out


def _inside_changes(page: Any, url: str, sentence: str, changes: int, n_heads: int, n_steps: int) -> dict[str, list[float]]:
    """Inside one head: open it on a translated sentence, then alternately pick the next head and move the step
    (browser seconds, and the server's part of each step move: its rerun request -> its run finished)."""
    sent, finished = _websocket_times(page)
    start = time.perf_counter()
    page.goto(f"{url}/inside?sentence={quote_plus(sentence)}")
    page.get_by_text("Query and keys of head 0", exact=False).first.wait_for()
    _settle(page)
    main = page.get_by_test_id("stMain")
    out: dict[str, list[float]] = {"open": [time.perf_counter() - start], "head": [], "step": [], "step server": []}
    step, direction = 0, 1
    for i in range(changes):
        head = (i + 1) % n_heads
        start = time.perf_counter()
        main.get_by_role("combobox", name="Head").click()
        page.get_by_role("option", name=f"head {head}", exact=True).click()
        page.get_by_text(f"Query and keys of head {head}", exact=False).first.wait_for()
        _settle(page)
        out["head"].append(time.perf_counter() - start)
        if not 0 <= step + direction < n_steps:
            direction = -direction
        step += direction
        slider = page.get_by_role("slider", name="Decoding step")
        slider.focus()
        seen, asked = len(finished), len(sent)
        start = time.perf_counter()
        slider.press("ArrowRight" if direction > 0 else "ArrowLeft")
        page.get_by_text(f"Step {step}:", exact=True).first.wait_for()
        _settle(page)
        out["step"].append(time.perf_counter() - start)
        out["step server"].append(_server_seconds(page, sent, finished, asked, seen))
    return out


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
    folder = Path(tempfile.mkdtemp())
    shutil.copy(path, folder / path.name)
    env = dict(os.environ, ATTNSCOPE_CHECKPOINTS=str(folder), ATTNSCOPE_USER_MODELS=tempfile.mkdtemp())
    url = f"http://127.0.0.1:{_free_port()}"
    with sync_playwright() as p:
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
        page, url, server = app.page, app.url, app.server
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
        steps = _step_clicks(page, url, sentences[-1], clicks, server.pid)
        n_steps = len(tr.translate(sentences[-1]).steps)
        inside = _inside_changes(page, url, sentences[-1], clicks, tr.model.config.n_heads, n_steps)

    def ms(seconds: list[float]) -> int:
        return round(1e3 * statistics.median(seconds))

    measured = {"cold start s": round(cold, 2), "sentence to heatmaps s": round(statistics.median(submit), 2),
                "step click server ms": ms(steps["server"]), "step click browser ms": ms(steps["browser"]),
                "inside open s": round(inside["open"][0], 2), "inside head switch browser ms": ms(inside["head"]),
                "inside step move browser ms": ms(inside["step"])}
    return {**{f"{k} (target {TARGETS[k]})": v for k, v in measured.items()},
            "met": [k for k, v in measured.items() if v <= TARGETS[k]],
            "step click server CPU ms": ms(steps["cpu"]), "inside step move server ms": ms(inside["step server"]),
            "step clicks": clicks, "sentences": len(submit), "busy neighbour process": neighbour,
            "sentence to heatmaps max s": round(max(submit), 2), "step click browser max ms": round(1e3 * max(steps["browser"])),
            "load average (1 min) before / after": [round(load_before, 1), round(os.getloadavg()[0], 1)],
            "cpu cores": os.cpu_count()}

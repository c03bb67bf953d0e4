"""The app server's resident memory over a day of sessions (issue 44): 20 sessions, each a new browser context that
opens a long sentence with a budget of 400 output tokens on opus-mt-en-de's shape, waits for the whole output and its
heatmaps, and leaves. Target: the server's resident set after the 20th at most 300 MB above the start (the start: the
first session's output shown, the model loaded). Resident set from /proc (app_memory.resident_mb); the results' budget
(ui/cache.py) is printed with the rows.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import quote_plus

from attnscope.bench.app_latency import HEATMAPS_DRAWN, served
from attnscope.bench.app_memory import resident_mb
from attnscope.bench.imported_shapes import shaped_checkpoint
from attnscope.bench.measure import SENTENCES

TARGET_MB = 300  # growth allowed over the 20 sessions


def one_session(app: Any, sentence: str, n: int) -> None:
    """A user in a browser context of their own: `sentence` with at most `n` output tokens, to its heatmaps."""
    context = app.page.context.browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.set_default_timeout(600_000)
        page.goto(f"{app.url}/?sentence={quote_plus(sentence)}&max_len={n}")
        page.locator(HEATMAPS_DRAWN).first.wait_for()
        page.locator(".attn-live").wait_for(state="detached")
    finally:
        context.close()


def sessions_memory(sentences: Sequence[str], tiny: bool, app: bool) -> list[dict[str, Any]]:
    """The server's resident set when it started, after the first session, then every 5 sessions to the 20th."""
    if not app:
        return [{"skipped": "this section runs the app (section app skipped)"}]
    name, n, sessions = ("tiny-marian", 40, 3) if tiny else ("opus-mt-en-de", 400, 20)
    words = " ".join(SENTENCES).replace(".", " .").split()
    path = shaped_checkpoint(name, Path(tempfile.mkdtemp()), words)
    rows: list[dict[str, Any]] = []
    with served(path) as served_app:
        rows.append({"after": "server started", **resident_mb(served_app.server.pid)})
        for i in range(sessions):
            one_session(served_app, f"{sentences[i % len(sentences)]} ({i})", n)
            if i == 0 or (i + 1) % 5 == 0 or i + 1 == sessions:
                rows.append({"after": f"{i + 1} sessions of {n}-token outputs", **resident_mb(served_app.server.pid)})
    start = rows[1]["VmRSS"]
    for row in rows[1:]:
        row["above the start MB"] = round(row["VmRSS"] - start, 1)
    met = rows[-1]["above the start MB"] <= TARGET_MB
    rows[-1]["target"] = f"<= {TARGET_MB} MB above the start: {'met' if met else 'MISSED'}"
    load = round(os.getloadavg()[0], 2)
    budget = os.environ.get("ATTNSCOPE_RESULTS_MB", "default")
    return [row | {"load average (1 min)": load, "results budget (ATTNSCOPE_RESULTS_MB)": budget} for row in rows]

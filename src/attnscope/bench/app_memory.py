"""Resident memory of the app server (section 12 of `python -m attnscope.bench`), along one user's journey.

A real `streamlit run app.py` serves the checkpoint alone; headless Chromium opens the app on a sentence (its
first translation), then clicks through Step, Heads, Inside and Attribution in the sidebar, and Attribution's
"Source tokens by method" tab (its first view computes only the source/prefix split), in one session, as
a user would. When a page has finished drawing, the server's resident set is read from /proc/<pid>/status
(VmRSS, with its anonymous and file-backed parts). Targets from issue 24: 300 MB after the first translation,
380 MB after the four pages. Then the Translate page opens a long sentence with each of its cross-attention heads
selected in turn (what clicking through the sidebar's heads does to the figure caches). Last, the floor: a fresh
server runs floor_app.py, which loads the same checkpoint as the app does and shows the first sentence's translation
as text and nothing else, then one small table as well (what any page with an `st.dataframe` adds).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

from attnscope.bench.app_latency import HEATMAPS_DRAWN, NOT_STALE, served
from attnscope.bench.measure import status_kb

# (what is clicked: a sidebar link or a page's tab, its name, a text the page then shows)
JOURNEY = (("link", "Step through decoding", "Step 0: chose"), ("link", "Heads & layers", "Head statistics"),
           ("link", "Inside one head", "Query and keys of head 0"), ("link", "Attribution", "rolled out over layers"),
           ("tab", "Source tokens by method", "Integrated gradients used"))


def resident_mb(pid: int) -> dict[str, float]:
    """VmRSS and its anonymous and file-backed parts of process `pid`, in MB (Linux)."""
    return {key: round(status_kb(pid, key) / 1024, 1) for key in ("VmRSS", "RssAnon", "RssFile")}


class Runs:
    """Counts the app's finished script runs, read from the websocket (a page is drawn when its run has finished)."""

    def __init__(self, page: Any) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        self.finished = 0

        def received(payload: Any) -> None:
            if isinstance(payload, (bytes, bytearray)):
                msg = ForwardMsg.FromString(bytes(payload))
                if msg.WhichOneof("type") == "script_finished" and msg.script_finished == ForwardMsg.FINISHED_SUCCESSFULLY:
                    self.finished += 1

        page.on("websocket", lambda ws: ws.on("framereceived", received))

    def wait(self, page: Any, seen: int, text: str) -> None:
        """Until a run that started after `seen` runs has finished and `text` shows, nothing stale."""
        page.get_by_text(text, exact=False).first.wait_for()
        while self.finished <= seen:
            page.wait_for_timeout(20)
        page.wait_for_function(NOT_STALE)


def app_memory(path: Path, sentence: str, long_sentence: str, n_layers: int, n_heads: int) -> list[dict[str, Any]]:
    """The server's resident set after it started, after the first translation, after each page and after
    every head (`n_layers` × `n_heads`) of `long_sentence`'s cross-attention was shown in turn."""
    rows: list[dict[str, Any]] = []
    with served(path) as app:
        page, server, runs = app.page, app.server, Runs(app.page)
        rows.append({"after": "server started (no session yet)", **resident_mb(server.pid)})
        page.goto(f"{app.url}/?sentence={quote_plus(sentence)}")
        runs.wait(page, 0, "Translation (")
        page.locator(HEATMAPS_DRAWN).first.wait_for()
        rows.append({"after": "the first translation (Translate page)", **resident_mb(server.pid)})
        for role, link, text in JOURNEY:
            seen = runs.finished
            page.get_by_role(role, name=link).click()
            runs.wait(page, seen, text)
            rows.append({"after": f"+ {link}", **resident_mb(server.pid)})
        heads = [(layer, head) for layer in range(n_layers) for head in range(n_heads)]
        for layer, head in heads:
            seen = runs.finished
            page.goto(f"{app.url}/?sentence={quote_plus(long_sentence)}&kind=cross&layer={layer}&head={head}")
            runs.wait(page, seen, "Translation (")
            page.locator(HEATMAPS_DRAWN).first.wait_for()
        rows.append({"after": f"+ a {len(long_sentence.split())}-word sentence, {len(heads)} cross-attention heads shown "
                              "in turn (Translate)", **resident_mb(server.pid)})
    for before, row in zip(rows, rows[1:]):
        row["grew"] = round(row["VmRSS"] - before["VmRSS"], 1)
    rows += floor(path, sentence)
    load = round(os.getloadavg()[0], 2)
    return [row | {"load average (1 min)": load} for row in rows]


def floor(path: Path, sentence: str) -> list[dict[str, Any]]:
    """The server's resident set with floor_app.py showing `sentence`'s translation, then also one small table."""
    rows: list[dict[str, Any]] = []
    with served(path, Path(__file__).with_name("floor_app.py")) as app:
        page, server, runs = app.page, app.server, Runs(app.page)
        for query, label in (("", "translation shown as text"), ("&table=1", "+ one 3-row st.dataframe")):
            seen = runs.finished
            page.goto(f"{app.url}/?sentence={quote_plus(sentence)}{query}")
            runs.wait(page, seen, "floor drawn")
            rows.append({"after": f"floor (floor_app.py, a fresh server): {label}", **resident_mb(server.pid)})
    return rows

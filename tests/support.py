"""Helpers shared by the tests: the committed toy checkpoint, threads that report their errors,
waiting for an event with a generous ceiling, and reading app output.

The toy checkpoint (tests/fixtures/toy-reverse.safetensors) is a tiny model trained to reverse
letter strings. The app and browser tests serve it instead of training one in every session.
Regenerate it after a change to the checkpoint format or the model (about a minute):

    PYTHONPATH=src python -m tests.support

tests/checkpoints/test_toy_checkpoint.py checks that the committed file still loads and reverses.
"""
from __future__ import annotations

import base64
import json
import logging
import re
import struct
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TOY_CHECKPOINT = ROOT / "tests" / "fixtures" / "toy-reverse.safetensors"
# How the committed toy checkpoint was trained (TrainConfig fields besides out_dir).
TOY_TRAINING = dict(task="reverse", preset="toy", toy_size=2000, max_tokens=600, lr=3e-3, warmup=100, epochs=24,
                    threads=1, src_lang="en", tgt_lang="en", name="toy-reverse", half=True, device="cpu", precision="fp32")
CEILING = 600.0  # seconds: far longer than any wait takes even on a loaded machine; only a hang reaches it


def train_toy_checkpoint(target: Path = TOY_CHECKPOINT) -> Path:
    """Train the toy reverse model (as TOY_TRAINING says) and write its best checkpoint to `target`."""
    from attnscope.training.config import TrainConfig
    from attnscope.training.loop import train

    with tempfile.TemporaryDirectory() as run:
        best = train(TrainConfig(out_dir=run, **TOY_TRAINING))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(best.read_bytes())
    return target


def copy_toy_checkpoint(folder: Path, name: str = "toy-reverse") -> Path:
    """The committed toy checkpoint copied into `folder` as `<name>.safetensors`."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{name}.safetensors"
    target.write_bytes(TOY_CHECKPOINT.read_bytes())
    return target


def distinct_toy_checkpoint(folder: Path, name: str) -> Path:
    """The toy model as `<name>.safetensors` with `name` in its summary: the same weights in a file whose
    bytes (and SHA-256) differ from the committed one's, as a user's own upload would."""
    from safetensors.torch import save

    tensors, meta = tensors_and_meta(TOY_CHECKPOINT)
    summary = json.loads(meta["summary"]) | {"name": name}
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{name}.safetensors"
    target.write_bytes(save(tensors, metadata=meta | {"summary": json.dumps(summary)}))
    return target


def log_problems(records: list[logging.LogRecord]) -> list[str]:
    """Logged tracebacks and Arrow conversion failures, one line each."""
    def line(r: logging.LogRecord) -> str:
        error = f" ({type(r.exc_info[1]).__name__}: {r.exc_info[1]})" if r.exc_info else ""
        return f"{r.name}: {r.getMessage()[:200]}{error}"
    return [line(r) for r in records if r.exc_info or "Traceback" in r.getMessage() or "Arrow" in r.getMessage()]


def run_threads(work: Callable[..., Any], args: Sequence[tuple]) -> None:
    """Run work(*a) in one thread per entry of `args`, wait for all, and re-raise the first error
    any of them raised (an exception in a plain thread is only printed, and the test would pass)."""
    errors: list[BaseException] = []

    def guarded(*a: Any) -> None:
        try:
            work(*a)
        except BaseException as err:  # noqa: BLE001 - re-raised in the test's thread below
            errors.append(err)

    threads = [threading.Thread(target=guarded, args=a) for a in args]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def wait_for(condition: Callable[[], bool], what: str, ceiling: float = CEILING) -> None:
    """Poll `condition` until it holds; fail naming `what` only if it has not after `ceiling` seconds.
    The ceiling guards against a hang: tests must never rely on how fast something happens."""
    deadline = time.monotonic() + ceiling
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {ceiling:.0f} s waiting for {what}")
        time.sleep(0.05)


def shown(element: object) -> str:
    """What a message element displays: its markdown body with backslash escapes removed."""
    return re.sub(r"\\(.)", r"\1", str(getattr(element, "value", element)))


def shown_deltas(text: str) -> list[float]:
    """Every "max |Δ| = 4.7e-10" in a page's text: the Inside page's two recomputation gaps, which are float32
    rounding (zero on one CPU, ~1e-9 on another, by the order of the operations), so tests bound them."""
    return [float(d) for d in re.findall(r"max \|Δ\| = ([0-9.]+e[+-][0-9]+)", text)]


def unexplained_columns(table: Any) -> list[str]:
    """The columns of an AppTest dataframe that carry no help text (shown on hover in the browser)."""
    config = json.loads(table.proto.columns or "{}")
    shown_columns = [c for c in table.value.columns if c != "_index"]
    return [c for c in shown_columns if not config.get(c, {}).get("help")]


def tensors_and_meta(path: Path) -> tuple[dict, dict[str, str]]:
    """Every tensor and the metadata of a safetensors file (to build damaged copies in tests)."""
    from safetensors import safe_open
    with safe_open(str(path), "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, f.metadata()


if __name__ == "__main__":
    print(train_toy_checkpoint())


def png_pixels(data: bytes) -> list[str]:
    """The pixels of an 8-bit RGB PNG one pixel high (viz/inside.py's bands), as #rrggbb: read here with the
    standard library, independently of the code that wrote it."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, at = {}, 8
    while at < len(data):
        (size,), tag = struct.unpack(">I", data[at:at + 4]), data[at + 4:at + 8]
        chunks[tag] = chunks.get(tag, b"") + data[at + 8:at + 8 + size]
        at += 12 + size
    width, height, depth, colour = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert (height, depth, colour) == (1, 8, 2)
    raw = zlib.decompress(chunks[b"IDAT"])
    assert raw[0] == 0 and len(raw) == 1 + 3 * width  # one row, no filter
    return ["#" + raw[1 + 3 * i:4 + 3 * i].hex() for i in range(width)]


def painted(style: str) -> list[str]:
    """The colours an inline style paints: its #rrggbb colours, or the pixels of its PNG data image."""
    image = re.search(r"data:image/png;base64,([A-Za-z0-9+/=]+)", style)
    return png_pixels(base64.b64decode(image[1])) if image else re.findall(r"#[0-9a-f]{6}", style)


@dataclass
class HtmlRow:
    """One table row of an HTML view: its label (the row header), its cells' hover texts, visible
    texts and inline styles, and any text after the cells (e.g. a row sum)."""

    label: str = ""
    hovers: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    styles: list[str] = field(default_factory=list)
    tail: str = ""

    def painted(self) -> list[str]:
        """The colours the row paints, cell by cell and stripe by stripe (a band's image, pixel by pixel)."""
        return [colour for style in self.styles for colour in painted(style)]

    def values(self) -> np.ndarray:
        """The number each cell's hover ends with ("dim 3: -0.1234" -> -0.1234); -inf for "−∞"."""
        return np.array([-np.inf if "−∞" in h else float(re.search(r"(-?[\d.]+(?:e[+-]?\d+)?)$", h)[1]) for h in self.hovers])


class HtmlView:
    """What one of viz/html.py's views shows, read back with the standard library's HTML parser:
    its title, each hover text (`title` attributes, in order), the visible text, and its table rows."""

    def __init__(self, markup: str) -> None:
        from html.parser import HTMLParser

        self.title, self.hovers, self.texts = "", [], []
        self.rows: list[HtmlRow] = []
        view = self

        class Reader(HTMLParser):
            in_title = False
            where = ""  # "label", "cell" or "tail" while inside a row's th.r, td or th.x

            def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
                found = dict(attrs)
                self.in_title = found.get("class") == "t"
                if "title" in found and tag != "div":
                    view.hovers.append(found["title"] or "")
                if tag == "tr":
                    view.rows.append(HtmlRow())
                elif tag == "th" and view.rows:
                    self.where = {"r": "label", "x": "tail"}.get(found.get("class") or "", "")
                elif tag == "td" and view.rows:
                    self.where = "cell"
                    row = view.rows[-1]
                    row.hovers.append(found.get("title") or "")
                    row.texts.append("")
                    row.styles.append(found.get("style") or "")

            def handle_data(self, data: str) -> None:
                if self.in_title:
                    view.title += data
                view.texts.append(data)
                if self.where == "label":
                    view.rows[-1].label += data
                elif self.where == "tail":
                    view.rows[-1].tail += data
                elif self.where == "cell":
                    view.rows[-1].texts[-1] += data

            def handle_endtag(self, tag: str) -> None:
                self.in_title = False
                if tag in ("td", "th"):
                    self.where = ""

        Reader().feed(markup)

    def body_rows(self) -> list[HtmlRow]:
        """The rows that have cells (not the column headers)."""
        return [row for row in self.rows if row.hovers]

    def matrix(self) -> np.ndarray:
        """Every body row's cell values as one [rows, cells] array."""
        return np.stack([row.values() for row in self.body_rows()])

    def cells(self) -> dict[tuple[str, str], float | None]:
        """(row, column) -> value of every table cell; None for masked cells."""
        out: dict[tuple[str, str], float | None] = {}
        for hover in self.hovers:
            match = re.fullmatch(r"(.+) → (.+): (?:masked|\S+ (-?[\d.]+))", hover)
            if match:
                out[(match[1], match[2])] = None if match[3] is None else float(match[3])
        return out


def html_views(app: Any) -> dict[str, HtmlView]:
    """An AppTest run's st.html views (viz/html.py's, not the translation headline or notes) by title."""
    views = [HtmlView(element.value) for element in app.get("html") if 'class="attn-view"' in element.value]
    return {view.title: view for view in views}


@dataclass(frozen=True)
class TranslationBlock:
    """The headline a page shows its translation in (ui/translation_view.py), read back from its HTML."""

    source: str  # the sentence it is the translation of
    text: str  # the translation
    markup: str

    @staticmethod
    def of(markup: str) -> TranslationBlock | None:
        import html
        from urllib.parse import unquote

        source = re.search(r'class="attn-translation" data-source="([^"]*)"', markup)
        text = re.search(r'<div class="txt"[^>]*>(.*?)</div>', markup)
        return None if not (source and text) else TranslationBlock(unquote(source[1]), html.unescape(text[1]), markup)


def translation_shown(app: Any) -> TranslationBlock | None:
    """The translation headline of an AppTest run, or None when the page shows none."""
    found = [TranslationBlock.of(element.value) for element in app.get("html")]
    return next((block for block in found if block is not None), None)


SNAKE_CASE = re.compile(r"^[a-z0-9]+(_[a-z0-9]+)+$")


def readable_tables(app: Any) -> list[dict[str, str]]:
    """Every table the run shows, as {column: help}; fails on a snake_case name or a column without help."""
    found = []
    for frame in app.dataframe:
        config = json.loads(frame.proto.columns)
        helps = {str(c): config.get(str(c), {}).get("help", "") for c in frame.value.columns}
        assert not [c for c in helps if SNAKE_CASE.match(c)], f"raw column names shown: {list(helps)}"
        assert all(helps.values()), f"columns without help: {[c for c, h in helps.items() if not h]}"
        found.append(helps)
    return found


@dataclass(frozen=True)
class Explored:
    """What an attention explorer on a page was sent: its header and, per kind, the weights of its present layers
    ([layer, head, query, key]; decoder self-attention with zeros above the diagonal), read back independently of
    the code that wrote them."""

    header: dict
    arrays: dict

    @property
    def selection(self) -> dict:
        return self.header["selection"]


def read_explorer(data: bytes) -> Explored:
    """viz/explorer.py's (or viz/inside.py's) payload decoded by its documented layout."""
    assert data[:4] == b"ATSX"
    _, length = struct.unpack("<II", data[4:12])
    header = json.loads(data[12:12 + length].decode("utf-8"))
    floats = np.frombuffer(data[(12 + length + 3) // 4 * 4:], dtype="<f4")
    if header["mode"] == "inside":  # viz/inside.py's: every array by name, [offset, shape]
        return Explored(header, {name: floats[at:at + int(np.prod(shape))].reshape(shape)
                                 for name, (at, shape) in header["arrays"].items()})
    arrays = {}
    for kind, info in header["kinds"].items():
        n, h, q, k = len(info["layers"]), info["heads"], info["queries"], info["keys"]
        if info["lower"]:
            per = q * (q + 1) // 2
            full = np.zeros((n, h, q, k), dtype=np.float32)
            rows, cols = np.tril_indices(q)
            full[:, :, rows, cols] = floats[info["offset"]:info["offset"] + n * h * per].reshape(n, h, per)
        else:
            full = floats[info["offset"]:info["offset"] + n * h * q * k].reshape(n, h, q, k)
        arrays[kind] = full
    return Explored(header, arrays)


def explorers(app: Any) -> list[Explored]:
    """The attention explorers an AppTest run mounted, in page order."""
    return [read_explorer(e.proto.bytes) for e in app.get("bidi_component") if e.proto.component_name == "attnscope_explorer"]

"""Helpers shared by the tests: the app's pages (from its one list), the committed toy checkpoint, threads that
report their errors, waiting for an event with a generous ceiling, and reading app output.

The toy checkpoint (tests/fixtures/toy-reverse.safetensors) is a tiny model trained to reverse
letter strings. The app and browser tests serve it instead of training one in every session.
Regenerate it after a change to the checkpoint format or the model (about a minute):

    PYTHONPATH=src python -m tests.support

tests/checkpoints/test_toy_checkpoint.py checks that the committed file still loads and reverses.
"""
from __future__ import annotations

import json
import logging
import re
import struct
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TOY_CHECKPOINT = ROOT / "tests" / "fixtures" / "toy-reverse.safetensors"
# How the committed toy checkpoint was trained (TrainConfig fields besides out_dir).
TOY_TRAINING = dict(task="reverse", preset="toy", toy_size=2000, max_tokens=600, lr=3e-3, warmup=100, epochs=24,
                    threads=1, src_lang="en", tgt_lang="en", name="toy-reverse", half=True, device="cpu", precision="fp32")
CEILING = 600.0  # seconds: far longer than any wait takes even on a loaded machine; only a hang reaches it


def page_script(title: str) -> str:
    """The script of the app's page titled `title`, read from the app's one page list (the entries
    the page scripts declare, as ui/navigation.py reads them)."""
    from attnscope.ui.navigation import script

    return script(title)


def page_scripts(leave_out: Sequence[str] = ()) -> tuple[str, ...]:
    """Every page's script in the menu's order (ui/navigation.py), but those titled in `leave_out`."""
    from attnscope.ui.navigation import specs

    unknown = set(leave_out) - {spec.title for spec in specs()}
    assert not unknown, f"no such pages: {unknown}"
    return tuple(spec.script for spec in specs() if spec.title not in leave_out)


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

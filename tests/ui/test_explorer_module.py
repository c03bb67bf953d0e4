"""The explorer's JavaScript parts, joined as ui/explorer.py joins them, parse as one ES module. Each part is written
on its own; two parts that declare the same top-level name (the atlas's and the base's colour ramps did) make the
whole component fail in the browser with a SyntaxError, which only a browser test would otherwise show, by hanging."""
from __future__ import annotations

import subprocess
from importlib.resources import files
from pathlib import Path

import playwright

from attnscope.ui.explorer import JS_PARTS
from tests.support import CEILING

NODE = Path(playwright.__file__).parent / "driver" / "node"  # the Node.js that Playwright ships and runs itself


def check(source: str, tmp_path: Path) -> subprocess.CompletedProcess:
    module = tmp_path / "explorer.mjs"
    module.write_text(source, "utf-8")
    return subprocess.run([str(NODE), "--check", str(module)], capture_output=True, text=True, timeout=CEILING)


def test_the_parts_join_into_one_module_that_parses(tmp_path: Path) -> None:
    assets = files("attnscope.ui") / "assets" / "explorer"
    joined = "\n".join((assets / part).read_text("utf-8") for part in JS_PARTS)
    done = check(joined, tmp_path)
    assert done.returncode == 0, done.stderr


def test_a_name_declared_by_two_parts_is_caught(tmp_path: Path) -> None:
    done = check("function ramp(stops, t) { return t; }\nfunction ramp(t) { return t; }\n", tmp_path)
    assert done.returncode != 0 and "already been declared" in done.stderr

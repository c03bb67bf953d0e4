"""The design's import rules, checked from the source text (ast): which part may import which.

model < records < checkpoints < engine < training; records (captured attention as numpy data) import no torch
and nothing above the model; viz draws records and engine data types only; only ui/, pages/ and
app.py know Streamlit (and the bench's served floor app, which nothing imports); bench measures everything
and nothing imports it but the command line; cli (one module per command) may use every part but the app's
ui/, and only the entry points (attnscope/__main__.py, attnscope/bench/__main__.py) import it; no two packages
import each other, directly or around a loop. Pages and app.py are thin: from attnscope they import only
attnscope.ui, which does the work behind their widgets. The app (app.py, pages/, ui/) uses only Streamlit's
public API: no private names (`st._x`, `from streamlit import _x`) and no runtime/server internals, so an
upgrade cannot break it silently. Parameter names are spelled only in model/parameters.py, and every importer
makes its model through the one assemble step (checkpoints/importers/assemble.py). Hook points are named only in
model/hooks.py's table, and nothing hooks the model but through them (the recorder of any torch model excepted).
The session's state
(st.session_state) is read and written in ui/state.py only, where each key is spelled once. No module passes 300
lines.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "attnscope"

PARTS = ("model", "records", "checkpoints", "engine", "training", "viz", "ui", "bench", "cli")
# Run as programs (`python -m ...`), never imported: they may import the command line, and close no loop.
ENTRY_POINTS = {"attnscope.__main__", "attnscope.bench.__main__"}
# Streamlit scripts the benchmarks serve (`streamlit run`) to measure against the app, never imported.
SERVED = {"attnscope.bench.floor_app"}
# part -> (parts of attnscope it must not import, the rule in words)
FORBIDDEN = {
    "model": ({"records", "checkpoints", "engine", "training", "viz", "ui"}, "the model knows nothing of recording"),
    "records": ({"checkpoints", "engine", "training", "viz", "ui"}, "records are plain data that the engine writes"),
    "checkpoints": ({"engine", "training", "viz", "ui"}, "checkpoints know only the model"),
    "engine": ({"training", "viz", "ui"}, "the engine knows no training loop and no screen"),
    "training": ({"viz", "ui"}, "one training loop, no UI inside"),
    "cli": ({"ui"}, "the command line runs the library, not the app"),
}
# Modules of plain data (no torch) that figure builders may draw from.
ENGINE_DATA_TYPES = {"attnscope.records", "attnscope.records.attention", "attnscope.records.forward",
                     "attnscope.engine.decoding.beam_result", "attnscope.engine.analysis.alignment",
                     "attnscope.engine.inside.head_view", "attnscope.engine.inside.offsets"}
# What those may import in turn (torch-free too): the attention vocabulary, token conventions, the config, the
# parser of JSON from files (a nesting limit on json.loads), and a record file's size limits with the memory budget
# they are checked against.
PLAIN_DATA = ENGINE_DATA_TYPES | {"attnscope.model.kinds", "attnscope.model.tokenization", "attnscope.model.config",
                                  "attnscope.model.untrusted", "attnscope.records.npz_limits", "attnscope.model.budget"}
SCREEN = {"streamlit"}
NOT_IN_FIGURES = {"streamlit", "torch"}


def imports(source: str, module: str, known: set[str] = frozenset()) -> set[str]:
    """Every module `source` imports, also inside functions; `from x import y` is x.y when that is a
    module in `known`, else x."""
    found: set[str] = set()
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names)
    return found


def part_of(module: str) -> str:
    """The part of attnscope a module belongs to ('' for the package's own __init__/__main__)."""
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 and pieces[1] in PARTS else ""


def top(module: str) -> str:
    return module.split(".")[0]


def violations(sources: dict[str, str]) -> list[str]:
    """Broken rules in `sources` (module name -> code) of attnscope, one sentence each."""
    found = []
    graph: dict[str, set[str]] = {}
    for module, source in sorted(sources.items()):
        names = imports(source, module, set(sources))
        ours = {n for n in names if top(n) == "attnscope"}
        part = part_of(module)
        if module not in ENTRY_POINTS:
            graph.setdefault(part, set()).update(part_of(n) for n in ours if part_of(n) != part)
        banned, rule = FORBIDDEN.get(part, (set(), ""))
        found += [f"{module} imports {n}: {rule}" for n in sorted(ours) if part_of(n) in banned]
        if part not in ("bench", "cli"):
            found += [f"{module} imports {n}: the benchmarks measure the package, nothing in it needs them"
                      for n in sorted(ours) if part_of(n) == "bench"]
        found += [f"{module} imports {n}: a served script runs under `streamlit run`, nothing imports it"
                  for n in sorted(ours & SERVED)]
        if part != "cli" and module not in ENTRY_POINTS:
            found += [f"{module} imports {n}: only the entry points run the command line"
                      for n in sorted(ours) if part_of(n) == "cli"]
        if part == "bench" and module not in SERVED:  # it reads the app's websocket messages (streamlit.proto) but draws nothing
            found += [f"{module} imports {n}: the benchmarks draw no screen" for n in sorted(names)
                      if top(n) in SCREEN and not n.startswith("streamlit.proto")]
        elif part not in ("ui", "bench"):  # a served script is a Streamlit app of its own, as app.py is
            found += [f"{module} imports {n}: the core knows no screen" for n in sorted(names) if top(n) in SCREEN]
        if part == "viz" or module in PLAIN_DATA:
            allowed = ENGINE_DATA_TYPES if part == "viz" else PLAIN_DATA
            found += [f"{module} imports {n}: figures are pure" for n in sorted(names) if top(n) in NOT_IN_FIGURES]
            found += [f"{module} imports {n}: figures draw engine data types only ({', '.join(sorted(allowed))})"
                      for n in sorted(ours) if part_of(n) != "viz" and n not in allowed]
    found += [f"import cycle between packages: {' -> '.join(c)}" for c in cycles(graph)]
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One path per loop in the package graph (depth-first search; '' is attnscope itself)."""
    found, done, path = [], set(), []

    def visit(node: str) -> None:
        if node in path:
            found.append([n or "attnscope" for n in path[path.index(node):] + [node]])
            return
        if node in done:
            return
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            visit(nxt)
        path.pop()
        done.add(node)

    for start in sorted(graph):
        visit(start)
    return found


def package_sources() -> dict[str, str]:
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path.read_text()
    return out


# Streamlit modules that are its machinery, not its API (st.* and the documented submodules are).
STREAMLIT_INTERNALS = ("streamlit.runtime", "streamlit.web", "streamlit.elements", "streamlit.proto")


def _internal(module: str) -> bool:
    return module.startswith(STREAMLIT_INTERNALS) or any(p.startswith("_") for p in module.split("."))


def _type_only(tree: ast.AST) -> set[ast.AST]:
    """Nodes under `if TYPE_CHECKING:`: names for annotations (e.g. st.file_uploader's documented
    UploadedFile), never run, so they cannot break the app at run time."""
    return {n for node in ast.walk(tree) if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING")
            for stmt in node.body for n in ast.walk(stmt)}


def private_streamlit(source: str) -> list[str]:
    """Uses of Streamlit's private API in `source`: internal modules imported, or a name starting with
    `_` imported from streamlit or read from anything reached through a streamlit import."""
    tree = ast.parse(source)
    found, aliases, type_only = [], set(), _type_only(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in (a for a in node.names if top(a.name) == "streamlit"):
                aliases.add((alias.asname or alias.name).split(".")[0])
                if _internal(alias.name) and node not in type_only:
                    found.append(f"import {alias.name} (line {node.lineno})")
        elif isinstance(node, ast.ImportFrom) and top(node.module or "") == "streamlit":
            for alias in node.names:
                aliases.add(alias.asname or alias.name)
                if (_internal(node.module) or alias.name.startswith("_")) and node not in type_only:
                    found.append(f"from {node.module} import {alias.name} (line {node.lineno})")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            root = node.value
            while isinstance(root, (ast.Attribute, ast.Call, ast.Subscript)):
                root = root.func if isinstance(root, ast.Call) else root.value
            if isinstance(root, ast.Name) and root.id in aliases:
                found.append(f"{ast.unparse(node)} (line {node.lineno})")
    return found


def page_sources() -> dict[Path, str]:
    """The Streamlit scripts: app.py and every page."""
    paths = [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py"))]
    return {p.relative_to(ROOT): p.read_text() for p in paths}


def fat_page(source: str) -> list[str]:
    """What a page (or app.py) imports from attnscope outside attnscope.ui: work that belongs behind a ui module,
    so that a page only wires widgets."""
    return [f"imports {n}" for n in sorted(imports(source, "pages.page"))
            if top(n) == "attnscope" and n != "attnscope.ui" and not n.startswith("attnscope.ui.")]


def app_sources() -> dict[Path, str]:
    """The files that draw the app: app.py, pages/ and the package's ui/ (and the bench's served floor app)."""
    paths = [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py")), *sorted((SRC / "ui").rglob("*.py")),
             SRC / "bench" / "floor_app.py"]
    return {p.relative_to(ROOT): p.read_text() for p in paths}


STATE_MODULE = Path("src/attnscope/ui/state.py")  # the one module that touches st.session_state


def session_state_uses(source: str) -> list[str]:
    """Where `source` reaches st.session_state itself (keys spelled outside ui/state.py, which names them all)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "session_state":
            found.append(f"{ast.unparse(node)} (line {node.lineno})")
        elif isinstance(node, ast.ImportFrom) and top(node.module or "") == "streamlit":
            found += [f"from {node.module} import session_state (line {node.lineno})" for a in node.names
                      if a.name == "session_state"]
    return found


def test_session_state_is_kept_in_one_module() -> None:
    sources = app_sources()
    assert STATE_MODULE in sources and session_state_uses(sources[STATE_MODULE])
    found = [f"{path}: {use}" for path, source in sources.items() if path != STATE_MODULE
             for use in session_state_uses(source)]
    assert not found, "st.session_state is read and written through attnscope.ui.state only:\n" + "\n".join(found)


@pytest.mark.parametrize("source", [
    "import streamlit as st\nst.session_state['step'] = 1",
    "import streamlit as st\nif st.session_state.get('kind') == 'cross':\n    pass",
    "import streamlit\nstreamlit.session_state.pop('_flash', None)",
    "from streamlit import session_state\nsession_state['head'] = 'mean'",
    "import streamlit as st\ndef f(key):\n    return st.session_state[key]",
])
def test_session_state_outside_the_state_module_is_reported(source: str) -> None:
    assert session_state_uses(source), source


def test_state_through_the_state_module_passes() -> None:
    source = ("import streamlit as st\nfrom attnscope.ui import state\nview = state.read()\nstate.set_step(view.step + 1)\n"
              "state.store(state.FLASH, 'saved')\nst.selectbox('Layer', [0, 1], key=state.shadow(state.LAYER))")
    assert session_state_uses(source) == []


def test_the_app_uses_only_public_streamlit_api() -> None:
    sources = app_sources()
    assert set(page_sources()) <= set(sources) and Path("src/attnscope/ui/widgets.py") in sources
    found = [f"{path}: {use}" for path, source in sources.items() for use in private_streamlit(source)]
    assert not found, "private Streamlit API (it can change in any release):\n" + "\n".join(found)


@pytest.mark.parametrize("source", [
    "from streamlit.runtime.pages_manager import PagesManager\nPagesManager.uses_pages_directory = False",
    "import streamlit.web.server",
    "import streamlit as st\nst._main._something()",
    "import streamlit as st\nst.session_state._new_session_state",
    "import streamlit as st\nst.sidebar.container()._delta_path",
    "from streamlit import _main",
    "from streamlit.runtime.scriptrunner import get_script_run_ctx",
    "from typing import TYPE_CHECKING\nfrom streamlit.runtime.pages_manager import PagesManager\n"
    "if TYPE_CHECKING:\n    pass\nPagesManager.uses_pages_directory = False",
])
def test_private_streamlit_api_is_reported(source: str) -> None:
    assert private_streamlit(source), source


def test_public_streamlit_api_passes() -> None:
    source = ("import streamlit as st\nfrom streamlit.testing.v1 import AppTest\n"
              "st.session_state['_w_kind'] = 1\nst.navigation({}, position='hidden').run()\nobj._private = 1\n"
              "st.Page('pages/x.py').url_path\nst.column_config.NumberColumn('x')\n"
              "if TYPE_CHECKING:\n    from streamlit.runtime.uploaded_file_manager import UploadedFile\n")
    assert private_streamlit(source) == []


def test_pages_are_thin() -> None:
    sources = page_sources()
    assert Path("app.py") in sources and Path("pages/translate.py") in sources
    found = [f"{path}: {use}" for path, source in sources.items() for use in fat_page(source)]
    assert not found, "pages import from attnscope only attnscope.ui:\n" + "\n".join(found)


@pytest.mark.parametrize("source", [
    "from attnscope.engine.analysis.heads import head_stats",
    "from attnscope.viz.grid import heads_grid",
    "import attnscope.model.kinds",
    "from attnscope import load",
    "def show():\n    from attnscope.checkpoints import registry",
    "from attnscope.ui import widgets\nimport streamlit as st\nst._main.markdown('x')",
    "from streamlit.runtime.scriptrunner import get_script_run_ctx",
])
def test_a_fat_or_private_page_is_reported(source: str) -> None:
    assert fat_page(source) + private_streamlit(source), source


def test_a_thin_page_passes() -> None:
    source = ("import streamlit as st\nfrom attnscope.ui import results, widgets\nfrom attnscope.ui.navigation import open_page\n"
              "import attnscope.ui.tables\nopen_page('Heads')\nst.plotly_chart(widgets.figure())")
    assert fat_page(source) + private_streamlit(source) == []


def test_the_package_keeps_its_import_rules() -> None:
    sources = package_sources()
    assert {part_of(m) for m in sources} >= set(PARTS), "every part of the design is a folder"
    assert not violations(sources), "\n".join(violations(sources))


def test_streamlit_only_in_the_app_and_its_ui() -> None:
    scripts = [p for p in ROOT.glob("*.py") if p.name != "app.py"]
    screens = [p for p in scripts if any(top(n) == "streamlit" and not n.startswith(("streamlit.testing", "streamlit.proto"))
                                         for n in imports(p.read_text(), "x.y"))]
    assert not screens, f"only ui/, pages/ and app.py may draw with streamlit: {screens}"


@pytest.mark.parametrize("module, source, rule", [
    ("attnscope.model.transformer", "from attnscope.engine.recording.capture import record_attention",
     "knows nothing of recording"),
    ("attnscope.model.transformer", "def f():\n    import attnscope.ui.results", "knows nothing of recording"),
    ("attnscope.checkpoints.checkpoint", "from attnscope.engine import capture", "know only the model"),
    ("attnscope.engine.decoding.decode", "from attnscope.training.loop import Trainer", "no training loop"),
    ("attnscope.training.loop", "import streamlit as st", "knows no screen"),
    ("attnscope.training.loop", "from attnscope.ui import results", "no UI inside"),
    ("attnscope.viz.heatmap", "import torch", "figures are pure"),
    ("attnscope.viz.heatmap", "from attnscope.engine.decoding.beam import beam_search", "engine data types only"),
    ("attnscope.viz.heatmap", "from attnscope.engine import translator", "engine data types only"),
    ("attnscope.records.attention", "import torch", "figures are pure"),
    ("attnscope.model.kinds", "import torch", "figures are pure"),
    ("attnscope.records.attention", "from attnscope.model.transformer import Kind", "engine data types only"),
    ("attnscope.records.forward", "from attnscope.engine.decoding.beam import beam_search", "plain data that the engine writes"),
    ("attnscope.model.transformer", "from attnscope.records.attention import AttentionRecord", "knows nothing of recording"),
    ("attnscope.viz.grid", "from attnscope.model.kinds import KINDS", "engine data types only"),
    ("attnscope.engine.decoding.decode", "from ...ui import results", "no screen"),
    ("attnscope.ui.results", "from attnscope.bench.app_latency import app_latency", "nothing in it needs them"),
    ("attnscope.bench.app_latency", "import streamlit as st", "the benchmarks draw no screen"),
    ("attnscope.bench.app_memory", "from attnscope.bench.floor_app import translator", "nothing imports it"),
    ("attnscope.cli.translate", "from attnscope.ui.results import translation", "runs the library, not the app"),
    ("attnscope.cli.train", "def main():\n    import streamlit", "knows no screen"),
    ("attnscope.training.loop", "from attnscope.cli.train import parse_args", "only the entry points"),
    ("attnscope.checkpoints.checkpoint", "from attnscope.cli import import_model", "only the entry points"),
    ("attnscope.bench.suite", "from attnscope.cli.bench import SECTIONS", "only the entry points"),
    ("attnscope", "from attnscope.cli.translate import main", "only the entry points"),
])
def test_a_broken_rule_is_reported(module: str, source: str, rule: str) -> None:
    others = ("attnscope.engine.recording.capture", "attnscope.engine.decoding.beam", "attnscope.training.loop",
              "attnscope.ui.results", "attnscope.cli.train", "attnscope.cli.import_model", "attnscope.cli.bench")
    sources = {**dict.fromkeys(others, ""), module: source}
    assert any(rule in v for v in violations(sources)), violations(sources)


def test_an_import_cycle_between_packages_is_reported() -> None:
    sources = {"attnscope.engine.decoding.translator": "from attnscope.checkpoints.checkpoint import Bundle",
               "attnscope.checkpoints.checkpoint": "from attnscope.engine.decoding.beam_result import BeamResult",
               "attnscope.engine.decoding.beam_result": ""}
    assert "import cycle between packages: checkpoints -> engine -> checkpoints" in violations(sources)
    assert not cycles({"engine": {"model"}, "model": set(), "ui": {"engine", "model"}})


def test_allowed_imports_pass() -> None:
    sources = {"attnscope.viz.grid": "import numpy\nfrom attnscope.records.attention import AttentionRecord\n"
                                     "from attnscope.viz.heatmap import COLORSCALE",
               "attnscope.viz.heatmap": "", "attnscope.records.attention": "import numpy",
               "attnscope.ui.results": "import streamlit\nfrom attnscope.engine.decoding.translator import Translator",
               "attnscope.engine.decoding.translator": "import torch\nfrom attnscope.model.config import BOS_ID",
               "attnscope.model.config": "",
               "attnscope.bench.app_latency": "from streamlit.proto.ForwardMsg_pb2 import ForwardMsg\n"
                                              "from attnscope.engine.decoding.translator import Translator",
               "attnscope.cli.bench": "def main():\n    from attnscope.bench.app_latency import app_latency",
               "attnscope.cli.train": "from attnscope.training.loop import train\nfrom attnscope.engine import capture",
               "attnscope.training.loop": "", "attnscope.engine": "",
               "attnscope.__main__": "from attnscope.cli import bench, train",
               "attnscope.bench.__main__": "from attnscope.cli.bench import main",
               "attnscope.cli": ""}
    assert violations(sources) == []


MAX_LINES = 300  # a module a newcomer reads in one sitting (shared/STYLE.md: modules of 50-300 lines)


def long_modules(sources: dict[str, str]) -> list[str]:
    """Modules over MAX_LINES lines, one sentence each."""
    return [f"{module} has {n} lines: split it by job (at most {MAX_LINES})"
            for module, source in sorted(sources.items()) if (n := len(source.splitlines())) > MAX_LINES]


def test_every_module_is_short() -> None:
    assert long_modules(package_sources()) == []


def test_a_long_module_is_reported() -> None:
    assert long_modules({"attnscope.model.transformer": "x = 1\n" * 301, "attnscope.model.config": "x = 1\n" * 300}) == [
        "attnscope.model.transformer has 301 lines: split it by job (at most 300)"]
# Only the table spells attnscope's parameter names; bench builds other frameworks' files, whose names may coincide.
NAME_TABLE, NAMES_EXEMPT = "attnscope.model.parameters", ("attnscope.bench",)
# In the importers, only the assemble step makes a config, a report, a bundle or an import's result.
ASSEMBLE, ASSEMBLED = "attnscope.checkpoints.importers.assemble", {"ModelConfig", "ImportReport", "Bundle", "Imported"}


def parameter_names() -> set[str]:
    """Fragments that only attnscope's parameter names contain (full names, dotted layer parts, norms' prefixes)."""
    from attnscope.model import parameters as p

    return ({p.SRC_EMBED, p.TGT_EMBED, p.OUTPUT, p.OUTPUT_BIAS, p.POSITIONS, p.DECODER_POSITIONS}
            | {v for parts in p.LAYER_PARTS.values() for v in parts.values() if "." in v}
            | {f"{n}." for n in (*p.FINAL_NORMS.values(), *p.EMBED_NORMS.values())})


def name_and_assembly_violations(sources: dict[str, str]) -> list[str]:
    names, found = parameter_names(), []
    for module, source in sources.items():
        for node in ast.walk(ast.parse(source)):
            text = node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""
            if module != NAME_TABLE and not module.startswith(NAMES_EXEMPT) and any(n in text for n in names):
                found.append(f"{module} spells the parameter name {text!r}: only model/parameters.py spells them")
            called = node.func.id if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) else ""
            if module.startswith("attnscope.checkpoints.importers") and module != ASSEMBLE and called in ASSEMBLED:
                found.append(f"{module} makes a {called} itself: importers go through the one assemble step")
    return found


def test_parameter_names_live_in_one_table_and_importers_assemble_in_one_step() -> None:
    assert not name_and_assembly_violations(package_sources()), "\n".join(name_and_assembly_violations(package_sources()))


@pytest.mark.parametrize("module, source, rule", [
    ("attnscope.checkpoints.importers.opennmt", "x = {'w_1': 'ffn.up'}", "only model/parameters.py spells"),
    ("attnscope.engine.inside.lens", "name = f'{side}.generator.weight'", "only model/parameters.py spells"),
    ("attnscope.checkpoints.importers.fairseq", "config = ModelConfig(src_vocab_size=4)", "one assemble step"),
    ("attnscope.checkpoints.importers.opennmt", "return Imported(model, bundle, report)", "one assemble step"),
])
def test_a_spelled_name_or_an_importer_assembling_itself_is_reported(module: str, source: str, rule: str) -> None:
    assert any(rule in v for v in name_and_assembly_violations({module: source}))
    assert not name_and_assembly_violations({NAME_TABLE if "spells" in rule else ASSEMBLE: source})  # where it belongs


# Only the table makes hook points (and so spells their names); the package hooks modules torch's way only in the
# recorder of any torch model, whose job is to follow the modules of the user's own code.
HOOK_TABLE, ANY_MODEL_RECORDER = "attnscope.model.hooks", "attnscope.engine.recording.capture"
HOOK_CALLS = {"at": 0, "hears": 0, "listen": 1}  # HookPoints' methods and where their point goes


def hook_violations(sources: dict[str, str]) -> list[str]:
    """Hook points made or named outside model/hooks.py's table, and modules hooked around them, one sentence each."""
    from attnscope.model.hooks import POINTS

    names, found = {p.name for p in POINTS}, []
    for module, source in sources.items():
        for node in ast.walk(ast.parse(source)) if module != HOOK_TABLE else ():
            if isinstance(node, ast.Subscript) and getattr(node.value, "attr", "") == "listeners":
                spelled = [node.slice]
            elif isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
                if called == "Point":
                    found.append(f"{module} makes a hook point: only model/hooks.py's table names them")
                if called.startswith("register_") and "hook" in called and module != ANY_MODEL_RECORDER:
                    found.append(f"{module} hooks a module itself ({called}): listen on a hook point of model/hooks.py")
                at = HOOK_CALLS.get(called)
                spelled = node.args[at:at + 1] if at is not None and isinstance(func, ast.Attribute) else []
            else:
                continue
            found += [f"{module} spells the hook point {s.value!r}: use its row of model/hooks.py" for s in spelled
                      if isinstance(s, ast.Constant) and s.value in names]
    return found


def test_hook_points_are_named_in_one_table_and_nothing_else_is_hooked() -> None:
    sources = package_sources()
    assert "hooks.listen(" in sources["attnscope.engine.analysis.head_gate"]
    assert not hook_violations(sources), "\n".join(hook_violations(sources))


@pytest.mark.parametrize("module, source, rule", [
    ("attnscope.engine.analysis.head_gate", "m.out_proj.register_forward_pre_hook(gate)", "hooks a module itself"),
    ("attnscope.engine.recording.tracer", "handle = model.embed_dropout.register_forward_hook(keep)", "hooks a module"),
    ("attnscope.engine.attribution.saliency", "torch.nn.modules.module.register_module_forward_hook(f)", "hooks"),
    ("attnscope.model.attention", "NEW = Point('rotated', ('attention',), '(B, H, Q, dh)', 'q')", "makes a hook point"),
    ("attnscope.engine.recording.tracer", "site.listen(listening, 'pattern', keep)", "spells the hook point 'pattern'"),
    ("attnscope.model.blocks", "x = self.hooks.at('resid_pre', x)", "spells the hook point"),
    ("attnscope.model.attention", "heard = self.hooks.hears('scores')", "spells the hook point"),
    ("attnscope.engine.analysis.head_gate", "gates = module.hooks.listeners['z']", "spells the hook point"),
])
def test_a_hook_outside_the_table_is_reported(module: str, source: str, rule: str) -> None:
    assert any(rule in v for v in hook_violations({module: source})), hook_violations({module: source})


def test_hooks_on_names_pass() -> None:
    sources = {"attnscope.engine.analysis.head_gate": "module.hooks.listen(listening, Z, gate)\nx = hooks.at(Q, x)",
               "attnscope.engine.recording.capture": "m.register_forward_hook(leave)",
               HOOK_TABLE: "Q = Point('q', (ATTENTION,), '(B, H, Q, dh)', 'the queries')",
               "attnscope.checkpoints.importers.hf_t5": "parts = {'q': 'q_proj', 'bias': b}\nconfig.get('bias')"}
    assert hook_violations(sources) == []

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
(st.session_state) is read and written in ui/state.py only; each key is declared once, a page's own in its ui
module. A page script holds only calls and declares its own menu entry (read from there: the one page list); a
query's result is cached through ui/cache.py's one helper. A Hugging Face model_type is spelled only in
checkpoints/importers/hf_families/ (one module per architecture, and the registry that picks one). No module passes
300 lines.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

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
                     "attnscope.engine.inside.head_view", "attnscope.engine.inside.offsets",
                     "attnscope.engine.analysis.atlas_types"}
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


# Hugging Face architectures: one module each under hf_families/, picked by model_type from its registry, so that a
# new one is its module and its registry line; nowhere else spells a model_type (nor branches on one).
HF_FAMILIES = "attnscope.checkpoints.importers.hf_families"


def model_types() -> set[str]:
    """Every model_type the import knows: the architectures it converts and the ones it refuses with a reason."""
    from attnscope.checkpoints.importers.hf_families import ARCHITECTURES, REFUSED

    return set(ARCHITECTURES) | set(REFUSED)


def model_type_violations(sources: dict[str, str], types: set[str]) -> list[str]:
    """Modules outside hf_families/ that spell a model_type, one sentence each."""
    found = []
    for module, source in sorted(sources.items()):
        if module == HF_FAMILIES or module.startswith(f"{HF_FAMILIES}."):
            continue
        found += [f"{module} spells the model_type {node.value!r} (line {node.lineno}): only hf_families/ names them, "
                  "one module per architecture and its registry" for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in types]
    return found


def test_hugging_face_architectures_are_one_module_each_picked_in_one_registry() -> None:
    from attnscope.checkpoints.importers.hf_families import ARCHITECTURES

    types = model_types()
    assert {"marian", "bart", "mbart", "m2m_100", "t5", "mt5", "pegasus"} <= types
    found = model_type_violations(package_sources(), types)
    assert not found, "\n".join(found)
    assert not outside_families(ARCHITECTURES), outside_families(ARCHITECTURES)


def outside_families(architectures: dict[str, Any]) -> dict[str, str]:
    """model_type -> the module reading its config.json, for each architecture whose module is outside hf_families/."""
    return {kind: arch.fields.__module__ for kind, arch in architectures.items()
            if not arch.fields.__module__.startswith(f"{HF_FAMILIES}.")}


def test_an_architecture_read_outside_its_module_is_reported() -> None:
    import dataclasses

    from attnscope.checkpoints.importers import hf_models
    from attnscope.checkpoints.importers.hf_families import bart

    assert outside_families({"bart": bart.BART}) == {}
    assert outside_families({"bart": dataclasses.replace(bart.BART, fields=hf_models.architecture)}) == {
        "bart": "attnscope.checkpoints.importers.hf_models"}


@pytest.mark.parametrize("module, source", [
    ("attnscope.checkpoints.importers.hf_tokens", "if folder.model_type == 'marian':\n    pass"),
    ("attnscope.checkpoints.importers.hf_config", "T5_TYPES = ('t5', 'mt5')"),
    ("attnscope.checkpoints.importers.huggingface", "SIZES = {'bart': 1}"),
    ("attnscope.checkpoints.importers.hf_models", "def f(config):\n    return config.get('model_type') in {'m2m_100'}"),
])
def test_a_model_type_spelled_outside_the_families_is_reported(module: str, source: str) -> None:
    types = model_types()
    assert model_type_violations({module: source}, types)
    assert not model_type_violations({f"{HF_FAMILIES}.bart": source, HF_FAMILIES: source}, types)  # where it belongs


# A page is its script (pages/X.py: widgets wired to calls, no logic) plus one ui module that owns its widgets, its
# session keys and its caching.
CALL_PARTS = (ast.Call, ast.Name, ast.Attribute, ast.Constant, ast.keyword, ast.Load, ast.Store)


def page_logic(source: str) -> list[str]:
    """What a page script does beyond imports, its docstring and calls (whose results it may name and pass on)."""
    found = []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) or (isinstance(node, ast.Expr) and isinstance(
                node.value, ast.Constant) and isinstance(node.value.value, str)):
            continue
        targets = [n for t in getattr(node, "targets", []) for n in ast.walk(t)]
        names = all(isinstance(n, (ast.Name, ast.Tuple, ast.Store)) for n in targets)
        if isinstance(node, (ast.Expr, ast.Assign)) and isinstance(node.value, ast.Call) and names:
            found += [f"line {n.lineno}: {type(n).__name__} in a call's arguments" for n in ast.walk(node.value)
                      if not isinstance(n, CALL_PARTS)][:1]
        else:
            found.append(f"line {node.lineno}: {type(node).__name__} (logic belongs in the page's ui module)")
    return found


def test_pages_hold_no_logic_beyond_calls() -> None:
    found = [f"{path}: {use}" for path, source in page_sources().items()
             if path.parts[0] == "pages" for use in page_logic(source)]
    assert not found, "a page script only wires widgets to calls of its ui module:\n" + "\n".join(found)


@pytest.mark.parametrize("source", [
    "if c.positional == 'relative':\n    positional_page.relative_biases(tr)",
    "for tab in tabs:\n    heads_page.show(tab)",
    "@st.fragment\ndef live() -> None:\n    progress.progress(runs.current_job())",
    "with st.expander('More'):\n    anatomy_page.layers(c)",
    "st.markdown(f'S = {len(result.source_tokens)} source tokens')",
    "running = job is not None and not job.done",
    "live(run_every=2.0 if running else None)",
    "key = KEYS[0]",
])
def test_logic_in_a_page_is_reported(source: str) -> None:
    assert page_logic(source), source


HEADS_PAGE = ('"""Heads & layers."""\nfrom attnscope.ui import heads_page, records\n'
              'from attnscope.ui.navigation import Menu, open_page\n\n'
              'MENU = Menu("Heads & layers", ":material/grid_view:", section="Look", order=30)\n'
              'tr = open_page(MENU, record_view=records.show_on_heads)\nheads_page.show(tr)\n')


def test_a_page_of_calls_passes() -> None:
    assert page_logic(HEADS_PAGE + 'config, sample = form.run_form()\nruns.controls(config, sample)') == []


# The tests read the page list where the app does (tests/support.py's page_script and page_scripts, from
# ui/navigation.py).
PAGE_PATH = re.compile(r"pages/\w+\.py")


def typed_page_paths(source: str) -> list[str]:
    """Page scripts spelled out in `source` ("pages/heads.py") instead of read from the app's page list."""
    return [f"{node.value!r} (line {node.lineno})" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and PAGE_PATH.search(node.value)]


def test_tests_read_the_page_list_from_navigation() -> None:
    tests = {p.relative_to(ROOT): p.read_text() for p in sorted((ROOT / "tests").rglob("*.py"))}
    found = [f"{path}: {use}" for path, source in tests.items() if path.name != "test_architecture.py"
             for use in typed_page_paths(source)]
    assert not found, "tests name a page by tests.support.page_script(title):\n" + "\n".join(found)


@pytest.mark.parametrize("source", ['app.switch_page("pages/heads.py").run()',
                                    'PAGES = ("pages/translate.py", "pages/step.py")'])
def test_a_typed_page_path_is_reported(source: str) -> None:
    assert typed_page_paths(source), source
    assert not typed_page_paths(source.replace('"pages/heads.py"', 'page_script("Heads & layers")')
                                .replace('("pages/translate.py", "pages/step.py")', "page_scripts()"))


# Each page declares its own menu entry: every pages/*.py holds exactly one top-level `MENU = Menu(...)` of literal
# values (ui/menu.py reads it from the text, without running the script); nothing else in the app declares one (it
# would name no script, and no menu would show it); no page path is typed in the app (the list is read from pages/).
MENU_READER = Path("src/attnscope/ui/menu.py")  # defines Menu and makes one of each script's declared values


def menu_declarations(source: str, page: bool) -> list[str]:
    """What is wrong with `source`'s menu declarations: a page script needs exactly one top-level `MENU = Menu(...)`
    of literal values; any other file, none."""
    tree = ast.parse(source)
    top_level = [node.value for node in tree.body if isinstance(node, ast.Assign)
                 and [ast.unparse(t) for t in node.targets] == ["MENU"] and isinstance(node.value, ast.Call)]
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func).split(".")[-1] == "Menu"]
    if not page:
        return [f"line {c.lineno}: a menu entry outside pages/ names no script" for c in calls]

    def literal(node: ast.AST) -> bool:
        try:
            ast.literal_eval(node)
        except ValueError:
            return False
        return True

    good = [c for c in top_level if c in calls and all(literal(a) for a in [*c.args, *(k.value for k in c.keywords)])]
    if len(good) == 1 and len(calls) == 1:
        return []
    return [f"{len(good)} top-level MENU = Menu(...) of literal values and {len(calls) - len(good)} other Menu calls"]


def test_every_page_declares_its_menu_entry_once_and_only_pages_do() -> None:
    sources = {p.relative_to(ROOT): p.read_text() for p in [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py")),
                                                            *sorted(SRC.rglob("*.py"))]}
    found = [f"{path}: {use}" for path, source in sources.items()
             if path != MENU_READER for use in menu_declarations(source, path.parts[0] == "pages")]
    assert not found, "each pages/X.py declares MENU = Menu(title, icon, section, order) once:\n" + "\n".join(found)
    typed = [f"{path}: {use}" for path, source in sources.items() for use in typed_page_paths(source)]
    assert not typed, "the app reads page scripts from pages/ (navigation.script(title)):\n" + "\n".join(typed)


@pytest.mark.parametrize("source, page", [
    ("tr = open_page(None)", True),
    ("MENU = Menu('A', ':x:', section='Look', order=10)\nMENU = Menu('B', ':x:', section='Look', order=20)", True),
    ("MENU = Menu(TITLE, ':x:', section='Look', order=10)", True),
    ("tr = open_page(Menu('A', ':x:', section='Look', order=10))", True),
    ("MENU = Menu('A', ':x:', section='Look', order=10)\nOTHER = navigation.Menu('B', ':y:', 'Look', 20)", True),
    ("MENU = Menu('Atlas', ':x:', section='Look', order=40)", False),
])
def test_a_missing_doubled_or_stray_menu_entry_is_reported(source: str, page: bool) -> None:
    assert menu_declarations(source, page), source


def test_a_page_with_one_literal_menu_entry_passes() -> None:
    assert menu_declarations(HEADS_PAGE, page=True) == []
    assert menu_declarations("st.title(menu.title)\nst.switch_page(navigation.script('Head atlas'))", page=False) == []


# Streamlit's caches, each place saying why: a result computed from a query goes through ui/cache.py's `cached` (one
# memory budget, shared by every session); what stays a Streamlit cache is a resource, not a query's result.
CACHES = {
    Path("src/attnscope/ui/cache.py"): "the one store of results itself (made once per server)",
    Path("src/attnscope/ui/models.py"): "loaded models and the checkpoint list: resources every page shares",
    Path("src/attnscope/ui/train/runs.py"): "the server's training jobs: a registry of running threads",
    Path("src/attnscope/ui/widgets.py"): "the embedded sample's word lists per language pair: data, not a query's",
    Path("src/attnscope/ui/inside_page.py"): "a traced sentence, one object of up to hundreds of MB: larger than "
                                             "the results' budget, it would push out the translation it traces",
    Path("src/attnscope/ui/live_decode.py"): "the server's one table of measured seconds per token, for estimates",
    Path("src/attnscope/ui/explorer.py"): "a view's encoded payload bytes, so reruns after picks re-encode nothing: "
                                          "drawing, not a query's result",
    Path("src/attnscope/bench/floor_app.py"): "the bench's floor app, served alone to measure the app against",
}
STREAMLIT_CACHES = {"cache_data", "cache_resource", "cache", "experimental_memo", "experimental_singleton"}


def streamlit_caches(source: str) -> list[str]:
    """Where `source` uses one of Streamlit's caches (st.cache_data, st.cache_resource, ...)."""
    tree = ast.parse(source)
    aliases = {(a.asname or a.name).split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
               for a in node.names if top(a.name) == "streamlit"}
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr in STREAMLIT_CACHES and isinstance(node.value, ast.Name)
                and node.value.id in aliases):
            found.append(f"{ast.unparse(node)} (line {node.lineno})")
        elif isinstance(node, ast.ImportFrom) and top(node.module or "") == "streamlit":
            found += [f"from {node.module} import {a.name} (line {node.lineno})" for a in node.names
                      if a.name in STREAMLIT_CACHES]
    return found


def test_results_are_cached_through_the_one_helper() -> None:
    sources = app_sources()
    assert set(CACHES) <= set(sources)
    found = [f"{path}: {use}" for path, source in sources.items() if path not in CACHES
             for use in streamlit_caches(source)]
    rule = "cache a query's result with ui/cache.py's cached (a resource: name its module in CACHES)"
    assert not found, rule + ":\n" + "\n".join(found)


@pytest.mark.parametrize("source", [
    "import streamlit as st\n@st.cache_data(max_entries=32)\ndef _ablate(_tr, text):\n    pass",
    "import streamlit as st\n@st.cache_resource\ndef jobs():\n    return {}",
    "import streamlit\nf = streamlit.cache_data(lambda x: x)",
    "from streamlit import cache_data\n@cache_data\ndef f():\n    pass",
])
def test_a_streamlit_cache_is_reported(source: str) -> None:
    assert streamlit_caches(source), source


def test_the_one_helper_passes() -> None:
    source = ("import functools\nfrom attnscope.ui.cache import cached\n"
              "outcome = cached('ablate', query, lambda: ablate_sentence(tr, query.sentence, heads), heads)\n"
              "@functools.cache\ndef arena_limit():\n    pass")
    assert streamlit_caches(source) == []


# Session keys: ui/state.py spells the shared ones (the view, the sidebar's, the router's, the session's: each read by
# state.py itself or by two modules at least); a page's own keys are `state.Key(...)` declarations in its ui module,
# which no other module reads; no key is declared twice.
STATE = "attnscope.ui.state"


def module_name(path: Path) -> str:
    """`path` (from the repository root) as a module name: src/attnscope/ui/x.py is attnscope.ui.x, pages/x.py
    is pages.x."""
    parts = path.with_suffix("").parts
    return ".".join(parts[1:] if parts[0] == "src" else parts)


def key_declarations(module: str, source: str) -> dict[str, list[str]]:
    """The session keys `module` declares at its top: name -> key strings (a name may hold several, e.g. a dict of
    `state.Key(...)`). In ui/state.py, its upper-case string constants; elsewhere, values built with `state.Key`."""
    tree = ast.parse(source)
    key_names = {"Key"} if module == STATE else {a.asname or a.name for node in ast.walk(tree)
                                                  if isinstance(node, ast.ImportFrom) and node.module == STATE
                                                  for a in node.names if a.name == "Key"}

    def is_key(call: ast.AST) -> bool:
        return isinstance(call, ast.Call) and (isinstance(call.func, ast.Name) and call.func.id in key_names
                                               or isinstance(call.func, ast.Attribute) and call.func.attr == "Key")

    found: dict[str, list[str]] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        targets = [n for t in node.targets for n in (t.elts if isinstance(t, ast.Tuple) else [t])
                   if isinstance(n, ast.Name)]
        values = node.value.elts if isinstance(node.value, ast.Tuple) and len(targets) > 1 else [node.value]
        for target, value in zip(targets, values):
            keys = [c.args[0].value for c in ast.walk(value)
                    if is_key(c) and c.args and isinstance(c.args[0], ast.Constant)]
            plain = isinstance(value, ast.Constant) and isinstance(value.value, str)
            if module == STATE and target.id.isupper() and plain:
                keys.append(value.value)
            if keys:
                found[target.id] = keys
    return found


def readers(name: str, module: str, sources: dict[str, str]) -> set[str]:
    """The modules besides `module` that read its top-level `name` (`alias.NAME` or `from module import NAME`)."""
    alias = module.rsplit(".", 1)[-1]
    found = set()
    for other, source in sources.items():
        if other == module:
            continue
        for node in ast.walk(ast.parse(source)):
            if (isinstance(node, ast.Attribute) and node.attr == name and isinstance(node.value, ast.Name)
                    and node.value.id == alias) or (isinstance(node, ast.ImportFrom) and node.module == module
                                                    and any(a.name == name for a in node.names)):
                found.add(other)
    return found


def key_violations(sources: dict[str, str]) -> list[str]:
    """Session keys out of place in `sources` (module name -> code), one sentence each."""
    found, owners = [], {}
    for module, source in sorted(sources.items()):
        for name, keys in key_declarations(module, source).items():
            for key in keys:
                if key in owners:
                    found.append(f"{module}.{name} declares the key {key!r} again ({owners[key]} has it)")
                owners.setdefault(key, f"{module}.{name}")
            used_by = readers(name, module, sources)
            uses_itself = any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
                              for n in ast.walk(ast.parse(source)))
            if module == STATE and len(used_by) < 2 and not uses_itself:
                found.append(f"{STATE}.{name} is read by {sorted(used_by) or 'no module'} only: a page's key is "
                             "declared in its own ui module (state.Key), state.py keeps the shared ones")
            elif module != STATE and used_by:
                found.append(f"{module}.{name} is read by {sorted(used_by)}: a page's keys are its ui module's own")
    return found


def test_a_pages_keys_are_declared_in_its_own_module() -> None:
    sources = {module_name(path): source for path, source in app_sources().items()}
    declared = {m: key_declarations(m, s) for m, s in sources.items()}
    assert {"TAB", "SPLIT_STATS"} <= set(declared["attnscope.ui.heads_page"]) and "SENTENCE" in declared[STATE]
    assert not key_violations(sources), "\n".join(key_violations(sources))


@pytest.mark.parametrize("sources, rule", [
    ({STATE: "SPLIT_STATS = 'split_stats'", "attnscope.ui.heads_page": "state.store(state.SPLIT_STATS, 1)"},
     "declared in its own ui module"),
    ({STATE: "x = 1", "attnscope.ui.heads_page": "TAB = state.Key('heads_tab')\nstate.stored(TAB)",
      "pages.heads": "from attnscope.ui import heads_page\nst.tabs(['a'], key=heads_page.TAB)"},
     "a page's keys are its ui module's own"),
    ({STATE: "x = 1", "attnscope.ui.train.form": "from attnscope.ui.state import Key as K\nNAME = K('train_name')",
      "attnscope.ui.train.runs": "from attnscope.ui.train.form import NAME"}, "a page's keys are its ui module's own"),
    ({STATE: "x = 1", "attnscope.ui.atlas_page": "RUN, MAP = state.Key('_atlas_run'), state.Key('_atlas_map')",
      "attnscope.ui.heads_page": "FIELDS = {'split': state.Key('_atlas_map')}"}, "again"),
    ({STATE: "FLASH = '_flash'\nstate.store(FLASH, 1)",
      "attnscope.ui.checkpoints.manage": "FLASH = state.Key('_flash')"},
     "again"),
])
def test_a_key_out_of_place_is_reported(sources: dict[str, str], rule: str) -> None:
    assert any(rule in v for v in key_violations(sources)), key_violations(sources)


def test_keys_in_their_places_pass() -> None:
    sources = {STATE: "SENTENCE = 'sentence'\nPREFIX = 'task_prefix-'\ndef task_prefix(c):\n    return PREFIX + c",
               "attnscope.ui.widgets": "state.stored(state.SENTENCE)",
               "attnscope.ui.url": "state.store(state.SENTENCE, 'a')",
               "attnscope.ui.heads_page": "TAB, SPLIT = state.Key('heads_tab'), state.Key('split_stats')\n"
                                          "state.stored(SPLIT)\nst.tabs(['a'], key=TAB)",
               "pages.heads": "from attnscope.ui import heads_page\nheads_page.show(tr)"}
    assert key_violations(sources) == []


# Attribution methods are listed by the registry alone (each method module declares its own): a new method is its module
# and its test. No other module names two methods in one literal, by their names or by constants holding them.
REGISTRY = "attnscope.engine.attribution.registry"


def _name(node: ast.AST | None) -> str | None:
    """The name a Name or an Attribute ends with."""
    return getattr(node, "id", getattr(node, "attr", None))


def method_constants(sources: dict[str, str]) -> set[str]:
    """Names bound to an attribution method's name (ALTI = "ALTI+"), or to such a name (ALTI = alti.METHOD)."""
    from attnscope.engine.attribution.registry import names

    spelled, found = set(names(None)), set()
    assigns = [n for s in sources.values() for n in ast.walk(ast.parse(s)) if isinstance(n, ast.Assign)]
    for _ in range(2):  # names, then names of names
        for node in assigns:
            v = node.value
            if (isinstance(v, ast.Constant) and v.value in spelled) or _name(v) in found:
                found |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return found


def method_literals(sources: dict[str, str]) -> list[str]:
    from attnscope.engine.attribution.registry import names

    spelled, constants = set(names(None)), method_constants({**package_sources(), **sources})

    def is_method(e: ast.AST | None) -> bool:
        return (isinstance(e, ast.Constant) and e.value in spelled) or _name(e) in constants

    found = []
    for module, source in sources.items():
        for node in ast.walk(ast.parse(source)):
            items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", [])
            if module != REGISTRY and sum(map(is_method, items)) >= 2:
                found.append(f"{module}:{node.lineno} lists attribution methods by hand: read them from "
                             "engine/attribution/registry.py")
    return found


def test_attribution_methods_are_listed_by_the_registry_alone() -> None:
    assert not method_literals(package_sources()), "\n".join(method_literals(package_sources()))


@pytest.mark.parametrize("source", ["refs = (ALTI, VALUE_ZEROING, 'x')", "shown = ['attention', 'norm-based']",
                                    "named = {sentence.INTEGRATED: 1, ATTENTION: 2}"])
def test_a_hand_made_list_of_methods_is_reported(source: str) -> None:
    assert method_literals({"attnscope.ui.attribution.samples": source})
    assert not method_literals({"attnscope.ui.attribution.samples": "refs = references()\nbest = (ALTI, 1)"})


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

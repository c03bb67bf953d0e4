"""Every third-party import is declared and pinned: a fresh install must have what the code imports.

A green run once hid an undeclared `scipy` because the machine's Python happened to have it; this test
reads the imports from the source (not from what is installed) and fails on any top-level package that
no requirements file names. Runtime code (src/, pages/, app.py) may use requirements.txt and the
optional extras in pyproject.toml (imports of models made elsewhere); the benchmarks and tests use
requirements-test.txt, which includes requirements.txt.
"""
from __future__ import annotations

import ast
import re
import sys
import tomllib
from functools import cache
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIRST_PARTY = {"attnscope", "tests"}
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==[A-Za-z0-9.+!-]+$")


def normalize(name: str) -> str:
    """PEP 503 name: case and the separators `-`, `_`, `.` do not matter."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_lines(path: Path) -> list[str]:
    """The requirement lines of a pip requirements file, following `-r` includes; `-e .` is the project itself."""
    lines: list[str] = []
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-e"):
            continue
        if line.startswith("-r"):
            lines += requirement_lines(path.parent / line[2:].strip())
        else:
            lines.append(line)
    return lines


def extras() -> list[str]:
    """The optional dependencies that pyproject.toml declares (e.g. what importing a Hugging Face model needs)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [r for group in project.get("optional-dependencies", {}).values() for r in group]


def declared(lines: list[str]) -> set[str]:
    return {normalize(PIN.match(line).group(1)) for line in lines if PIN.match(line)}


def string_imports(node: ast.Call) -> list[str]:
    """Modules named as strings to `pytest.importorskip("x")` or `importlib.import_module("x")`."""
    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    if name in {"importorskip", "import_module"} and node.args and isinstance(node.args[0], ast.Constant) \
            and isinstance(node.args[0].value, str):
        return [node.args[0].value]
    return []


def imported_modules(path: Path) -> set[str]:
    """Top-level modules a file imports (also inside functions), minus the standard library and our own."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Call):
            names.update(string_imports(node))
    tops = {name.split(".")[0] for name in names}
    return {m for m in tops if m not in sys.stdlib_module_names and m not in FIRST_PARTY}


@cache
def installed() -> dict[str, list[str]]:
    return packages_distributions()


def distributions(module: str) -> set[str]:
    """The distributions that provide a module; an uninstalled module is taken to be its own distribution."""
    return {normalize(d) for d in installed().get(module, [module])}


def undeclared(files: list[Path], allowed: set[str]) -> list[str]:
    found = []
    for path in files:
        for module in sorted(imported_modules(path)):
            if not distributions(module) & allowed:
                shown = path.relative_to(ROOT) if ROOT in path.parents else path
                found.append(f"{shown} imports {module}")
    return found


RUNTIME = declared(requirement_lines(ROOT / "requirements.txt")) | declared(extras())
TEST = declared(requirement_lines(ROOT / "requirements-test.txt"))
BENCH = ROOT / "src" / "attnscope" / "bench"
# Fixture scripts that run in venvs of their own, each declared beside it: tests/fixtures/frameworks/regenerate.py
# in OpenNMT-py's and fairseq's, tests/fixtures/contrastive/regenerate.py in Inseq's. Those packages are not installed
# here, so the import names that differ from their distributions' are given (the tests' own package is first-party).
OWN_VENVS = {ROOT / "tests" / "fixtures" / "frameworks": ("requirements-opennmt.txt", "requirements-fairseq.txt"),
             ROOT / "tests" / "fixtures" / "contrastive": ("requirements-inseq.txt",)}
FRAMEWORK_IMPORTS = {"onmt": "OpenNMT-py", "fairseq_cli": "fairseq"}


def python_files(*parts: str) -> list[Path]:
    return sorted(p for part in parts for p in ((ROOT / part).rglob("*.py") if (ROOT / part).is_dir() else [ROOT / part]))


@pytest.mark.parametrize("name", ["requirements.txt", "requirements-test.txt",
                                  *(str((folder / f).relative_to(ROOT)) for folder, files in OWN_VENVS.items()
                                    for f in files)])
def test_every_requirement_is_pinned(name: str) -> None:
    loose = [line for line in requirement_lines(ROOT / name) if not PIN.match(line)]
    assert not loose, f"{name}: pin these with ==: {loose}"


def test_every_extra_is_pinned() -> None:
    assert all(PIN.match(r) for r in extras()), extras()


def test_runtime_code_imports_only_declared_packages() -> None:
    files = [p for p in python_files("src", "pages", "app.py") if BENCH not in p.parents]
    assert not undeclared(files, RUNTIME), "declare in requirements.txt (pinned): " + "; ".join(undeclared(files, RUNTIME))


def test_tests_and_benchmarks_import_only_declared_packages() -> None:
    files = [p for p in python_files("tests") if not set(OWN_VENVS) & set(p.parents)] + python_files("src/attnscope/bench")
    assert not undeclared(files, TEST), "declare in requirements-test.txt (pinned): " + "; ".join(undeclared(files, TEST))


@pytest.mark.parametrize("folder", sorted(OWN_VENVS))
def test_a_fixture_script_in_its_own_venv_imports_only_what_that_venv_declares(folder: Path) -> None:
    allowed = set().union(*(declared(requirement_lines(folder / f)) for f in OWN_VENVS[folder]))
    found = [f"{path.relative_to(ROOT)} imports {module}" for path in python_files(str(folder.relative_to(ROOT)))
             for module in sorted(imported_modules(path))
             if not (distributions(module) | {normalize(FRAMEWORK_IMPORTS.get(module, module))}) & allowed]
    assert not found, f"declare in {'/'.join(OWN_VENVS[folder])} beside the script (pinned): {found}"


def test_the_scan_catches_an_undeclared_import(tmp_path: Path) -> None:
    """The scan itself can fail: an import (here inside a function) that no requirements file names is reported."""
    module = tmp_path / "uses_scipy.py"
    module.write_text("import os\nimport numpy\n\n\ndef f():\n    from scipy.stats import rankdata\n    return rankdata\n")
    assert imported_modules(module) == {"numpy", "scipy"}
    assert undeclared([module], {"numpy"}) == [f"{module} imports scipy"]
    assert undeclared([module], {"numpy", "scipy"}) == []


def test_every_pip_install_the_docs_and_messages_give_installs_pinned_versions() -> None:
    """The README's `pip install transformers sentencepiece` picked transformers 5.24.0 while the tests pin 5.23.0:
    a command a reader copies (README, docs/, error messages) installs requirement files or the project's extras."""
    command = re.compile(r"(?<!Recommended: )pip install ((?:-[a-z]+ )*)([^`\n#()]*)")  # not transformers' own advice
    loose = []
    docs = sorted((ROOT / "docs").glob("*.md"))
    assert docs, "docs/ holds the documents this scan reads"
    for path in [ROOT / "README.md", *docs, *python_files("src")]:
        for flags, args in command.findall(path.read_text()):
            words = [w.strip("\\'\"") for w in args.split() if not w.startswith("-")]
            packages = [w for w in words if not (w.endswith(".txt") or w.startswith(".") or PIN.match(w) or w == "&&")]
            if packages and "-r" not in flags:
                loose.append(f"{path.relative_to(ROOT)}: pip install {flags}{args.strip()}")
    assert not loose, loose

"""The app's page list, read from the page scripts: each script in pages/ declares its own entry in the menu
(`MENU = Menu(title, icon, section, order)`), so a new page is its script and its ui module, and nothing else.

The entries are read from the scripts' text (ast), neither by running a script (that draws its page) nor by importing
a page's ui module (a title would then cost its imports on every cold start). Each run looks at the folder and
reads again only the scripts that changed, so a page added or renamed shows up on the next run.
"""
from __future__ import annotations

import ast
import functools
from dataclasses import asdict, dataclass
from pathlib import Path

PAGES = "pages"  # the folder of page scripts, beside app.py (the router's script)
SECTIONS = ("Look", "Explain", "Build")  # the menu's sections, in order
DECLARATION = "MENU = Menu(title, icon, section, order)"


class MenuError(ValueError):
    """A page script's menu entry is missing, not literal, or clashes with another page's."""


@dataclass(frozen=True)
class Menu:
    """A page's entry in the menu: its title (also the page's heading), its icon, its section (one of SECTIONS)
    and its place there, ascending (steps of 10 leave room for a page between two without renumbering them)."""

    title: str
    icon: str
    section: str
    order: int


@dataclass(frozen=True, kw_only=True)
class PageSpec(Menu):
    """One page: its menu entry and its script (from the repository root, as `st.Page` takes it)."""

    script: str


def declared(source: str, script: str) -> Menu:
    """The menu entry that the page script `script` (its text: `source`) declares, or a MenuError saying what to
    write: one top-level `MENU = Menu(...)` of literal arguments."""
    calls = [node.value for node in ast.parse(source, script).body if isinstance(node, ast.Assign)
             and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "MENU"]
    func = calls[0].func if len(calls) == 1 and isinstance(calls[0], ast.Call) else None
    if (func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None) != "Menu":
        raise MenuError(f"{script} must declare its menu entry once, at its top: {DECLARATION}.")
    try:
        menu = Menu(*map(ast.literal_eval, calls[0].args), **{k.arg: ast.literal_eval(k.value)
                                                               for k in calls[0].keywords})
    except (ValueError, TypeError) as e:
        raise MenuError(f"{script}: write its menu entry with literal values, {DECLARATION} ({e}).") from None
    if not (all(isinstance(v, str) for v in (menu.title, menu.icon, menu.section)) and type(menu.order) is int):
        raise MenuError(f"{script}: its menu entry's title, icon and section are text and its order a whole number.")
    return menu


def page_specs(root: Path) -> tuple[PageSpec, ...]:
    """Every page script under `root`'s pages/ with its declared entry, in the menu's order (by section, then
    order); a MenuError when an entry is missing or two pages clash."""
    specs = [_spec(path, path.stat().st_mtime_ns) for path in sorted((root / PAGES).glob("*.py"))]
    _check(specs)
    return tuple(sorted(specs, key=lambda spec: (SECTIONS.index(spec.section), spec.order)))


@functools.lru_cache(maxsize=256)
def _spec(path: Path, mtime_ns: int) -> PageSpec:
    """The page script at `path` with its entry, read again only when the file changes (`mtime_ns`): a run then
    costs a look at the folder, not ten parses."""
    script = f"{PAGES}/{path.name}"
    return PageSpec(**asdict(declared(path.read_text(encoding="utf-8"), script)), script=script)


def _check(specs: list[PageSpec]) -> None:
    """A MenuError for an unknown section, a title used twice, or two pages at one place of a section."""
    for spec in specs:
        if spec.section not in SECTIONS:
            raise MenuError(f"{spec.script}: section {spec.section!r} is not one of {', '.join(SECTIONS)}.")
    for what, key in (("title", lambda s: s.title), ("place", lambda s: (s.section, s.order))):
        seen: dict[object, str] = {}
        for spec in specs:
            if key(spec) in seen:
                raise MenuError(f"{seen[key(spec)]} and {spec.script} have the same menu {what} {key(spec)!r}: "
                                "give each page its own.")
            seen[key(spec)] = spec.script


def by_section(specs: tuple[PageSpec, ...]) -> dict[str, tuple[PageSpec, ...]]:
    """`specs` grouped by section, in the menu's order (a section without pages left out)."""
    return {section: found for section in SECTIONS
            if (found := tuple(spec for spec in specs if spec.section == section))}

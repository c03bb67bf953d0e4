"""The page list read from the page scripts' own declarations: order, sections, and a clear error for each mistake."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from attnscope.ui.menu import PAGES, Menu, MenuError, by_section, declared, page_specs

# Scripts of made-up pages in a temporary checkout, named as page_specs names them ("pages/a.py").
A, B, C, D = (f"{PAGES}/{name}.py" for name in "abcd")
HEADER = '"""A page."""\nfrom attnscope.ui.navigation import Menu, open_page\n\n'


def write_pages(root: Path, **entries: str) -> Path:
    """A checkout at `root` whose pages/ holds one script per entry: name -> its MENU line's arguments."""
    (root / "pages").mkdir(parents=True, exist_ok=True)
    for name, arguments in entries.items():
        (root / "pages" / f"{name}.py").write_text(f"{HEADER}MENU = Menu({arguments})\nopen_page(MENU)\n")
    return root


def test_a_declaration_is_read_without_running_the_script() -> None:
    source = HEADER + 'MENU = Menu("Heads", ":material/grid_view:", section="Look", order=30)\nraise SystemExit\n'
    assert declared(source, A) == Menu("Heads", ":material/grid_view:", "Look", 30)


@pytest.mark.parametrize("source, says", [
    ("open_page(Menu('Heads', ':x:', 'Look', 1))", "must declare its menu entry once"),
    ("MENU = Menu('A', ':x:', 'Look', 1)\nMENU = Menu('B', ':x:', 'Look', 2)", "must declare its menu entry once"),
    ("MENU = dict(title='A')", "must declare its menu entry once"),
    ("if True:\n    MENU = Menu('A', ':x:', 'Look', 1)", "must declare its menu entry once"),
    ("MENU = Menu(TITLE, ':x:', 'Look', 1)", "literal values"),
    ("MENU = Menu('A', ':x:', 'Look')", "literal values"),
])
def test_a_missing_or_unreadable_declaration_says_what_to_write(source: str, says: str) -> None:
    with pytest.raises(MenuError, match=says) as error:
        declared(HEADER + source, A)
    assert A in str(error.value) and "MENU = Menu(title, icon, section, order)" in str(error.value)


@pytest.mark.parametrize("arguments", ["'A', ':x:', 'Look', '10'", "'A', ':x:', 'Look', 1.5",
                                       "'A', None, 'Look', 10", "'A', ':x:', 'Look', True"])
def test_a_declaration_of_the_wrong_types_says_which(arguments: str) -> None:
    with pytest.raises(MenuError, match="title, icon and section are text and its order a whole number"):
        declared(f"{HEADER}MENU = Menu({arguments})", A)


def test_pages_come_in_section_then_order(tmp_path: Path) -> None:
    root = write_pages(tmp_path, b="'Train', ':t:', section='Build', order=10",
                       a="'Later', ':l:', section='Look', order=20", c="'First', ':f:', section='Look', order=10",
                       d="'Why', ':w:', section='Explain', order=5")
    specs = page_specs(root)
    assert [(s.title, s.script) for s in specs] == [("First", C), ("Later", A), ("Why", D), ("Train", B)]
    assert {k: [s.title for s in v] for k, v in by_section(specs).items()} == {
        "Look": ["First", "Later"], "Explain": ["Why"], "Build": ["Train"]}


def test_an_empty_section_is_left_out(tmp_path: Path) -> None:
    specs = page_specs(write_pages(tmp_path, a="'Train', ':t:', section='Build', order=10"))
    assert list(by_section(specs)) == ["Build"]


@pytest.mark.parametrize("second, says", [
    ("'One', ':x:', section='Look', order=20", "same menu title 'One'"),
    ("'Two', ':x:', section='Look', order=10", r"same menu place \('Look', 10\)"),
])
def test_two_pages_that_clash_are_named(tmp_path: Path, second: str, says: str) -> None:
    root = write_pages(tmp_path, a="'One', ':x:', section='Look', order=10", b=second)
    with pytest.raises(MenuError, match=f"{A} and {B} have the {says}"):
        page_specs(root)


def test_an_unknown_section_is_named_with_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(MenuError, match="section 'Lok' is not one of Look, Explain, Build"):
        page_specs(write_pages(tmp_path, a="'One', ':x:', section='Lok', order=10"))


def test_a_changed_script_is_read_again(tmp_path: Path) -> None:
    root = write_pages(tmp_path, a="'One', ':x:', section='Look', order=10")
    assert [s.title for s in page_specs(root)] == ["One"]
    script = root / "pages" / "a.py"
    before = script.stat().st_mtime_ns
    write_pages(root, a="'Renamed', ':x:', section='Look', order=10")
    os.utime(script, ns=(before + 1_000_000, before + 1_000_000))  # a new time even on a coarse clock
    assert [s.title for s in page_specs(root)] == ["Renamed"]

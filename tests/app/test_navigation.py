"""The sidebar's menu (sections of page links, public Streamlit API only) and the one call every page opens with."""
from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from attnscope.ui.navigation import script, sections, specs
from tests.support import ROOT, shown

SPECS = list(specs())
# The menu as users know it: sections in order, each with its pages in order (the scripts declare it; a new page
# may join anywhere).
MENU = {"Look": ["Translate", "Step through decoding", "Heads & layers", "Head atlas", "Inside one head"],
        "Explain": ["Attribution", "Positional encoding", "Model anatomy"],
        "Build": ["Train", "Checkpoints"]}


def test_the_scripts_declare_the_menu_in_its_order() -> None:
    menu = {section: [spec.title for spec in pages] for section, pages in sections().items()}
    assert [section for section in menu if section in MENU] == list(MENU)
    assert {section: [title for title in menu[section] if title in known] for section, known in MENU.items()} == MENU


def test_every_page_file_is_in_exactly_one_section() -> None:
    scripts = [spec.script for spec in SPECS]
    assert sorted(scripts) == sorted(f"pages/{p.name}" for p in (ROOT / "pages").glob("*.py"))
    assert len(set(scripts)) == len(scripts) and len({spec.title for spec in SPECS}) == len(SPECS)


def test_a_page_is_found_by_its_menu_title() -> None:
    assert [script(spec.title) for spec in SPECS] == [spec.script for spec in SPECS]
    with pytest.raises(ValueError, match="no page titled 'Heads'"):
        script("Heads")


def test_the_sidebar_lists_the_sections_and_their_pages_in_order(app: AppTest) -> None:
    app.session_state["sentence"] = "a b c"
    app.run()
    assert not app.exception
    links = app.sidebar.get("page_link")
    assert [link.proto.label for link in links] == [spec.title for spec in SPECS]
    paths = [spec.script.removeprefix("pages/").removesuffix(".py") for spec in SPECS]
    assert [link.proto.page for link in links] == ["", *paths[1:]]  # the first is the default page: the app's root
    captions = [shown(c) for c in app.sidebar.caption]
    assert [c for c in captions if c in MENU] == list(MENU)


@pytest.mark.parametrize("spec", SPECS, ids=[spec.script for spec in SPECS])
def test_each_page_opens_with_its_menu_title(app: AppTest, spec) -> None:
    app.session_state["sentence"] = "a b c"
    app.run()
    app.switch_page(spec.script).run()
    assert not app.exception, [e.value for e in app.exception]
    assert [t.value for t in app.title] == [spec.title]

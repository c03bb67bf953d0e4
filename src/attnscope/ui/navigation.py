"""The app's pages in sections, the sidebar's links to them, and the one call every page opens with.

Each page script declares its own menu entry (`MENU = Menu(...)`, read by ui/menu.py without running it) and
opens with `open_page(MENU)`: this module lists no page.

Only public Streamlit API: `st.navigation` routes (its own menu hidden) and `st.page_link` draws the
sidebar's menu, one labelled group per section. On a fresh server's first run, before anything has
called `st.navigation`, Streamlit treats `pages/` as a legacy multipage folder and builds a menu
from its file names ("translate", "step", ...); `client.showSidebarNavigation = false` in
.streamlit/config.toml keeps that menu hidden, so it never flashes up before ours.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

import streamlit as st

from attnscope.checkpoints.registry import checkout
from attnscope.engine.decoding.translator import Translator
from attnscope.ui import models, state
from attnscope.ui.menu import Menu, PageSpec, by_section, page_specs
from attnscope.ui.records import note_needs_model

if TYPE_CHECKING:
    from streamlit.navigation.page import StreamlitPage  # what st.Page returns


def specs() -> tuple[PageSpec, ...]:
    """Every page in the menu's order, as the page scripts declare it: the one list the app, its pages and the
    tests read."""
    return page_specs(checkout())


def sections() -> dict[str, tuple[PageSpec, ...]]:
    """The pages by section, in the menu's order."""
    return by_section(specs())


def script(title: str) -> str:
    """The script of the page titled `title` in the menu (for `st.switch_page`)."""
    found = [spec.script for spec in specs() if spec.title == title]
    if not found:
        raise ValueError(f"no page titled {title!r} in the menu")
    return found[0]


# This session ran through app.py's router; a lone page run asked the router to take over once.
ROUTED, RETRIED = state.Key("_routed"), state.Key("_router_retried")
DEFAULT_PATH = "start"  # reserved by the default page, which Streamlit serves at / (its file's name goes to an alias)


def pages() -> dict[str, list[StreamlitPage]]:
    """The pages as `st.Page` objects by section; the menu's first (Translate) is where the app opens."""
    grouped = sections()
    first = next(iter(grouped.values()))[0]
    return {section: [st.Page(p.script, title=p.title, icon=p.icon, default=p is first,
                              **({"url_path": DEFAULT_PATH} if p is first else {})) for p in section_specs]
            for section, section_specs in grouped.items()}


def aliases() -> list[StreamlitPage]:
    """The default page (Translate, served at /) again under its file's name, so /translate opens it too (the
    default page reserves a path it does not serve: without the alias, /translate was "Page not found")."""
    first = specs()[0]
    return [st.Page(first.script, title=first.title, icon=first.icon, url_path=Path(first.script).stem)]


def route() -> tuple[StreamlitPage, dict[str, list[StreamlitPage]]]:
    """app.py's router: the page the URL asks for (run it last) and the pages to link to (aliases left out)."""
    sections = pages()
    state.store(ROUTED, True)
    return _navigation(sections), sections


def _navigation(sections: dict[str, list[StreamlitPage]]) -> StreamlitPage:
    """`st.navigation` over the sections' pages and the aliases, its own menu hidden (the sidebar draws ours)."""
    return st.navigation({**sections, "": aliases()}, position="hidden")


def sidebar_links(sections: dict[str, list[StreamlitPage]]) -> None:
    """The menu: a caption per section and a link per page (the current one highlighted)."""
    for section, section_pages in sections.items():
        st.caption(section)
        for page in section_pages:
            st.page_link(page)


def _through_router() -> None:
    """Make sure the page runs inside app.py's router (sidebar, URL restore, shared selectors).

    On a fresh server a deep link such as /step?sentence=... first runs the step page's script alone (the
    legacy `pages/` mode the module docstring describes) and would ignore the URL. Calling
    `st.navigation` leaves that mode; the rerun then goes through app.py to the same page.
    """
    if state.stored(ROUTED) or state.stored(RETRIED):
        return
    state.store(RETRIED, True)
    _navigation(pages())
    st.rerun()


def open_page(menu: Menu, *, needs_model: bool = True,
              record_view: Callable[[], bool] | None = None) -> Translator | None:
    """Every page's first line, given the page's own menu entry: run through the router and show its title.

    With `needs_model`, return the active checkpoint's translator, or stop the page when it cannot
    be loaded (the error is shown). A saved attention record opened on the Checkpoints page is drawn by
    `record_view` on the pages that can show one without a model (Translate, Step, Heads: it returns
    whether it drew one, and then the page stops there); other model pages say where it is shown.
    """
    _through_router()
    st.title(menu.title)
    if not needs_model:
        return None
    if record_view is not None and record_view():
        st.stop()
    if record_view is None:
        note_needs_model()
    tr = models.translator()
    if tr is None:
        st.stop()
    return tr

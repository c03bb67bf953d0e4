"""The app's pages in sections, the sidebar's links to them, and the one call every page opens with.

Only public Streamlit API: `st.navigation` routes (its own menu hidden) and `st.page_link` draws the
sidebar's menu, one labelled group per section. On a fresh server's first run, before anything has
called `st.navigation`, Streamlit treats `pages/` as a legacy multipage folder and builds a menu
from its file names ("translate", "step", ...); `client.showSidebarNavigation = false` in
.streamlit/config.toml keeps that menu hidden, so it never flashes up before ours.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import streamlit as st

from attnscope.engine.decoding.translator import Translator
from attnscope.ui import models, state
from attnscope.ui.records import note_needs_model

if TYPE_CHECKING:
    from streamlit.navigation.page import StreamlitPage  # what st.Page returns

@dataclass(frozen=True)
class PageSpec:
    """One page: its script (from the repository root), its title in the menu and its icon."""

    script: str
    title: str
    icon: str


SECTIONS: dict[str, tuple[PageSpec, ...]] = {
    "Look": (PageSpec("pages/translate.py", "Translate", ":material/translate:"),
             PageSpec("pages/step.py", "Step through decoding", ":material/step:"),
             PageSpec("pages/heads.py", "Heads & layers", ":material/grid_view:"),
             PageSpec("pages/atlas.py", "Head atlas", ":material/scatter_plot:"),
             PageSpec("pages/inside.py", "Inside one head", ":material/neurology:")),
    "Explain": (PageSpec("pages/attribution.py", "Attribution", ":material/insights:"),
                PageSpec("pages/positional.py", "Positional encoding", ":material/waves:"),
                PageSpec("pages/anatomy.py", "Model anatomy", ":material/account_tree:")),
    "Build": (PageSpec("pages/train.py", "Train", ":material/model_training:"),
              PageSpec("pages/checkpoints.py", "Checkpoints", ":material/save:")),
}


def specs() -> tuple[PageSpec, ...]:
    """Every page in the menu's order: the one list the app, its pages and the tests read."""
    return tuple(spec for section in SECTIONS.values() for spec in section)


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
    """The pages as `st.Page` objects by section; the first (Translate) is where the app opens."""
    first = next(iter(SECTIONS.values()))[0]
    return {section: [st.Page(p.script, title=p.title, icon=p.icon, default=p is first,
                              **({"url_path": DEFAULT_PATH} if p is first else {})) for p in specs]
            for section, specs in SECTIONS.items()}


def aliases() -> list[StreamlitPage]:
    """The default page (Translate, served at /) again under its file's name, so /translate opens it too (the
    default page reserves a path it does not serve: without the alias, /translate was "Page not found")."""
    first = next(iter(SECTIONS.values()))[0]
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

    On a fresh server a deep link such as /step?sentence=... first runs pages/step.py alone (the
    legacy `pages/` mode the module docstring describes) and would ignore the URL. Calling
    `st.navigation` leaves that mode; the rerun then goes through app.py to the same page.
    """
    if state.stored(ROUTED) or state.stored(RETRIED):
        return
    state.store(RETRIED, True)
    _navigation(pages())
    st.rerun()


def open_page(title: str, *, needs_model: bool = True, record_view: Callable[[], bool] | None = None) -> Translator | None:
    """Every page's first line: run through the router and show `title`.

    With `needs_model`, return the active checkpoint's translator, or stop the page when it cannot
    be loaded (the error is shown). A saved attention record opened on the Checkpoints page is drawn by
    `record_view` on the pages that can show one without a model (Translate, Step, Heads: it returns
    whether it drew one, and then the page stops there); other model pages say where it is shown.
    """
    _through_router()
    st.title(title)
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

"""Inside one head: how each attention weight is computed, step by step, on the current sentence."""
import streamlit as st

from attnscope.ui import inside_page, state, widgets
from attnscope.ui.navigation import open_page

tr = open_page("Inside one head")
view = state.read()
_, result = widgets.translated_sentence(tr, view)
HEAD_TAB, POSITIONS_TAB = "1–5 · The head, step by step", "6 · Positional encodings (section 3.5)"


@st.fragment
def positional_panels() -> None:
    """Section 6: reruns alone when its sliders move."""
    inside_page.positional_panels(tr)


# Only the open tab is drawn: the head's sections are answered in the browser (the explorer), and the positional
# panels' plotly charts would be redrawn on each pick it reports (~0.1 s each in the browser).
head_tab, positions_tab = st.tabs([HEAD_TAB, POSITIONS_TAB], key=state.INSIDE_TAB, on_change="rerun",
                                  bind="query-params")  # the open tab is in the URL
with head_tab:
    if head_tab.open:
        inside_page.head_explorer(tr, result, view)
with positions_tab:
    if positions_tab.open:
        positional_panels()

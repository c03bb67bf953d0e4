"""Inside one head: how each attention weight is computed, step by step, on the current sentence."""
import streamlit as st

from attnscope.ui import inside_page, state, widgets
from attnscope.ui.navigation import open_page
from attnscope.ui.url import write_url

tr = open_page("Inside one head")
view = state.read()
_, result = widgets.translated_sentence(tr, view)
HEAD_TAB, POSITIONS_TAB = "1–5 · The head, step by step", "6 · Positional encodings (section 3.5)"


@st.fragment
def head_panels() -> None:
    """Everything that depends on the chosen token and step: reruns alone when they change (reading the view again)."""
    inside_page.head_steps(tr, result, inside_page.choose(state.read(), result, picked), picked)
    write_url((state.STEP,))  # a fragment rerun skips the app's own URL update


@st.fragment
def positional_panels() -> None:
    """Section 6: reruns alone when its sliders move; its plotly charts stay out of the head's reruns."""
    inside_page.positional_panels(tr)


# Only the open tab is drawn: picking a kind, layer or head reruns the whole app (the sidebar shows the same
# choice), and the positional panels' plotly charts would be redrawn each time (~0.1 s each in the browser).
head_tab, positions_tab = st.tabs([HEAD_TAB, POSITIONS_TAB], key=state.INSIDE_TAB, on_change="rerun",
                                  bind="query-params")  # the open tab is in the URL
with head_tab:
    if head_tab.open:
        picked = inside_page.choose_head(tr, view)  # the sidebar's kind, layer and head
        head_panels()
with positions_tab:
    if positions_tab.open:
        positional_panels()

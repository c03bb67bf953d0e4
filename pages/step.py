"""Step through decoding: at each step the prefix, the choice, its rivals and where the model looked."""
from attnscope.ui import records, state, widgets
from attnscope.ui.navigation import open_page
from attnscope.ui.step_page import beam_view, step_view

tr = open_page("Step through decoding", record_view=records.show_on_steps)  # an opened record: its rows, read-only
view = state.read()
query, result = widgets.translated_sentence(tr, view)
step_view(tr, view, query, result)
if query.beam > 1:
    beam_view(tr, view, query, result)

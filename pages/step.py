"""Step through decoding: at each step the prefix, the choice, its rivals and where the model looked."""
from attnscope.ui import records, step_page
from attnscope.ui.navigation import open_page

tr = open_page("Step through decoding", record_view=records.show_on_steps)  # an opened record: its rows, read-only
step_page.show(tr)

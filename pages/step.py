"""Step through decoding: at each step the prefix, the choice, its rivals and where the model looked."""
from attnscope.ui import records, step_page
from attnscope.ui.navigation import Menu, open_page

MENU = Menu("Step through decoding", ":material/step:", section="Look", order=20)
tr = open_page(MENU, record_view=records.show_on_steps)  # an opened record: its rows, read-only
step_page.show(tr)

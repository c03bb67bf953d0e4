"""Heads & layers: all heads at once, head statistics, comparisons, ablation, rollout."""
from attnscope.ui import heads_page, records
from attnscope.ui.navigation import Menu, open_page

MENU = Menu("Heads & layers", ":material/grid_view:", section="Look", order=30)
tr = open_page(MENU, record_view=records.show_on_heads)  # an opened record: its grid and statistics
heads_page.show(tr)

"""Heads & layers: all heads at once, head statistics, comparisons, ablation, rollout."""
from attnscope.ui import heads_page, records
from attnscope.ui.navigation import open_page

tr = open_page("Heads & layers", record_view=records.show_on_heads)  # an opened record: its grid and statistics
heads_page.show(tr)

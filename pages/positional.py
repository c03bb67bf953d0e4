"""Positional encodings: the sinusoids of the paper next to the loaded model's own encodings."""
from attnscope.ui import positional_page
from attnscope.ui.navigation import open_page

tr = open_page("Positional encoding")
positional_page.show(tr)

"""Positional encodings: the sinusoids of the paper next to the loaded model's own encodings."""
from attnscope.ui import positional_page
from attnscope.ui.navigation import Menu, open_page

MENU = Menu("Positional encoding", ":material/waves:", section="Explain", order=20)
tr = open_page(MENU)
positional_page.show(tr)

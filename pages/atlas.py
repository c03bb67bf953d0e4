"""Head atlas: every head's queries and keys over a sample of sentences, one joint map per head."""
from attnscope.ui import atlas_page, state
from attnscope.ui.navigation import Menu, open_page

MENU = Menu("Head atlas", ":material/scatter_plot:", section="Look", order=40)
tr = open_page(MENU)
atlas_page.atlas_view(tr, state.read())

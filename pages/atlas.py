"""Head atlas: every head's queries and keys over a sample of sentences, one joint map per head."""
from attnscope.ui import atlas_page, state
from attnscope.ui.navigation import open_page

tr = open_page("Head atlas")
atlas_page.atlas_view(tr, state.read())

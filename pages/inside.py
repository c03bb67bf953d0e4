"""Inside one head: how each attention weight is computed, step by step, on the current sentence."""
from attnscope.ui import inside_page
from attnscope.ui.navigation import open_page

inside_page.show(open_page("Inside one head"))

"""Inside one head: how each attention weight is computed, step by step, on the current sentence."""
from attnscope.ui import inside_page
from attnscope.ui.navigation import Menu, open_page

MENU = Menu("Inside one head", ":material/neurology:", section="Look", order=50)
inside_page.show(open_page(MENU))

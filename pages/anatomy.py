"""Model anatomy: the checkpoint's config, where the parameters are, and every tensor's shape."""
from attnscope.ui import anatomy_page
from attnscope.ui.navigation import Menu, open_page

MENU = Menu("Model anatomy", ":material/account_tree:", section="Explain", order=30)
tr = open_page(MENU)
anatomy_page.show(tr)

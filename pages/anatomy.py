"""Model anatomy: the checkpoint's config, where the parameters are, and every tensor's shape."""
from attnscope.ui import anatomy_page
from attnscope.ui.navigation import open_page

tr = open_page("Model anatomy")
anatomy_page.show(tr)

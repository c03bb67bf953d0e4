"""Attribution: what each source token and the target prefix actually contributed to each generated token."""
from attnscope.ui.attribution import page
from attnscope.ui.navigation import Menu, open_page

MENU = Menu("Attribution", ":material/insights:", section="Explain", order=10)
tr = open_page(MENU)
page.show(tr)

"""Attribution: what each source token and the target prefix actually contributed to each generated token."""
from attnscope.ui.attribution import page
from attnscope.ui.navigation import open_page

tr = open_page("Attribution")
page.show(tr)

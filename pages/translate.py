"""Translate a sentence and see every kind of attention, one head large and all heads at once (in the browser)."""
from attnscope.ui import translate_page
from attnscope.ui.navigation import Menu, open_page
from attnscope.ui.records import show_opened

MENU = Menu("Translate", ":material/translate:", section="Look", order=10)
tr = open_page(MENU, record_view=show_opened)  # a record opened on the Checkpoints page: shown without a model
translate_page.show(tr)

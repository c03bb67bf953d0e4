"""Checkpoints: list, activate, download, delete, and upload your own."""

from attnscope.ui import models, state
from attnscope.ui.checkpoints.imports import import_model
from attnscope.ui.checkpoints.manage import flash, manage, overview, skipped_files, upload
from attnscope.ui.navigation import Menu, open_page
from attnscope.ui.records import open_record

MENU = Menu("Checkpoints", ":material/save:", section="Build", order=20)
open_page(MENU, needs_model=False)
flash()
entries = models.entries()
overview(entries)
skipped_files()
manage(state.read(), entries)
upload()
import_model()
open_record()

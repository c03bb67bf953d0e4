"""Checkpoints: list, activate, download, delete, and upload your own."""

from attnscope.ui import models, state
from attnscope.ui.checkpoint_tools import flash, manage, overview, skipped_files, upload
from attnscope.ui.import_tools import import_model
from attnscope.ui.navigation import open_page
from attnscope.ui.record_tools import open_record

open_page("Checkpoints", needs_model=False)
flash()
entries = models.entries()
overview(entries)
skipped_files()
manage(state.read(), entries)
upload()
import_model()
open_record()

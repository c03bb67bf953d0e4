"""Checkpoints: list, activate, download, delete, and upload your own."""
import streamlit as st

from attnscope.checkpoints import registry
from attnscope.ui import models
from attnscope.ui.checkpoint_tools import flash, manage, table, upload
from attnscope.ui.import_tools import import_model
from attnscope.ui.navigation import open_page
from attnscope.ui.record_tools import open_record
from attnscope.ui.text import plain

open_page("Checkpoints", needs_model=False)
flash()
entries = models.entries()
st.dataframe(table(entries), hide_index=True, width="stretch")
for folder, origin in ((registry.user_dir(), "user"),):
    for problem in registry.scan(folder, origin)[1]:
        st.warning(plain(f"Skipped a file in {folder}: {problem}"))
manage(entries)
upload()
import_model()
open_record()

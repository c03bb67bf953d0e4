"""Checkpoints: list, activate, download, delete, and upload your own."""
import pandas as pd
import streamlit as st

from attnscope.checkpoints import registry
from attnscope.ui import state
from attnscope.ui.checkpoint_tools import flash, manage, upload
from attnscope.ui.import_tools import import_model
from attnscope.ui.navigation import open_page
from attnscope.ui.record_tools import open_record
from attnscope.ui.text import plain

open_page("Checkpoints", needs_model=False)
flash()
entries = state.entries()
rows = [{"name": e.name, "origin": e.origin, "pair": f"{e.bundle.src_lang}→{e.bundle.tgt_lang}",
         "parameters": f"{e.parameters:,}",
         "layers": f"{e.bundle.config.n_encoder_layers}+{e.bundle.config.n_decoder_layers}",
         "d_model / heads": f"{e.bundle.config.d_model} / {e.bundle.config.n_heads}",
         "positional": e.bundle.config.positional, "data": e.bundle.summary.get("data", ""),
         "steps": e.bundle.summary.get("steps", ""), "val BLEU": e.bundle.summary.get("best_val_bleu", ""),
         "test BLEU": e.bundle.summary.get("test_2016_bleu", ""), "date": e.bundle.summary.get("date", ""),
         "size MB": round(e.size / 1e6, 1)} for e in entries.values()]
st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
for folder, origin in ((registry.user_dir(), "user"),):
    for problem in registry.scan(folder, origin)[1]:
        st.warning(plain(f"Skipped a file in {folder}: {problem}"))
manage(entries)
upload()
import_model()
open_record()

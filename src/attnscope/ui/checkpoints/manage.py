"""Widgets of the Checkpoints page: the table, activate, download, delete, upload (importing: imports.py)."""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from attnscope.checkpoints import registry, session_files
from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.ui import models, state, tables
from attnscope.ui.state import ViewState
from attnscope.ui.text import plain
from attnscope.ui.widgets import new_upload

# The table's number columns and their types (nullable: a file may not record the fact).
# The checkpoint picked to manage, the active one it followed, the one asked to be deleted, a message for the next run.
NAME, ACTIVE_WAS = state.Key("manage_name"), state.Key("_manage_active_was")
CONFIRM_DELETE, FLASH = state.Key("confirm_delete"), state.Key("_flash")
NUMBERS = {"steps": "Int64", "val BLEU": "Float64", "test BLEU": "Float64"}


def _text(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _number(value: Any) -> float | None:
    """A number, or a number written as text (the shipped files record their scores as "40.48"); else None."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _first_number(summary: dict[str, Any], *keys: str) -> float | None:
    return next((n for n in (_number(summary.get(k)) for k in keys) if n is not None), None)


def _whole(value: Any) -> int | None:
    number = _number(value)
    return int(number) if number is not None and math.isfinite(number) and number == int(number) else None


def table(entries: dict[str, registry.Entry]) -> pd.DataFrame:
    """One row per checkpoint. A fact a file does not record (an imported model has no training steps)
    is left empty, and each column keeps one type: a column mixing numbers with "" cannot go to the
    browser as Arrow (Streamlit logs ArrowInvalid with a traceback and converts it all to text).
    The long text (what it was trained on, or where it was imported from) comes last, so it pushes no score or
    date off-screen. Scores are of the file itself, as Model anatomy's facts say: its own val BLEU where it was scored after
    training (an averaged file), else the best validation's, which is the one a trained run saves."""
    rows = [{"name": e.name, "origin": e.origin, "pair": f"{e.bundle.src_lang}→{e.bundle.tgt_lang}",
             "parameters": f"{e.parameters:,}",
             "layers": f"{e.bundle.config.n_encoder_layers}+{e.bundle.config.n_decoder_layers}",
             "d_model / heads": f"{e.bundle.config.d_model} / {e.bundle.config.n_heads}",
             "positional": e.bundle.config.positional, "steps": _whole(e.bundle.summary.get("steps")),
             "val BLEU": _first_number(e.bundle.summary, "val_bleu", "best_val_bleu"),
             "test BLEU": _number(e.bundle.summary.get("test_2016_bleu")), "date": _text(e.bundle.summary.get("date")),
             "size MB": round(e.size / 1e6, 1),
             "data": _text(e.bundle.summary.get("data"))} for e in entries.values()]  # last: an import's is long
    return pd.DataFrame(rows).astype({c: t for c, t in NUMBERS.items() if rows})


def overview(entries: dict[str, registry.Entry]) -> None:
    """The checkpoints as a table, each column explained on hover."""
    tables.table(table(entries), tables.CHECKPOINTS)


def manage(view: ViewState, entries: dict[str, registry.Entry]) -> None:
    """Pick one checkpoint to activate, download, inspect or delete; it shows the active one whenever
    that changes (an upload, an import, the sidebar), and otherwise keeps the user's pick."""
    st.subheader("Manage")
    names = list(entries)
    current = view.checkpoint
    if state.stored(ACTIVE_WAS) != current or state.stored(NAME) not in names:
        state.store(ACTIVE_WAS, current)
        state.store(NAME, current if current in names else names[0])
    name = st.selectbox("Checkpoint", names, key=NAME)
    chosen = entries[name]
    cols = st.columns(3)
    cols[0].button("Set active", on_click=state.set_checkpoint, args=(name,), key="activate", disabled=name == current)
    cols[1].download_button("Download", chosen.path.read_bytes, f"{name}.safetensors",  # read on the click only:
                            "application/octet-stream", key="download_ckpt")  # a 1.3B model's file is 5 GB
    if chosen.origin == "shipped":
        cols[2].caption("Shipped checkpoints are read-only.")
    elif cols[2].button("Delete", key="delete", type="secondary"):
        state.store(CONFIRM_DELETE, name)
    if state.stored(CONFIRM_DELETE) == name and chosen.origin != "shipped":
        st.warning(f"Delete {name} for good?")
        if st.button("Yes, delete it", key="confirm"):
            registry.delete(chosen.path)
            state.forget(CONFIRM_DELETE)
            if current == name:
                state.forget(state.CHECKPOINT)
            st.rerun()
    with st.expander("Details"):
        st.markdown(f"**SHA-256** `{chosen.sha256()}`  \n**File** `{chosen.path.name}` · {chosen.size / 1e6:.1f} MB")
        st.json({"config": chosen.bundle.config.__dict__, "summary": chosen.bundle.summary})
    if chosen.origin == "session" and st.button("Save to the shared models folder", key="share"):
        try:
            registry.store(chosen.path, chosen.path.name, registry.user_dir(),
                           {n for n, e in entries.items() if e.origin != "session"})
            st.success(f"Saved {name} for everyone.")
            st.rerun()
        except CheckpointError as err:
            st.error(plain(err))


def skipped_files() -> None:
    """A warning for each file in the user's folder that is not a usable checkpoint, saying why."""
    folder = registry.user_dir()
    for problem in registry.scan(folder, "user")[1]:
        st.warning(plain(f"Skipped a file in {folder}: {problem}"))


def upload() -> None:
    """Upload an attnscope .safetensors bundle; it is private to this session until shared."""
    st.subheader("Upload")
    limit = max(1, registry.MAX_UPLOAD_BYTES // 2**20)  # MB: the caption and the uploader say the same
    st.caption(f"An attnscope checkpoint (.safetensors, at most {limit} MB). It is checked "
               "completely before use, nothing in it is executed, and only you see it until you save it for everyone. "
               "An upload lasts only for this browser session: reloading the page or opening a shared link starts a "
               "new session without it, so use “Save to the shared models folder” (under Manage) to keep it.")
    file = new_upload("Checkpoint file", "upload_file", max_mb=limit)
    if file is None:
        return
    same = registry.identical(file.getvalue(), models.entries().values())
    if same is not None:
        state.set_checkpoint(same.name)
        state.store(FLASH, f"{file.name} is identical to {same.name} (the same SHA-256), which is already "
                                 f"installed: {same.name} is now the active checkpoint on every page.")
        st.rerun()
    try:
        tmp = registry.validate_upload(file.getvalue(), file.name)
    except CheckpointError as err:
        st.error(f"Upload rejected: {plain(rejection(err))}")
        return
    keep_for_session(tmp, file.name)


# What the safetensors library says of bytes that are no safetensors file ("Error while deserializing header:
# header too large"), which the checkpoint loader passes on in parentheses.
RAW_HEADER = re.compile(r" \((?:Error while deserializing header|HeaderTooLarge|InvalidHeader)[^)]*\)")


def rejection(err: CheckpointError) -> str:
    """Why an upload was refused, in words: the safetensors library's own header message becomes a sentence."""
    text = str(err)
    if not RAW_HEADER.search(text):
        return text
    return RAW_HEADER.sub("", text) + (": its first bytes are not the header a .safetensors file starts with, so it is "
                                       "damaged, cut short, or another kind of file. Upload a checkpoint saved by attnscope "
                                       "(Download on this page, or the Train page), or import other models below")


def keep_for_session(tmp: Path, filename: str) -> None:
    """Store a validated checkpoint for this session only, make it active, and refresh the page; the temporary
    file goes either way."""
    try:
        folder = state.stored(state.SESSION_MODELS_DIR) or session_files.new_folder()  # goes with the session
        state.store(state.SESSION_MODELS_DIR, folder)
        path = registry.store(tmp, filename, folder.path, set(models.entries()))
    except CheckpointError as err:
        st.error(f"Upload rejected: {plain(err)}")
        return
    finally:
        tmp.unlink(missing_ok=True)
    state.set_checkpoint(path.stem)
    state.store(FLASH, f"Loaded {path.stem}; it is now the active checkpoint on every page.")
    st.rerun()


def flash() -> None:
    """Show a message left by the previous run (e.g. before a rerun refreshed the list)."""
    message = state.forget(FLASH)
    if message:
        st.success(plain(message))


# What each summary entry measures, and of which file: `best_val_bleu` is the training run's best
# validation score (greedy, one evaluation checkpoint, before any averaging); the other scores are
# of this file itself, scored afterwards as `scored_with` says.
SUMMARY_FACTS = (("data", "data"), ("steps", "training steps"), ("epochs", "epochs"),
                 ("best_val_bleu", "best val BLEU during training (greedy, best single training checkpoint)"),
                 ("val_bleu", "val BLEU of this file"), ("test_2016_bleu", "test 2016 BLEU of this file"),
                 ("scored_with", "this file scored with"), ("averaged_from", "this file averages"), ("date", "saved"))


def training_facts(summary: dict[str, object]) -> list[str]:
    """“label: value” for the summary entries a reader needs, each saying which file it belongs to."""
    facts = []
    for key, label in SUMMARY_FACTS:
        if key in summary:
            value = summary[key]
            value = f"{len(value)} checkpoints" if isinstance(value, list) else value
            facts.append(f"{label}: {value}")
    return facts

"""The checkpoints a session can use and their loaded translators (shared by every session)."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import streamlit as st

from attnscope.checkpoints import checkpoint, registry, session_files
from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.registry import default_checkpoint, shipped_dir
from attnscope.engine.decoding.translator import Translator
from attnscope.model.device import apply_thread_policy
from attnscope.ui import state
from attnscope.ui.text import plain

__all__ = ["available_checkpoints", "entries", "fit_checkpoint", "shipped_dir", "translator"]


@st.cache_resource(max_entries=64, show_spinner=False)
def _entry(path: str, mtime: float, origin: str) -> registry.Entry:
    return registry.entry(Path(path), origin)  # type: ignore[arg-type]


@st.cache_resource(show_spinner=False)
def sweep_leftovers() -> tuple[Path, ...]:
    """Once per server, at its first run: remove the session folders a killed server left behind."""
    return tuple(session_files.sweep())


def entries() -> dict[str, registry.Entry]:
    """Every checkpoint this session can use: shipped (default first), shared user models, own uploads."""
    found: dict[str, registry.Entry] = {}
    folders = [(shipped_dir(), "shipped"), (registry.user_dir(), "user")]
    session = state.stored(state.SESSION_MODELS_DIR)
    if session:
        folders.append((session.path, "session"))
    default = default_checkpoint().stem
    for folder, origin in folders:
        paths = sorted(folder.glob("*.safetensors"), key=lambda p: p.stem != default) if folder.is_dir() else []
        for path in paths:
            if path.stem in found:
                continue
            try:
                found[path.stem] = _entry(str(path), path.stat().st_mtime, origin)
            except (CheckpointError, OSError):
                continue  # listed with its problem on the Checkpoints page
    return found


def available_checkpoints() -> dict[str, Path]:
    """Checkpoints the user can pick, by display name (file stem), default first."""
    return {name: e.path for name, e in entries().items()}


@st.cache_resource(max_entries=6, show_spinner="Loading the model…")
def _load(path: str, mtime: float) -> Translator:
    apply_thread_policy()  # the server's process decodes with the policy's threads (docs/design.md, "Threads")
    model, bundle = checkpoint.load(path)
    return Translator(model, bundle, label=Path(path).stem, revision=mtime)


def translator(name: str | None = None) -> Translator | None:
    """The translator of the named (default: active) checkpoint, or None with an error shown."""
    choices = available_checkpoints()
    name = name or state.stored(state.CHECKPOINT) or next(iter(choices), None)
    if name not in choices:
        st.error(f"No checkpoint named {plain(repr(name))}. Available: {plain(', '.join(choices) or 'none')}.")
        return None
    path = choices[name]
    try:
        return _load(str(path), path.stat().st_mtime)
    except CheckpointError as err:
        st.error(f"Could not load {plain(name)}: {plain(err)}")
        return None


def fit_checkpoint(choices: Sequence[str]) -> str | None:
    """Keep the active checkpoint among `choices`; say why when the chosen one has gone.

    Another session can delete a shared user model, and an uploaded model lives only as long as the
    session that uploaded it (a reload, or a shared link, starts a new session without it).
    """
    wanted = state.stored(state.CHECKPOINT)
    if wanted in choices:
        return None
    state.set_checkpoint(choices[0])
    if wanted is None:
        return None
    return (f"The checkpoint {plain(repr(wanted))} is no longer available: it was deleted, or it was uploaded in an "
            f"earlier session (uploads last only until the page is reloaded). Showing {plain(choices[0])} instead.")

"""The session's state: the one module touching st.session_state, the typed view a run reads, and named writes.

Pages read the view once at their top (`read`) and pass it on; what changes the view (the sidebar, the URL, the
step buttons, a forced token, a new checkpoint) goes through the setters below. The keys spelled here are the
shared ones (the view, the sidebar's, the session's), which several modules read; any other key, a page's above all,
is declared as `state.Key("...")` by the one ui module that reads it (e.g. ui/heads_page.py), and
`tests/test_architecture.py` holds every key to one declaration and each declared key to its module.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NewType

import streamlit as st

from attnscope.records.attention import KINDS, Kind

Key = NewType("Key", str)  # a session key declared by the ui module that owns it: `SPLIT_STATS = state.Key("...")`

DEFAULT_SENTENCE = "A little girl climbs into a wooden playhouse."

# The view: shared by every page and kept in the URL (ui/url.py).
SENTENCE, CHECKPOINT, KIND, LAYER, HEAD = "sentence", "checkpoint", "kind", "layer", "head"
STEP, BEAM, MAX_LEN, FORCE = "step", "beam", "max_len", "force"
VIEW_KEYS = (SENTENCE, CHECKPOINT, KIND, LAYER, HEAD, STEP, BEAM, MAX_LEN, FORCE)
MEAN = "mean"  # the head selector's "mean of heads"

# Widgets whose values other code reads (the sidebar's camera format).
IMAGE_FORMAT = "image_format"
TASK_PREFIX = "task_prefix-"  # + a checkpoint's name: the task prefix the user gave that model (ui.widgets.sentence_box)
RULES = "rules"  # whose decoding rules decode an imported model: "model" (its framework's) or "attnscope"

# What the app remembers between runs of one session.
URL_FORCE = "_url_force"  # the URL's forced token, not yet placed in the Step page's boxes
SESSION_MODELS_DIR = "session_models_dir"  # this session's uploaded checkpoints: a SessionFolder, removed with it


def shadow(key: str) -> str:
    """The key of a widget that shows and sets the value kept under `key` (ui/persist.py)."""
    return "_w_" + key


def handled_upload(uploader: str) -> str:
    """The key remembering which file uploader `uploader` last handled."""
    return f"_handled_{uploader}"


def inside_query(kind: Kind) -> str:
    """The Inside page's query-token picker of one kind of attention."""
    return f"inside_query_{kind}"


def task_prefix(checkpoint: str) -> str:
    """Where the task prefix the user gave checkpoint `checkpoint` is kept (each model keeps its own)."""
    return TASK_PREFIX + checkpoint


def explorer_sent(key: str) -> str:
    """Where the selection the explorer mounted under `key` was last opened on is kept (ui/explorer.py)."""
    return f"_explorer_sent-{key}"


def explorer_reported(key: str) -> str:
    """Where the selection the explorer mounted under `key` last reported from the browser is kept."""
    return f"_explorer_reported-{key}"


def explorer_fetched(key: str) -> str:
    """Where the last layer request the explorer under `key` made, once served, is kept (ui/explorer.py)."""
    return f"_explorer_fetched-{key}"


def explorer_follow(key: str) -> str:
    """Set when the explorer under `key` reported a pick: its next run reruns the whole app, which follows it."""
    return f"_explorer_follow-{key}"


@dataclass(frozen=True)
class ViewState:
    """What the pages show, as stored: fit `layer` and `head` to a model with ui/selection.py."""

    sentence: str = DEFAULT_SENTENCE
    checkpoint: str | None = None
    kind: Kind = "cross"
    layer: int = 0
    head: int | None = None  # None: the mean of heads
    step: int = 0
    beam: int = 1
    max_len: int | None = None  # None: the budget the source sets
    force: str | None = None  # the Step page's forced token
    rules: str = "model"  # the decoding rules: the checkpoint's own ("model") or attnscope's ("attnscope")
    task_prefixes: tuple[tuple[str, str], ...] = ()  # (checkpoint name, the task prefix the user gave it)

    def task_prefix(self, checkpoint: str) -> str | None:
        """The task prefix the user gave `checkpoint`, None when they gave none (the checkpoint's own applies)."""
        return dict(self.task_prefixes).get(checkpoint)


def read() -> ViewState:
    """The view as this run finds it (call once at the top of a page, or of a fragment, and pass it on)."""
    s = st.session_state
    kind, head, max_len = s.get(KIND, "cross"), s.get(HEAD, MEAN), s.get(MAX_LEN)
    return ViewState(sentence=s.get(SENTENCE, DEFAULT_SENTENCE), checkpoint=s.get(CHECKPOINT),
                     kind=kind if kind in KINDS else "cross", layer=int(s.get(LAYER, 0)),
                     head=None if head == MEAN else int(head), step=int(s.get(STEP, 0)), beam=int(s.get(BEAM, 1)),
                     max_len=None if max_len is None else int(max_len), force=s.get(FORCE) or None,
                     rules=str(s.get(RULES, "model")),
                     task_prefixes=tuple((str(k)[len(TASK_PREFIX):], str(v)) for k, v in s.items()
                                         if str(k).startswith(TASK_PREFIX)))


def stored(key: str, default: Any = None) -> Any:
    """What the session keeps under `key` (one of this module's names)."""
    return st.session_state.get(key, default)


def store(key: str, value: Any) -> None:
    """Keep `value` under `key` (one of this module's names) for later runs of this session."""
    st.session_state[key] = value


def component_value(key: str, field: str) -> Any:
    """What the custom component mounted under `key` last reported as its state `field` (None before it has)."""
    value = st.session_state.get(key)
    return value.get(field) if hasattr(value, "get") else getattr(value, field, None)


def forget(key: str) -> Any:
    """Drop what the session keeps under `key`, returning it (None when there was nothing)."""
    return st.session_state.pop(key, None)


def set_sentence(sentence: str) -> None:
    store(SENTENCE, sentence)


def set_checkpoint(name: str) -> None:
    """Make `name` the active checkpoint on every page."""
    store(CHECKPOINT, name)


def set_kind(kind: Kind) -> None:
    store(KIND, kind)


def set_layer(layer: int) -> None:
    store(LAYER, int(layer))


def set_head(head: int | None) -> None:
    """Select head `head` (None: the mean of heads)."""
    store(HEAD, MEAN if head is None else int(head))


def set_step(step: int) -> None:
    store(STEP, int(step))


def set_beam(beam: int) -> None:
    store(BEAM, int(beam))


def set_max_len(max_len: int | None) -> None:
    store(MAX_LEN, None if max_len is None else int(max_len))


def set_force(token: str | None) -> None:
    """The Step page's forced token (None: nothing forced), which the URL keeps."""
    store(FORCE, token)


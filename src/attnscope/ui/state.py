"""The session's state: every st.session_state key spelled once, the typed view a run reads, and named writes.

Pages read the view once at their top (`read`) and pass it on; what changes the view (the sidebar, the URL, the
step buttons, a forced token, a new checkpoint) goes through the setters below. Keys the code reads or writes
outside the view (a page's remembered results, a widget whose value another function reads) are constants here,
so `tests/test_architecture.py` can hold every other module to these names.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from attnscope.records.attention import KINDS, Kind

DEFAULT_SENTENCE = "A little girl climbs into a wooden playhouse."

# The view: shared by every page and kept in the URL (ui/url.py).
SENTENCE, CHECKPOINT, KIND, LAYER, HEAD = "sentence", "checkpoint", "kind", "layer", "head"
STEP, BEAM, MAX_LEN, FORCE = "step", "beam", "max_len", "force"
VIEW_KEYS = (SENTENCE, CHECKPOINT, KIND, LAYER, HEAD, STEP, BEAM, MAX_LEN, FORCE)
MEAN = "mean"  # the head selector's "mean of heads"

# Widgets whose values other code reads (the tabs are bound to the URL by Streamlit under these keys).
IMAGE_FORMAT, EXAMPLE = "image_format", "_example"
ATTRIBUTION_TAB, HEADS_TAB, INSIDE_TAB = "attr_tab", "heads_tab", "inside_tab"
IG_TOLERANCE, MANAGE_NAME = "ig_tolerance", "manage_name"
TASK_PREFIX = "task_prefix-"  # + a checkpoint's name: the task prefix the user gave that model (ui.widgets.sentence_box)
RULES = "rules"  # whose decoding rules decode an imported model: "model" (its framework's) or "attnscope"
INSIDE_PE_POSITIONS, INSIDE_PE_OFFSET, INSIDE_PE_PAIR = "inside_pe_positions", "inside_pe_offset", "inside_pe_pair"
INSIDE_KIND, INSIDE_LAYER, INSIDE_HEAD = "inside_kind", "inside_layer", "inside_head"  # the sidebar's three, again

# What the app remembers between runs of one session.
URL_RESTORED, URL_FORCE = "_url_restored", "_url_force"  # the URL was read; its forced token, not yet placed
ROUTED, ROUTER_RETRIED = "_routed", "_router_retried"  # ui/navigation.py
OPENED_RECORD = "opened_record"  # (file name, AttentionRecord, meta) of a record opened on the Checkpoints page
SESSION_MODELS_DIR = "session_models_dir"  # this session's uploaded checkpoints: a SessionFolder, removed with it
FLASH, IMPORT_REPORT = "_flash", "_import_report"  # messages left for the run after a rerun
MANAGE_ACTIVE_WAS, CONFIRM_DELETE = "_manage_active_was", "confirm_delete"
SPLIT_STATS, ABLATE_BLEU = "split_stats", "ablate_bleu"  # the Heads page's last sample statistics and BLEU change
IG_DONE = "_attr_ig"  # (query key, (tolerance, points)) of the last attribution with integrated gradients
SPLIT_RUN, LAYERS_RUN, STATS_RUN = "_attr_split_run", "_attr_layers_run", "_attr_stats_run"  # ui/sample_runs.py
LIVE_DECODE, STOP_DECODE = "_live_decode", "_stop_decode"  # (name, TranslationStream) decoding; the name Stop ended
STOPPED_DECODE = "_stopped_decode"  # (name, Translation): the translation this session stopped (ui/live_decode.py)
STOP_BUTTON, DECODE_AGAIN = "stop_decoding", "decode_again"  # Stop (ui/live_decode.py); a stopped decode's restart
INSIDE_QUERY_STEP = "_inside_query_step"  # the step whose query token the Inside page last opened
TRAIN_JOB, TRAIN_TARGET, TRAIN_NAME = "train_job", "train_tgt", "train_name"
TRAIN_SUGGESTED, TRAIN_SOURCE_WAS, TRAIN_PROFILE_WAS = "_train_suggested", "_train_source_was", "_train_profile_was"
TRAIN_SAMPLE_SOURCE = "_train_sample_source"
# The Train page's form fields, kept across pages (ui/persist.py): the key of each by what it sets.
TRAIN_FIELDS = {"data": "train_data", "task": "train_task", "src_lang": "train_src", "preset": "train_preset",
                "sample": "train_sample", "positional": "train_pos", "d_model": "train_d_model", "n_heads": "train_heads",
                "n_encoder_layers": "train_enc", "n_decoder_layers": "train_dec", "d_ff": "train_ff",
                "dropout": "train_dropout", "norm": "train_norm", "epochs": "train_epochs", "max_tokens": "train_tokens",
                "lr": "train_lr", "warmup": "train_warmup", "eval_every": "train_eval_every", "patience": "train_patience"}


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


def force_boxes(step: int) -> tuple[str, str]:
    """The Step page's two ways of forcing a token at `step`: the rival picker and the typed word."""
    return f"force_choice-{step}", f"force_typed-{step}"


def snapshot_keys(job_id: str) -> tuple[str, str]:
    """The Train page's snapshot slider of one job, and whether it follows the latest snapshot."""
    return f"snapshot-{job_id}", f"snapshot-follow-{job_id}"


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


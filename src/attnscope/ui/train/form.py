"""The Train page's run form: data, model and schedule fields that follow the data source and model size."""
from __future__ import annotations

from typing import Any

import streamlit as st

from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.registry import safe_name
from attnscope.model.config import PRESETS
from attnscope.model.device import autocast_dtype, pick_device
from attnscope.training.config import TrainConfig
from attnscope.training.data import LANGUAGES, TOY_TASKS, DataError, corpus_file, data_dir
from attnscope.training.toy import TOY_MODEL, TOY_SCHEDULE
from attnscope.ui import state
from attnscope.ui.persist import keep
from attnscope.ui.state import Key as K
from attnscope.ui.text import plain
from attnscope.ui.train.runs import runs_dir

MAX_EPOCHS = 200
TOY, MULTI30K = "Toy task", "Multi30k"
MULTI30K_SCHEDULE: dict[str, Any] = dict(epochs=20, max_tokens=4000, lr=1e-3, warmup=1000, eval_every=0)
# The form's fields, kept across pages (ui/persist.py): the session key of each by what it sets.
FIELD = {"data": K("train_data"), "task": K("train_task"), "src_lang": K("train_src"), "preset": K("train_preset"),
         "sample": K("train_sample"), "positional": K("train_pos"), "d_model": K("train_d_model"),
         "n_heads": K("train_heads"), "n_encoder_layers": K("train_enc"), "n_decoder_layers": K("train_dec"),
         "d_ff": K("train_ff"), "dropout": K("train_dropout"), "norm": K("train_norm"), "epochs": K("train_epochs"),
         "max_tokens": K("train_tokens"), "lr": K("train_lr"), "warmup": K("train_warmup"),
         "eval_every": K("train_eval_every"), "patience": K("train_patience")}
# The target language and run name the user picked; the name last suggested; the source, profile and sample source
# the defaults were last set for (a change resets the fields that follow them).
TARGET, NAME, SUGGESTED = K("train_tgt"), K("train_name"), K("_train_suggested")
SOURCE_WAS, PROFILE_WAS, SAMPLE_SOURCE = K("_train_source_was"), K("_train_profile_was"), K("_train_sample_source")
# Form fields whose defaults depend on the data source and model size: reset when those change.
MODEL_KEYS = {FIELD[f]: f for f in ("d_model", "n_heads", "n_encoder_layers", "n_decoder_layers", "d_ff", "dropout", "norm")}
SCHEDULE_KEYS = {FIELD[f]: f for f in ("epochs", "max_tokens", "lr", "warmup", "eval_every")}


def multi30k_available(src: str, tgt: str) -> str | None:
    """None if the training and validation files exist, else the message saying what is missing."""
    try:
        for split in ("train", "val"):
            for lang in (src, tgt):
                corpus_file(data_dir(), split, lang)
    except DataError as err:
        return str(err)
    return None


def form_defaults(source: str, preset: str) -> dict[str, Any]:
    """Default values of the model and schedule fields for a data source and model size."""
    toy = source == TOY
    model = dict(PRESETS[preset], **(TOY_MODEL if toy and preset == "toy" else {}))
    schedule = dict(TOY_SCHEDULE if toy else MULTI30K_SCHEDULE)
    values = {key: model.get(name, {"dropout": 0.1, "norm": "post"}.get(name)) for key, name in MODEL_KEYS.items()}
    values |= {key: schedule[name] or 0 for key, name in SCHEDULE_KEYS.items()}
    values[FIELD["patience"]] = 0
    values[FIELD["dropout"]] = float(values[FIELD["dropout"]])
    values[FIELD["lr"]] = float(values[FIELD["lr"]])
    return values


def _reset_when_changed(marker: str, value: object, defaults: dict[str, Any]) -> None:
    """Put fields back to their defaults when `value` (e.g. the data source) differs from last time."""
    if state.stored(marker) != value:
        state.store(marker, value)
        for key, default in defaults.items():
            state.store(key, default)


def _number(column: Any, label: str, low: float, high: float, key: str, defaults: dict[str, Any], **kwargs: Any) -> Any:
    """A number input whose value survives leaving the page, starting at `defaults[key]`."""
    return column.number_input(label, low, high, **kwargs, **keep(key, defaults[key]))


def run_form() -> tuple[TrainConfig | None, str]:
    """The settings of a run (None while they are incomplete) and the sample sentence to watch.

    Every value survives leaving the page; model and schedule fields follow the data source and
    model size, and the run name follows the task until the user types a name of their own."""
    device = pick_device()
    dtype = autocast_dtype(device)
    st.info(f"Training runs on **{device.type.upper()}**" + (" with bf16 autocast." if dtype else " in fp32."))
    cols = st.columns(3)
    source = cols[0].radio("Data", [TOY, MULTI30K], horizontal=True, **keep(FIELD["data"], TOY))
    missing = None
    if source == TOY:
        task = cols[1].selectbox("Task", TOY_TASKS, **keep(FIELD["task"], "reverse"))
        src = tgt = "en"
        suggested = f"toy-{task}"
    else:
        task = "multi30k"
        src = cols[1].selectbox("Source language", LANGUAGES, **keep(FIELD["src_lang"], "en"))
        targets = [lang for lang in LANGUAGES if lang != src]
        if state.stored(TARGET) not in targets:
            state.store(TARGET, targets[0])
        tgt = cols[2].selectbox("Target language", targets, **keep(TARGET, targets[0]))
        suggested = f"my-{src}-{tgt}"
        missing = multi30k_available(src, tgt)
    _reset_when_changed(SOURCE_WAS, source, {FIELD["preset"]: "toy" if source == TOY else "small"})
    preset = st.selectbox("Model size", list(PRESETS), **keep(FIELD["preset"], "toy"))
    defaults = form_defaults(source, preset)
    _reset_when_changed(PROFILE_WAS, (source, preset), defaults)
    overrides: dict[str, Any] = dict(TOY_MODEL) if source == TOY and preset == "toy" else {}  # the form's fields on top
    with st.expander("Expert settings (ModelConfig fields)"):
        c = st.columns(4)
        overrides["d_model"] = _number(c[0], "d_model", 8, 1024, FIELD["d_model"], defaults, step=8)
        overrides["n_heads"] = _number(c[1], "heads", 1, 16, FIELD["n_heads"], defaults)
        overrides["n_encoder_layers"] = _number(c[2], "encoder layers", 1, 12, FIELD["n_encoder_layers"], defaults)
        overrides["n_decoder_layers"] = _number(c[3], "decoder layers", 1, 12, FIELD["n_decoder_layers"], defaults)
        overrides["d_ff"] = _number(c[0], "d_ff", 8, 4096, FIELD["d_ff"], defaults, step=8)
        overrides["dropout"] = _number(c[1], "dropout", 0.0, 0.9, FIELD["dropout"], defaults, step=0.05)
        overrides["positional"] = c[2].selectbox("positional", ["sinusoidal", "learned"],
                                                 **keep(FIELD["positional"], "sinusoidal"))
        overrides["norm"] = c[3].selectbox("norm", ["post", "pre"], **keep(FIELD["norm"], defaults[FIELD["norm"]]))
    c = st.columns(6)
    epochs = _number(c[0], f"Epochs (max {MAX_EPOCHS})", 1, MAX_EPOCHS, FIELD["epochs"], defaults)
    max_tokens = _number(c[1], "Batch size (padded tokens)", 100, 20_000, FIELD["max_tokens"], defaults, step=100)
    lr = _number(c[2], "Peak learning rate", 1e-5, 1e-2, FIELD["lr"], defaults, format="%.5f")
    warmup = _number(c[3], "Warm-up steps", 1, 10_000, FIELD["warmup"], defaults)
    eval_every = _number(c[4], "Validate every (steps; 0 = each epoch)", 0, 100_000, FIELD["eval_every"], defaults)
    patience = _number(c[5], "Stop early after (validations without better BLEU; 0 = never)", 0, 1000,
                       FIELD["patience"], defaults)
    if state.stored(NAME) in (None, state.stored(SUGGESTED)):
        state.store(NAME, suggested)  # the name follows the task until the user types their own
    state.store(SUGGESTED, suggested)
    name = st.text_input("Run name", max_chars=60, **keep(NAME, suggested))
    sample_default = "a b c d e f" if source == TOY else "Two dogs are running through the snow."
    _reset_when_changed(SAMPLE_SOURCE, source, {FIELD["sample"]: sample_default})
    sample = st.text_input("Sample sentence to watch", max_chars=300, **keep(FIELD["sample"], sample_default))
    if missing:
        st.warning(plain(missing))
        return None, sample
    try:
        safe = safe_name(name)
        toy_only = TOY_SCHEDULE if source == TOY else {}
        config = TrainConfig(out_dir=str(runs_dir() / safe), task=task, src_lang=src, tgt_lang=tgt,
                             data_dir=str(data_dir()), preset=preset, model=overrides, epochs=int(epochs),
                             max_tokens=int(max_tokens), lr=float(lr), warmup=int(warmup), name=safe,
                             eval_every=int(eval_every) or None, patience=int(patience) or None,
                             bleu_sentences=200 if task == "multi30k" else None, save_minutes=2.0,
                             toy_size=toy_only.get("toy_size", 5000),
                             label_smoothing=toy_only.get("label_smoothing", 0.1), threads=toy_only.get("threads"))
    except (ValueError, CheckpointError) as err:
        st.error(plain(err))
        return None, sample
    return config, sample


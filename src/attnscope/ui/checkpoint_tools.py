"""Widgets of the Checkpoints page: activate, download, delete, upload."""
from __future__ import annotations

import tempfile
from pathlib import Path

import streamlit as st

from attnscope.checkpoints import checkpoint, registry
from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.convert import ImportSettings, from_torch_transformer, read_state_dict
from attnscope.model.tokenization import TextCodec, TokenizerError
from attnscope.ui import state
from attnscope.ui.text import plain


def _activate(name: str) -> None:
    st.session_state["checkpoint"] = name


def manage(entries: dict[str, registry.Entry]) -> None:
    """Pick one checkpoint to activate, download, inspect or delete."""
    st.subheader("Manage")
    names = list(entries)
    current = st.session_state.get("checkpoint")
    name = st.selectbox("Checkpoint", names, index=names.index(current) if current in names else 0, key="manage_name")
    chosen = entries[name]
    cols = st.columns(3)
    cols[0].button("Set active", on_click=_activate, args=(name,), key="activate", disabled=name == current)
    cols[1].download_button("Download", chosen.path.read_bytes(), f"{name}.safetensors",
                            "application/octet-stream", key="download_ckpt")
    if chosen.origin == "shipped":
        cols[2].caption("Shipped checkpoints are read-only.")
    elif cols[2].button("Delete", key="delete", type="secondary"):
        st.session_state["confirm_delete"] = name
    if st.session_state.get("confirm_delete") == name and chosen.origin != "shipped":
        st.warning(f"Delete {name} for good?")
        if st.button("Yes, delete it", key="confirm"):
            registry.delete(chosen.path)
            st.session_state.pop("confirm_delete", None)
            if st.session_state.get("checkpoint") == name:
                st.session_state.pop("checkpoint")
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


def upload() -> None:
    """Upload an attnscope .safetensors bundle; it is private to this session until shared."""
    st.subheader("Upload")
    st.caption(f"An attnscope checkpoint (.safetensors, at most {registry.MAX_UPLOAD_BYTES // 2**20} MB). It is checked "
               "completely before use, nothing in it is executed, and only you see it until you save it for everyone. "
               "An upload lasts only for this browser session: reloading the page or opening a shared link starts a "
               "new session without it, so use “Save to the shared models folder” (under Manage) to keep it.")
    file = st.file_uploader("Checkpoint file", key="upload_file")
    if file is None or st.session_state.get("_uploaded") == (file.name, file.size):
        return
    st.session_state["_uploaded"] = (file.name, file.size)
    try:
        tmp = registry.validate_upload(file.getvalue(), file.name)
    except CheckpointError as err:
        st.error(f"Upload rejected: {plain(err)}")
        return
    _keep(tmp, file.name)


def _keep(tmp: Path, filename: str) -> None:
    """Store a validated checkpoint for this session only, make it active, and refresh the page."""
    try:
        folder = st.session_state.setdefault("session_models_dir", tempfile.mkdtemp(prefix="attnscope-session-"))
        path = registry.store(tmp, filename, Path(folder), set(state.entries()))
    except CheckpointError as err:
        st.error(f"Upload rejected: {plain(err)}")
        return
    st.session_state["checkpoint"] = path.stem
    st.session_state["_flash"] = f"Loaded {path.stem}; it is now the active checkpoint on every page."
    st.rerun()


def flash() -> None:
    """Show a message left by the previous run (e.g. before a rerun refreshed the list)."""
    message = st.session_state.pop("_flash", None)
    if message:
        st.success(plain(message))


def _codec(file: object, what: str) -> TextCodec:
    try:
        return TextCodec.from_json(file.getvalue().decode("utf-8", errors="replace"))  # type: ignore[attr-defined]
    except TokenizerError as err:
        raise CheckpointError(f"the {what} tokenizer: {err}") from None


def import_state_dict() -> None:
    """Turn an nn.Transformer state_dict (.pt/.pth) plus HF tokenizer JSON into a checkpoint."""
    with st.expander("Import a torch.nn.Transformer model trained elsewhere (.pt/.pth state_dict)"):
        st.caption("The model must be nn.Transformer between token embeddings scaled by √d_model (plus a sinusoidal or "
                   "learned positional encoding) and a linear output layer, as in the PyTorch tutorials. Tokenizers are "
                   "Hugging Face tokenizer.json files with <pad>, <bos>, <eos>, <unk> at ids 0–3. Loaded with "
                   "torch.load(weights_only=True): nothing in the file runs.")
        weights = st.file_uploader("state_dict (.pt / .pth)", key="import_weights")
        src_tok = st.file_uploader("Source tokenizer (tokenizer.json)", key="import_src_tok")
        tgt_tok = st.file_uploader("Target tokenizer (leave empty if the vocabulary is joint)", key="import_tgt_tok")
        cols = st.columns(5)
        heads = cols[0].number_input("Attention heads", 1, 64, 8, key="import_heads")
        norm_first = cols[1].checkbox("norm_first (pre-LN)", key="import_norm_first")
        src_lang = cols[2].text_input("Source language", "en", key="import_src_lang", max_chars=20)
        tgt_lang = cols[3].text_input("Target language", "de", key="import_tgt_lang", max_chars=20)
        max_len = cols[4].number_input("Max positions", 8, 4096, 256, key="import_max_len")
        name = st.text_input("Name", "imported-transformer", key="import_name", max_chars=60)
        if not st.button("Import", key="import_go", disabled=weights is None or src_tok is None):
            return
        try:
            if weights.size > registry.MAX_UPLOAD_BYTES:
                raise CheckpointError(f"{weights.name} is larger than {registry.MAX_UPLOAD_BYTES // 2**20} MB")
            state_dict = read_state_dict(weights.getvalue(), weights.name)
            src_codec = _codec(src_tok, "source")
            tgt_codec = _codec(tgt_tok, "target") if tgt_tok is not None else src_codec
            model, bundle = from_torch_transformer(state_dict, src_codec, tgt_codec, ImportSettings(
                int(heads), bool(norm_first), src_lang.strip() or "src", tgt_lang.strip() or "tgt", int(max_len)))
            tmp = Path(tempfile.mkdtemp()) / "imported.safetensors"
            checkpoint.save(model, bundle, tmp)
        except CheckpointError as err:
            st.error(f"Import rejected: {plain(err)}")
            return
        _keep(tmp, f"{name}.safetensors")


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

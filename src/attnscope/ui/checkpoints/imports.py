"""The Checkpoints page's importer: a state_dict trained elsewhere plus its vocabularies become a checkpoint."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Callable

import streamlit as st

from attnscope.checkpoints import checkpoint, registry
from attnscope.checkpoints.boundary import boundary
from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.import_inputs import parse_examples, parse_specials
from attnscope.checkpoints.importers.parts import Imported
from attnscope.checkpoints.importers.state_dict import import_weights
from attnscope.checkpoints.importers.torch_files import read_state_dict
from attnscope.checkpoints.importers.uploads import import_uploaded
from attnscope.model import untrusted
from attnscope.ui import state
from attnscope.ui.checkpoints.manage import keep_for_session
from attnscope.ui.text import plain

HELP = ("A `torch.nn.Transformer` model (the PyTorch tutorial's Seq2SeqTransformer and the like) or the Annotated "
        "Transformer, saved with `torch.save(model.state_dict(), 'model.pt')`; loaded with `weights_only=True`, so "
        "nothing in the file runs (a whole pickled model is refused: save its state_dict). Vocabularies: a Hugging "
        "Face tokenizer.json, a JSON list of tokens (torchtext: `json.dump(vocab.get_itos(), f)`) or a text file with "
        "one token per line. Word lists get a built-in splitter: whitespace, then every punctuation mark apart "
        "(lowercased when the vocabulary has no capitals). Special tokens are found by name in any order "
        "(<unk> <pad> <bos> <eos>, <sos>, <s> </s>, <blank>...).")
FRAMEWORK_HELP = ("A Hugging Face MarianMT (opus-mt), BART, mBART, M2M100/NLLB, T5, Flan-T5, mT5 or ByT5 model: its "
                  "folder's files together (config.json, model.safetensors or pytorch_model.bin, the tokenizer files) "
                  "or a zip of the folder; multilingual models need their language codes, and a T5 trained on several "
                  "translation tasks the pair whose task prefix it uses (en, de). A fairseq transformer checkpoint with its "
                  "dict.SRC.txt and dict.TGT.txt, or an OpenNMT-py v3 checkpoint. Weights are read without running "
                  "code; the model computes exactly what it computes in its own library. From the command line: "
                  "`python -m attnscope import Helsinki-NLP/opus-mt-en-de --out opus-mt-en-de.safetensors`.")
REPORT = state.Key("_import_report")  # the last import's report, shown on the run after its rerun
FRAMINGS = {"<bos> sentence <eos> (PyTorch tutorial, Annotated Transformer)": "bos-eos", "sentence <eos>": "eos"}


def _report() -> None:
    """The last import's report, kept across the rerun that made the model active."""
    lines = state.forget(REPORT)
    if lines:
        show = st.warning if any(line.startswith("Not checked") for line in lines) else st.info
        show(plain(" ".join(lines)))


def _settings() -> dict[str, Any]:
    cols = st.columns(4)
    out: dict[str, Any] = {"n_heads": int(cols[0].number_input("Attention heads", 1, 64, 8, key="import_heads"))}
    if cols[1].checkbox("norm_first (pre-LN)", key="import_norm_first"):
        out["norm_first"] = True
    out["activation"] = cols[2].selectbox("Activation", ["relu", "gelu"], key="import_activation")
    out["embed_scale"] = cols[3].checkbox("Embeddings × √d_model", True, key="import_embed_scale")
    framing = st.radio("Source sentences were fed as", list(FRAMINGS), key="import_framing", horizontal=True)
    out["source_framing"] = FRAMINGS[framing]
    eps = st.text_input("LayerNorm eps (empty: the family's default, 1e-5; Annotated Transformer 1e-6)", "",
                        key="import_eps", max_chars=20)
    if eps.strip():
        try:
            out["norm_eps"] = float(eps)
        except ValueError:
            raise CheckpointError(f"LayerNorm eps must be a number like 1e-5, got {eps}") from None
    return out


def import_model() -> None:
    """Upload weights and vocabularies, say what the weights cannot show, check against a few outputs, import;
    or a Hugging Face folder, a fairseq or an OpenNMT-py checkpoint, which carry their own settings."""
    _report()
    _state_dict()
    _framework_model()


def _framework_model() -> None:
    """A Hugging Face folder (its files together, or a zip), or a fairseq / OpenNMT-py checkpoint with its files."""
    with st.expander("Import a Hugging Face, fairseq or OpenNMT-py model"):
        st.caption(FRAMEWORK_HELP)
        files = st.file_uploader("The model's files (or one zip of its folder)", accept_multiple_files=True,
                                 key="import_hf_files")
        cols = st.columns(3)
        src_lang = cols[0].text_input("Source language code (multilingual models, T5 tasks)", "", key="import_hf_src_lang",
                                      max_chars=20, placeholder="eng_Latn, en_XX, en")
        tgt_lang = cols[1].text_input("Target language code", "", key="import_hf_tgt_lang", max_chars=20,
                                      placeholder="deu_Latn, de_DE, de")
        name = cols[2].text_input("Model name", "", key="import_hf_name", max_chars=60, placeholder="from the model")
        if not st.button("Import model", key="import_hf_go", disabled=not files):
            return
        uploaded = [(f.name, f.getvalue()) for f in files]
        label = name.strip() or upload_label(uploaded)
        _import_and_keep(lambda: described(import_uploaded(uploaded, src_lang=src_lang.strip() or None,
                                                           tgt_lang=tgt_lang.strip() or None, name=label), label))


def upload_label(files: list[tuple[str, bytes]]) -> str:
    """A name for uploaded model files, from what the user sent (not the temporary folder they are unpacked into):
    a zip's or a lone checkpoint's file name, else the model's own name in config.json, else its weights' name."""
    names = [Path(n).name for n, _ in files]
    if len(files) == 1:
        return Path(names[0]).stem
    config = next((data for n, data in files if Path(n).name == "config.json"), None)
    try:
        own = str(untrusted.loads(config).get("_name_or_path") or "") if config is not None else ""
    except (ValueError, AttributeError):  # not JSON, or nested too deep: the import itself says so
        own = ""
    if own.strip("/"):
        return own.strip("/").rsplit("/", 1)[-1]
    return next((Path(n).stem for n in names if n.endswith((".pt", ".pth", ".bin", ".ckpt", ".safetensors"))),
                "uploaded-model")


def described(imported: Imported, label: str) -> Imported:
    """The import's description names the upload (`label`), not the temporary folder it was read from."""
    summary = imported.bundle.summary
    family = str(summary.get("data", "imported model")).rsplit(" from ", 1)[0]
    summary.update(data=f"{family} from the uploaded files ({label})", name=label)
    return imported


def _state_dict() -> None:
    with st.expander("Import a model trained elsewhere (PyTorch state_dict .pt/.pth)"):
        st.caption(HELP)
        weights = st.file_uploader("state_dict (.pt / .pth)", key="import_weights",
                                   max_upload_size=max(1, registry.MAX_UPLOAD_BYTES // 2**20))
        src_vocab = st.file_uploader("Source vocabulary", key="import_src_tok")
        tgt_vocab = st.file_uploader("Target vocabulary (leave empty if the vocabulary is joint)", key="import_tgt_tok")
        cols = st.columns(3)
        src_lang = cols[0].text_input("Source language", "de", key="import_src_lang", max_chars=20)
        tgt_lang = cols[1].text_input("Target language", "en", key="import_tgt_lang", max_chars=20)
        max_len = cols[2].number_input("Max positions", 8, 4096, 256, key="import_max_len")
        st.markdown("**What the weights cannot show.** Check it below, or wrong values give wrong heatmaps "
                    "while translations may still look right.")
        try:
            settings = _settings()
        except CheckpointError as err:
            st.error(plain(err))
            return
        specials = st.text_input("Special tokens, only if their names are unusual (e.g. pad=<blank>,bos=<s>)", "",
                                 key="import_specials", max_chars=200)
        check = st.text_area("Check the import (recommended): a few source sentences with your model's own greedy "
                             "outputs, one per line as 'source ||| output' (output as text, or its ids like [2, 14, 3])",
                             key="import_check", height=100)
        name = st.text_input("Name", "imported-transformer", key="import_name", max_chars=60)
        if not st.button("Import", key="import_go", disabled=weights is None or src_vocab is None):
            return

        def imported() -> Imported:
            if weights.size > registry.MAX_UPLOAD_BYTES:
                raise CheckpointError(f"{weights.name} is larger than {registry.MAX_UPLOAD_BYTES // 2**20} MB")
            with boundary(weights.name):
                return import_weights(
                    read_state_dict(weights.getvalue(), weights.name), src_vocab.getvalue(),
                    tgt_vocab.getvalue() if tgt_vocab is not None else None, src_lang=src_lang, tgt_lang=tgt_lang,
                    specials=parse_specials(specials, "Special tokens"),
                    examples=parse_examples(check.splitlines(), "the check box"), max_len=int(max_len), name=name,
                    **settings)

        _import_and_keep(imported, name)


def _import_and_keep(run: Callable[[], Imported], name: str | None = None) -> None:
    """Run an import and offer its checkpoint for this session as NAME.safetensors (default: the model's own name),
    its report shown above the forms; a rejected import says why instead."""
    fd, name_ = tempfile.mkstemp(prefix="attnscope-imported-", suffix=".safetensors")
    os.close(fd)
    tmp = Path(name_)
    try:
        with boundary("the uploaded model"):  # the last resort: each route names its own files first
            imported = run()
            checkpoint.save(imported.model, imported.bundle, tmp)
    except CheckpointError as err:
        tmp.unlink(missing_ok=True)
        st.error(f"Import rejected: {plain(err)}")
        return
    state.store(REPORT, imported.report.lines())
    filename = imported.bundle.summary.get("name", "imported") if name is None else name
    keep_for_session(tmp, f"{filename}.safetensors")

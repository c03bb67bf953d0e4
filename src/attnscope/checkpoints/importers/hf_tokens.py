"""What a Hugging Face model's tokenizer and generation settings fix, family by family.

For each side: the vocabulary and its special tokens' ids (vocab_plan.py) and its codec (hf_tokenizers.py);
for the model: how sources are framed (`<s> x </s>`, `x </s> en_XX`, `eng_Latn x </s>`, Marian's
`>>de<< x </s>`), the decoder start token (Marian's <pad>, BART's </s>, mBART's language code), the
first output forced to the target language (NLLB, M2M100, mBART-50) and tokens generation never
outputs (Marian's <pad>, the generation config's one-token bad_words_ids).
"""
from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.importers import hf_t5
from attnscope.checkpoints.importers.hf_config import T5_TYPES
from attnscope.checkpoints.importers.hf_files import HFFolder
from attnscope.checkpoints.importers.hf_tokenizers import backend_codec, framing, spm_codec
from attnscope.checkpoints.importers.vocab_plan import VocabPlan
from attnscope.model.tokenization import TextCodec

MULTILINGUAL = ("mbart", "m2m_100")
PROBES = ("A man rides a bike down the street.", "Zwei Hunde spielen im Schnee!", "It's 5 o'clock, isn't it?",
          "  Spaces   and\ttabs .", "Ünïcödé ☃ café, naïve.")


@dataclass(frozen=True)
class Tokens:
    """Vocabularies, codecs and the token-level config fields of an imported model."""

    src: VocabPlan
    tgt: VocabPlan
    src_codec: TextCodec
    tgt_codec: TextCodec
    langs: tuple[str, str]
    fields: dict[str, Any] = field(default_factory=dict)  # source_framing, source_prefix/suffix, decoder_start, ...
    task_prefix: str = ""  # text a T5 trained on several tasks reads before the sentence (hf_t5.task_prefix)


def load_tokenizer(folder: HFFolder, src_lang: str | None, tgt_lang: str | None) -> Any:
    """The folder's own tokenizer, through transformers (needed to import, never to run)."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise CheckpointError("importing a Hugging Face model needs transformers and sentencepiece (only to import, "
                              "never to run it): pip install -e \".[hf]\" (the tested versions)") from None
    kw = {k: v for k, v in (("src_lang", src_lang), ("tgt_lang", tgt_lang)) if v} if folder.model_type in MULTILINGUAL else {}
    try:
        with warnings.catch_warnings():
            # MarianTokenizer asks for sacremoses to normalise punctuation; the tokenizer attnscope converts does no
            # such normalisation, and this one, checked against it, must not either: the advice does not apply
            warnings.filterwarnings("ignore", message="Recommended: pip install sacremoses")
            return AutoTokenizer.from_pretrained(str(folder.path), **kw)
    except Exception as err:  # missing files, sentencepiece absent, a broken tokenizer.json...
        first = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
        raise CheckpointError(f"the tokenizer in {folder.path.name} does not load with transformers ({first}): the folder "
                              "needs its tokenizer files (tokenizer.json, or vocab.json with its .spm/.model files)") from None


def tokens(folder: HFFolder, tok: Any, src_lang: str | None, tgt_lang: str | None) -> Tokens:
    """The family's vocabularies, codecs, languages and token-level settings."""
    if folder.model_type == "marian":
        found = _marian(folder, tok, src_lang, tgt_lang)
    else:
        found = _shared(folder, tok, src_lang, tgt_lang)
    check_codecs(tok, found)
    codes = _codes(tok)
    return dataclasses.replace(found, src_codec=_labelled(found.src_codec, found.src, codes),
                               tgt_codec=_labelled(found.tgt_codec, found.tgt, codes))


def _codes(tok: Any) -> set[int]:
    """The original ids of the tokenizer's language codes (shown as they are in token labels)."""
    table = getattr(tok, "lang_code_to_id", None) or getattr(tok, "lang_token_to_id", None) or {}
    ids = set(table.values())
    for code in [*(getattr(tok, "supported_language_codes", None) or []), *(getattr(tok, "extra_special_tokens", None) or [])]:
        found = tok.convert_tokens_to_ids(str(code))
        if isinstance(found, int) and found != tok.unk_token_id:
            ids.add(found)
    return ids


def _labelled(codec: TextCodec, plan: VocabPlan, codes: set[int]) -> TextCodec:
    ours = frozenset(plan.ours(i) for i in codes if plan.has(i))
    return TextCodec(codec.tokenizer, dataclasses.replace(codec.id_map, codes=ours)) if ours else codec


def _token(tok: Any, i: int) -> str:
    return tok.convert_ids_to_tokens(int(i)) or tok.unk_token


def _generation_fields(folder: HFFolder, plan: VocabPlan, start: int, forced: int | None) -> dict[str, Any]:
    """decoder_start, forced_first and suppressed in our ids."""
    bad = [ids[0] for ids in folder.setting("bad_words_ids") or [] if isinstance(ids, list) and len(ids) == 1]
    suppressed = sorted({plan.ours(i) for i in bad if plan.has(i)})
    ours_start = plan.ours(start)
    return dict(decoder_start=None if ours_start == plan.bos else ours_start, suppressed=tuple(suppressed),
                forced_first=None if forced is None else plan.ours(forced))


def _source_fields(plan: VocabPlan, before: list[int], after: list[int]) -> dict[str, Any]:
    """[<bos>] prefix x <eos> suffix, from the ids the tokenizer puts around a sentence."""
    framing_ = "bos-eos" if before[:1] == [plan.bos] else "eos"
    if after[:1] != [plan.eos]:
        raise CheckpointError("the tokenizer does not end sources with </s>: attnscope cannot frame them as it does")
    return dict(source_framing=framing_, source_prefix=tuple(before[1:] if framing_ == "bos-eos" else before),
                source_suffix=tuple(after[1:]))


def _marian(folder: HFFolder, tok: Any, src_lang: str | None, tgt_lang: str | None) -> Tokens:
    """Marian: source.spm/target.spm onto vocab.json (or target_vocab.json); the decoder starts on <pad>; no <bos>."""
    separate = bool(getattr(tok, "separate_vocabs", False))
    vocabs = (tok.encoder, tok.target_encoder if separate else tok.encoder)
    sizes = (int(folder.config["vocab_size"]), int(folder.config.get("decoder_vocab_size") or folder.config["vocab_size"]))
    tgt = VocabPlan.build(sizes[1], pad=_id(vocabs[1], tok.pad_token), bos=None, eos=_id(vocabs[1], tok.eos_token),
                          unk=_id(vocabs[1], tok.unk_token))
    plans = [VocabPlan.build(sizes[0], pad=_id(vocabs[0], tok.pad_token), bos=None, eos=_id(vocabs[0], tok.eos_token),
                             unk=_id(vocabs[0], tok.unk_token), at=tgt), tgt]
    codecs = []
    for vocab, plan, spm in zip(vocabs, plans, tok.spm_files):
        names = {i: t for t, i in vocab.items()}
        special = {vocab[t] for t in tok.all_special_tokens if t in vocab}
        codecs.append(spm_codec(plan, Path(spm), vocab, vocab[tok.unk_token], lambda i, n=names: n.get(i, "<unk>"), special,
                                cleanup=bool(tok.clean_up_tokenization_spaces)))
    codes = list(getattr(tok, "supported_language_codes", []) or [])
    prefix: tuple[int, ...] = ()
    if codes:
        code = f">>{tgt_lang}<<"
        if code not in codes:
            raise CheckpointError(f"this Marian model translates into several languages: give the target language "
                                  f"(--tgt-lang) as one of {', '.join(c[2:-2] for c in codes[:30])}")
        prefix = (plans[0].ours(vocabs[0][code]),)
    langs = (src_lang or tok.source_lang or "src", tgt_lang or tok.target_lang or "tgt")
    start = int(folder.setting("decoder_start_token_id") if folder.setting("decoder_start_token_id") is not None
                else folder.config["pad_token_id"])
    fields = dict(source_framing="eos", source_prefix=prefix, **_generation_fields(folder, plans[1], start, None))
    return Tokens(plans[0], plans[1], codecs[0], codecs[1], langs, fields)


def _id(vocab: dict[str, int], token: str) -> int:
    if token not in vocab:
        raise CheckpointError(f"the vocabulary has no {token} token")
    return vocab[token]


def _shared(folder: HFFolder, tok: Any, src_lang: str | None, tgt_lang: str | None) -> Tokens:
    """BART, mBART, M2M100, NLLB, T5: one vocabulary, <s> <pad> </s> <unk> as the tokenizer names them (T5 has no
    <s>: its decoder starts on <pad>)."""
    plan = VocabPlan.build(int(folder.config["vocab_size"]), pad=tok.pad_token_id, bos=tok.bos_token_id,
                           eos=tok.eos_token_id, unk=tok.unk_token_id)
    if hasattr(tok, "backend_tokenizer"):
        codec = backend_codec(tok, plan)
    elif type(tok).__name__ == "ByT5Tokenizer":  # bytes, no vocabulary file
        from attnscope.checkpoints.importers.hf_bytes import byte_codec
        codec = byte_codec(tok, plan)
    else:  # M2M100Tokenizer: sentencepiece.bpe.model onto vocab.json
        special = set(tok.all_special_ids)
        codec = spm_codec(plan, Path(tok.spm_file), tok.encoder, tok.unk_token_id, lambda i: _token(tok, i), special,
                          cleanup=bool(tok.clean_up_tokenization_spaces))
    forced = folder.setting("forced_bos_token_id")
    start = folder.setting("decoder_start_token_id")
    start = start if start is not None else folder.setting("bos_token_id")  # generate()'s fallback
    start = int(start if start is not None else plan.pad)  # T5 without either: its decoder starts on <pad>
    langs, prefix = (src_lang or "src", tgt_lang or "tgt"), ""
    if folder.model_type in T5_TYPES:
        prefix, pair = hf_t5.task_prefix(folder.config, src_lang, tgt_lang)
        langs = pair or langs
    if folder.model_type in MULTILINGUAL:
        target = _language(tok, src_lang, tgt_lang)
        langs = (str(src_lang), str(tgt_lang))
        if forced is None and start != target:
            forced = target  # what transformers' translation pipeline and model cards pass to generate()
    fields = dict(**_source_fields(plan, *framing(tok, plan)), **_generation_fields(folder, plan, start, forced))
    return Tokens(plan, plan, codec, codec, langs, fields, prefix)


def _language(tok: Any, src_lang: str | None, tgt_lang: str | None) -> int:
    """The target language's token id, after checking both codes against the tokenizer's."""
    table = getattr(tok, "lang_code_to_id", None)
    codes = list(table) if table else [str(t) for t in getattr(tok, "extra_special_tokens", None) or []]
    for role, code in (("source", src_lang), ("target", tgt_lang)):
        if not code or code not in codes:
            raise CheckpointError(f"this multilingual model needs its {role} language as one of its codes "
                                  f"(--src-lang/--tgt-lang), e.g. {', '.join(codes[:12])}"
                                  + (f"; {code!r} is not one" if code else ""))
    return int(table[tgt_lang]) if table else int(tok.convert_tokens_to_ids(tgt_lang))


def size_note(tok: Any, found: Tokens) -> str | None:
    """A sentence when the tokenizer's size differs from the output layer's rows, else None: rows without a token
    decode to nothing, tokens without a row read as <unk>."""
    separate = getattr(tok, "target_encoder", None) if getattr(tok, "separate_vocabs", False) else None
    size = len(separate) if separate is not None else len(tok)
    rows = found.tgt.size
    if size < rows:
        return (f"The tokenizer has {size:,} tokens but the output layer has {rows:,} rows: the {rows - size:,} rows "
                "without a token decode to nothing when the model outputs them, as in transformers (T5's output layer "
                "is padded so: a trained model gives them no weight).")
    if size > rows:
        return (f"The tokenizer has {size:,} tokens but the model has only {rows:,} rows: tokens from id {rows:,} up "
                "read as <unk>; check that the tokenizer is the model's.")
    return None


def check_codecs(tok: Any, found: Tokens) -> None:
    """The converted source tokenizer gives the original's ids on a few probe sentences (else the import stops)."""
    for text in PROBES:
        theirs = tok(text, add_special_tokens=False)["input_ids"]
        ours = found.src_codec.encode(text)
        if ours != [found.src.ours(i) if found.src.has(i) else None for i in theirs]:
            raise CheckpointError(f"the converted tokenizer cuts {text!r} differently from the original: attnscope "
                                  "cannot reproduce this tokenizer; record the model with attnscope.from_generate instead")

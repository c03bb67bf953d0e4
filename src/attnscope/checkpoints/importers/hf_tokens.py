"""What a Hugging Face model's tokenizer and generation settings fix: the helpers every architecture's rule shares
(each architecture's own rule is in its module in hf_families/).

For each side: the vocabulary and its special tokens' ids (vocab_plan.py) and its codec (hf_tokenizers.py);
for the model: how sources are framed (`<s> x </s>`, `x </s> en_XX`, `eng_Latn x </s>`, Marian's
`>>de<< x </s>`), the decoder start token (Marian's <pad>, BART's </s>, mBART's language code), the
first output forced to the target language (NLLB, M2M100, mBART-50) and tokens generation never
outputs (Marian's <pad>, the generation config's one-token bad_words_ids). `monolingual` and `multilingual` are
the rules of the architectures with one vocabulary on both sides.
"""
from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.importers.hf_files import HFFolder
from attnscope.checkpoints.importers.hf_tokenizers import backend_codec, framing, spm_codec
from attnscope.checkpoints.importers.vocab_plan import VocabPlan
from attnscope.model.tokenization import TextCodec

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
    task_prefix: str = ""  # text a T5 trained on several tasks reads before the sentence (hf_families.t5.task_prefix)


def load_tokenizer(folder: HFFolder, src_lang: str | None, tgt_lang: str | None, *, languages: bool) -> Any:
    """The folder's own tokenizer, through transformers (needed to import, never to run); `languages`: it takes the
    language codes (a multilingual model's)."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise CheckpointError("importing a Hugging Face model needs transformers and sentencepiece (only to import, "
                              "never to run it): pip install -e \".[hf]\" (the tested versions)") from None
    kw = {k: v for k, v in (("src_lang", src_lang), ("tgt_lang", tgt_lang)) if v} if languages else {}
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


def finished(tok: Any, found: Tokens) -> Tokens:
    """An architecture's tokens (its rule's), checked against the original tokenizer and with language codes labelled
    as they are."""
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


def generation_fields(folder: HFFolder, plan: VocabPlan, start: int, forced: int | None) -> dict[str, Any]:
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


def one_vocabulary(folder: HFFolder, tok: Any) -> VocabPlan:
    """BART, mBART, M2M100, NLLB, T5: one vocabulary, <s> <pad> </s> <unk> as the tokenizer names them (T5 has no
    <s>: its decoder starts on <pad>)."""
    return VocabPlan.build(int(folder.config["vocab_size"]), pad=tok.pad_token_id, bos=tok.bos_token_id,
                           eos=tok.eos_token_id, unk=tok.unk_token_id)


def one_codec(tok: Any, plan: VocabPlan) -> TextCodec:
    """The tokenizer of a one-vocabulary model: its tokenizer.json copied, or (M2M100Tokenizer) its
    sentencepiece.bpe.model converted onto its vocab.json."""
    if hasattr(tok, "backend_tokenizer"):
        return backend_codec(tok, plan)
    special = set(tok.all_special_ids)
    return spm_codec(plan, Path(tok.spm_file), tok.encoder, tok.unk_token_id, lambda i: _token(tok, i), special,
                     cleanup=bool(tok.clean_up_tokenization_spaces))


def start_and_forced(folder: HFFolder, plan: VocabPlan) -> tuple[int, int | None]:
    """The decoder's start token and the first output forced, as generate() reads them (original ids)."""
    forced = folder.setting("forced_bos_token_id")
    start = folder.setting("decoder_start_token_id")
    start = start if start is not None else folder.setting("bos_token_id")  # generate()'s fallback
    return int(start if start is not None else plan.pad), forced  # T5 without either: its decoder starts on <pad>


def framed_tokens(folder: HFFolder, tok: Any, plan: VocabPlan, codec: TextCodec, langs: tuple[str, str],
                          start: int, forced: int | None, task_prefix: str = "") -> Tokens:
    """A one-vocabulary model's tokens, its sources framed as its tokenizer frames them."""
    fields = dict(**_source_fields(plan, *framing(tok, plan)), **generation_fields(folder, plan, start, forced))
    return Tokens(plan, plan, codec, codec, langs, fields, task_prefix)


def monolingual(folder: HFFolder, tok: Any, src_lang: str | None, tgt_lang: str | None) -> Tokens:
    """The rule of a one-vocabulary model without language codes (BART): the languages are only labels."""
    plan = one_vocabulary(folder, tok)
    codec = one_codec(tok, plan)
    start, forced = start_and_forced(folder, plan)
    return framed_tokens(folder, tok, plan, codec, (src_lang or "src", tgt_lang or "tgt"), start, forced)


def multilingual(folder: HFFolder, tok: Any, src_lang: str | None, tgt_lang: str | None) -> Tokens:
    """The rule of a one-vocabulary model with language codes (mBART, M2M100, NLLB): both must be the tokenizer's, and
    the first output is the target's code unless generation forces another or the decoder starts on it."""
    plan = one_vocabulary(folder, tok)
    codec = one_codec(tok, plan)
    start, forced = start_and_forced(folder, plan)
    target = _language(tok, src_lang, tgt_lang)
    if forced is None and start != target:
        forced = target  # what transformers' translation pipeline and model cards pass to generate()
    return framed_tokens(folder, tok, plan, codec, (str(src_lang), str(tgt_lang)), start, forced)


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

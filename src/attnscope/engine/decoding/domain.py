"""Warnings that make a poor translation unsurprising: input far from training, in the wrong language,
output cut short.

Pure functions of a checkpoint's summary, word lists and one translation's ids; the pages show what they return.
"""
from __future__ import annotations

import re
from typing import AbstractSet, Any, Mapping, Sequence

from attnscope.checkpoints.decoding_rules import ATTNSCOPE, DecodingRules
from attnscope.model.config import ModelConfig

# Longest source (tokens, without <eos>) a model saw in training, by task, when the checkpoint does
# not record it ("longest_source" in its summary). Multi30k: 99.9% of the en training captions are
# at most 39 tokens with the shipped tokenizers, the longest 48; toy tasks draw 3-10 symbols.
TRAINED_SOURCE_TOKENS = {"multi30k": 40, "copy": 10, "reverse": 10, "sort": 10}
SHORT_OUTPUT_RATIO = 0.5  # output/source token ratio below which part of the input was probably left out
# (on Multi30k the 1st percentile of that ratio is 0.68)
LANGUAGE_NAMES = {"en": "English", "de": "German", "fr": "French", "cs": "Czech"}
_WORD = re.compile(r"[^\W\d_]+")  # a run of letters, in any script


def trained_length(summary: Mapping[str, Any]) -> int | None:
    """Longest source length the model was trained on, if known."""
    recorded = summary.get("longest_source")
    if isinstance(recorded, int) and recorded > 0:
        return recorded
    return TRAINED_SOURCE_TOKENS.get(str(summary.get("task", "")))


def input_notes(summary: Mapping[str, Any], config: ModelConfig, source_ids: Sequence[int]) -> list[str]:
    """Say when the input is far outside what the model was trained on (length, unknown pieces)."""
    notes = []
    n = len([i for i in source_ids if i != config.eos_id])
    longest = trained_length(summary)
    if longest is not None and n > longest:
        what = str(summary.get("data") or summary.get("task") or "its training data")
        notes.append(f"This input has {n} tokens; {what} trained this model on inputs of at most about {longest}, "
                     f"so expect a poorer translation (try one sentence at a time).")
    unknown = sum(i == config.unk_id for i in source_ids)
    if unknown and unknown >= max(2, n // 5):
        notes.append(f"{unknown} of {n} input tokens are unknown to this model's vocabulary (<unk>): "
                     "it cannot translate what it cannot read.")
    return notes


def output_notes(config: ModelConfig, source_ids: Sequence[int], output_ids: Sequence[int], max_len: int,
                 chosen: bool = True, rules: DecodingRules = ATTNSCOPE) -> list[str]:
    """Say when the output stopped at the length limit (`chosen` by the user, or the default budget of the decoding
    `rules`), where the rules may have forced its </s>, or is much shorter than the input."""
    at_limit = bool(output_ids) and len(output_ids) >= max_len
    which = "the maximum of" if chosen else ("the default budget (twice the source plus 10) of" if rules == ATTNSCOPE
                                             else f"the default budget ({rules.name}) of")
    if at_limit and output_ids[-1] != config.eos_id:
        return [f"The output stopped at {which} {max_len} tokens before the model ended the sentence: "
                "raise the maximum output tokens to see the rest."]
    if at_limit and rules.forced_eos != "off":
        return [f"The output reached {which} {max_len} tokens, where the decoding rules force </s>: the model may not "
                "have ended the sentence there; raise the maximum output tokens to see the rest."]
    n_src, n_out = len(source_ids) - 1, len(output_ids) - 1
    if n_src >= 8 and n_out < SHORT_OUTPUT_RATIO * n_src:
        return [f"The output has {n_out} tokens for {n_src} input tokens: the model may have left part of the "
                "input untranslated (it ends when it predicts the end of the sentence)."]
    return []


def words(text: str) -> list[str]:
    """The lowercased words (runs of letters) of `text`, in order."""
    return _WORD.findall(text.lower())


def language_name(code: str) -> str:
    return LANGUAGE_NAMES.get(code, code)


def target_language_note(text: str, src_lang: str, tgt_lang: str, source_words: AbstractSet[str],
                         target_words: AbstractSet[str]) -> str | None:
    """A gentle note when the input reads like the model's target language, or None.

    Only words that one of the two word lists knows and the other does not tell the languages apart
    ("park" is both English and German); the note appears when at least two of the input's words are
    known to the target side alone and they outnumber those known to the source side alone two to one.
    """
    if src_lang == tgt_lang:
        return None
    found = words(text)
    target_only = [w for w in found if w in target_words and w not in source_words]
    source_only = [w for w in found if w in source_words and w not in target_words]
    if len(target_only) < 2 or len(target_only) < 2 * len(source_only):
        return None
    src, tgt = language_name(src_lang), language_name(tgt_lang)
    shown = ", ".join(dict.fromkeys(target_only[:6]))
    return (f"This sentence looks like {tgt}, the language this model translates into: {len(target_only)} of its "
            f"{len(found)} words ({shown}) occur in {tgt} sentences of Multi30k but in no {src} one. The model reads "
            f"{src} ({src_lang} → {tgt_lang}): type a sentence in {src} to see it translate.")

"""Decoding rules: how long an output may grow, what it must or must not contain, and how beam search ranks and
finishes hypotheses. Recorded at import (each framework's defaults) in the checkpoint's summary, so a model
translates by default as its own framework would; attnscope's own rules stay one choice away.

Plain data (no torch): the importers build it, the checkpoint stores it, engine/decoding/rules.py applies it.
Counts are attnscope's: `limit` is the most tokens an output may have, </s> included; step t is the (t+1)-th
token; a hypothesis of n tokens (</s> included) is ranked by log-prob / penalty(n).

What each framework does by default, read from its code:
- attnscope: at most 2 x source + 10 tokens; beam hypotheses finish when </s> is among the beam's k best
  candidates and the search ends once k have finished (ranked by log-prob / n^1); nothing else.
- OpenNMT-py 3.5 (translate.py: onmt/opts.py, translator.py, decode_strategy.py, beam_search.py,
  penalties.py): max_length 250 and max_length_ratio 1.25 give int(min(250, 1.25 x S + 5)) tokens, S the
  padded source batch's length (sources carry no </s>); an output cut there does not end in </s>;
  min_length 0, block_ngram_repeat 0, ban_unk_token off; beam_size 5; length_penalty "avg" with alpha 1:
  scores are log-prob / (n + 1) (the start token counts); beam search keeps the k best candidates, </s> or
  not; those ending in </s> finish and leave the beam, and a source is done when the best candidate of a step
  ends in </s>.
- fairseq 0.12.2 (fairseq-generate/interactive: dataclass/configs.py GenerationConfig, sequence_generator.py):
  max_len_a 0, max_len_b 200: min(int(0 x S + 200), max_target_positions - 1) free tokens (S the padded source
  batch's length, </s> included), then </s> is forced (its own log-prob kept, all others -inf), so at most
  201 tokens; min_len 1 (</s> banned at the first step); <pad> never; unkpen 0; no_repeat_ngram_size 0; beam 5;
  lenpen 1 with scores normalised as log-prob / n^1; </s> among the k best of 2k candidates finishes, and a
  source is done when k hypotheses have finished.
- Hugging Face transformers (generate() with the model's generation_config.json, else config.json, else
  GenerationConfig's defaults): max_length (20) counts the decoder's start token, so max_length - 1 new tokens
  (max_new_tokens when set); forced_eos_token_id makes the last of them </s> with log-prob 0; min_length
  counts the start token (min_new_tokens does not); forced_bos_token_id (the model config's forced_first);
  no_repeat_ngram_size over the ids with the start token; num_beams (1); length_penalty (1.0): log-prob /
  n^alpha; early_stopping False: the k best-scored finished are kept and the search ends when the best live
  hypothesis, scored at its current length, cannot beat the worst of k finished (True: once k have finished,
  as attnscope; "never": scored at max_length when alpha > 0).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

Penalty = Literal["n", "n+1", "gnmt", "none"]  # the length n is raised to alpha: n, n + 1, (5 + n + 1) / 6; or 1
ForcedEos = Literal["off", "keep", "certain"]  # at the limit only </s>: with its own log-prob, or with log-prob 0
Finish = Literal["k-finished", "hf", "hf-never", "best-finished"]

OWN, MODEL = "attnscope", "model"  # the choices a user makes: attnscope's own rules, or the imported model's
KEY = "decoding"  # the checkpoint summary's key


class RulesError(ValueError):
    """Decoding rules read from a file are not valid; the message says which field."""


@dataclass(frozen=True)
class DecodingRules:
    """One framework's decoding rules in attnscope's counts (see the module docstring for each default)."""

    name: str = "attnscope"  # "attnscope", "OpenNMT-py defaults", "fairseq defaults", "the model's generation_config"
    len_a: float = 2.0  # limit = min(len_cap, int(len_a x S + len_b)), S the source's ids as the model reads them
    len_b: float = 10.0
    len_cap: int | None = None  # besides the model's positions
    min_len: int = 0  # </s> is banned while fewer tokens than this were generated
    forced_eos: ForcedEos = "off"  # the limit's last token must be </s>
    length_penalty: float = 1.0  # alpha
    penalty: Penalty = "n"
    no_repeat_ngram: int = 0  # no n-gram of this size twice in an output (its start token counted); 0: off
    finish: Finish = "k-finished"
    beam_size: int = 1  # the framework's default beam (the app's beam box still decides)
    ignored: tuple[str, ...] = ()  # settings the model asks for that attnscope does not apply

    def __post_init__(self) -> None:
        checks = [(isinstance(self.name, str) and bool(self.name), "name"),
                  (_number(self.len_a) and self.len_a >= 0, "len_a"), (_number(self.len_b), "len_b"),
                  (self.len_cap is None or _whole(self.len_cap) and self.len_cap >= 1, "len_cap"),
                  (_whole(self.min_len) and self.min_len >= 0, "min_len"),
                  (self.forced_eos in ("off", "keep", "certain"), "forced_eos"),
                  (_number(self.length_penalty), "length_penalty"), (self.penalty in ("n", "n+1", "gnmt", "none"), "penalty"),
                  (_whole(self.no_repeat_ngram) and self.no_repeat_ngram >= 0, "no_repeat_ngram"),
                  (self.finish in ("k-finished", "hf", "hf-never", "best-finished"), "finish"),
                  (_whole(self.beam_size) and self.beam_size >= 1, "beam_size"),
                  (isinstance(self.ignored, (list, tuple)) and all(isinstance(i, str) for i in self.ignored), "ignored")]
        bad = [name for ok, name in checks if not ok]
        if bad:
            raise RulesError(f"decoding rule {bad[0]} has an invalid value {getattr(self, bad[0])!r}")
        object.__setattr__(self, "ignored", tuple(self.ignored))

    def limit(self, src_len: int, positions: int) -> int:
        """The most tokens an output of a source of `src_len` ids may have (</s> included), within `positions`."""
        found = int(self.len_a * src_len + self.len_b)
        return max(1, min(positions, found, self.len_cap or positions))

    def divisor(self, n: int) -> float:
        """What a finished hypothesis' log-prob is divided by, for n tokens (</s> included)."""
        if self.penalty == "none":
            return 1.0
        base = {"n": max(n, 1), "n+1": n + 1, "gnmt": (5 + n + 1) / 6}[self.penalty]
        return float(base) ** self.length_penalty

    def with_penalty(self, alpha: float | None) -> DecodingRules:
        """These rules with another alpha (None: unchanged)."""
        return self if alpha is None or alpha == self.length_penalty else dataclasses.replace(self, length_penalty=alpha)

    def sentence(self) -> str:
        """The rules in force, in one sentence for the app and the command line."""
        length = (f"at most {_formula(self.len_a, self.len_b)} tokens" + (f" (never more than {self.len_cap})"
                                                                           if self.len_cap else ""))
        parts = [length]
        if self.forced_eos != "off":
            parts.append("</s> forced at that limit")
        if self.min_len:
            parts.append(f"</s> not before {self.min_len} token{'s' if self.min_len > 1 else ''}")
        if self.no_repeat_ngram:
            parts.append(f"no {self.no_repeat_ngram}-gram twice")
        divisor = {"n": "length", "n+1": "(length + 1)", "gnmt": "((5 + length + 1) / 6)"}.get(self.penalty)
        parts.append(f"beams ranked by log-prob / {divisor}^{self.length_penalty:g}" if divisor else
                     "beams ranked by log-prob")
        parts.append(FINISH_WORDS[self.finish])
        text = f"Decoding follows {self.name}: " + "; ".join(parts)
        if self.beam_size > 1:
            text += f"; its default beam is {self.beam_size}"
        if self.ignored:
            text += f"; not applied: {', '.join(self.ignored)}"
        return text + "."

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> DecodingRules:
        """Rules from a checkpoint's summary (untrusted): unknown or invalid fields are refused in one sentence."""
        if not isinstance(data, dict):
            raise RulesError(f"decoding rules must be a JSON object, got {type(data).__name__}")
        unknown = sorted(set(data) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise RulesError(f"decoding rules have an unknown field {unknown[0]!r}")
        return cls(**data)


FINISH_WORDS = {"k-finished": "the search ends once beam-size hypotheses have ended in </s>",
                "hf": "the search ends when no live beam can beat the worst of beam-size finished ones",
                "hf-never": "the search ends when no live beam, scored at the limit, can beat the finished ones",
                "best-finished": "the search ends when a step's best candidate ends in </s>"}
def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and abs(value) < 1e9


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _formula(a: float, b: float) -> str:
    if not a:
        return f"{b:g}"
    return f"{a:g} x the source + {b:g}" if b else f"{a:g} x the source"


ATTNSCOPE = DecodingRules()


def stored(summary: dict[str, Any]) -> DecodingRules:
    """The rules a checkpoint's summary records; attnscope's own for checkpoints saved before rules were recorded."""
    return DecodingRules.from_dict(summary[KEY]) if KEY in summary else ATTNSCOPE


def opennmt_defaults() -> DecodingRules:
    """OpenNMT-py 3.5's translate defaults (max_length 250, max_length_ratio 1.25, length_penalty avg, alpha 1,
    beam_size 5, min_length 0, block_ngram_repeat 0)."""
    return DecodingRules("OpenNMT-py defaults", len_a=1.25, len_b=5.0, len_cap=250, penalty="n+1", finish="best-finished",
                         beam_size=5)


def fairseq_defaults(max_target_positions: int) -> DecodingRules:
    """fairseq 0.12.2's generate defaults (max_len_a 0, max_len_b 200, min_len 1, lenpen 1, beam 5): 200 free tokens
    (at most max_target_positions - 1), then </s>."""
    return DecodingRules("fairseq defaults", len_a=0.0, len_b=201.0, len_cap=max_target_positions, min_len=1,
                         forced_eos="keep", beam_size=5)


HF_UNAPPLIED = {"repetition_penalty": 1.0, "encoder_no_repeat_ngram_size": 0, "exponential_decay_length_penalty": None,
                "do_sample": False, "num_beam_groups": 1, "diversity_penalty": 0.0, "suppress_tokens": None,
                "begin_suppress_tokens": None, "constraints": None, "force_words_ids": None, "sequence_bias": None,
                "renormalize_logits": False, "temperature": 1.0, "top_k": 50, "top_p": 1.0}


def hf_generation(get: Any, eos_id: int | None) -> DecodingRules:
    """The rules transformers' generate() follows for a model whose generation settings `get(name)` returns
    (generation_config.json first, then config.json; None when absent: GenerationConfig's default)."""
    def value(name: str, default: Any) -> Any:
        found = get(name)
        return default if found is None else found

    new, total = get("max_new_tokens"), get("max_length")
    # max_length counts the decoder start token; unset, transformers 5 generates 20 new tokens ("by default let's
    #   always generate 20 new tokens", GenerationMixin._prepare_generated_length)
    limit = int(new) if new is not None else int(total) - 1 if total is not None else 20
    min_new = get("min_new_tokens")
    min_len = int(min_new) if min_new is not None else max(0, int(value("min_length", 0)) - 1)
    forced = get("forced_eos_token_id")
    ignored = [name for name, default in HF_UNAPPLIED.items() if get(name) not in (None, default)
               and not (name in ("temperature", "top_k", "top_p") and not value("do_sample", False))]
    if forced is not None and forced != eos_id and forced != [eos_id]:
        ignored.append("forced_eos_token_id")
    bad = get("bad_words_ids")
    if isinstance(bad, list) and any(isinstance(w, list) and len(w) > 1 for w in bad):
        ignored.append("bad_words_ids of several tokens")  # one-token ones are the model's suppressed tokens
    stop = value("early_stopping", False)
    finish = "k-finished" if stop is True else "hf-never" if stop == "never" else "hf"
    return DecodingRules("the model's generation_config", len_a=0.0, len_b=float(max(limit, 1)), min_len=min_len,
                         forced_eos="certain" if forced is not None and "forced_eos_token_id" not in ignored else "off",
                         length_penalty=float(value("length_penalty", 1.0)),
                         no_repeat_ngram=int(value("no_repeat_ngram_size", 0)), finish=finish,
                         beam_size=int(value("num_beams", 1)), ignored=tuple(ignored))

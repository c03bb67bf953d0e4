"""A loaded model with its tokenizers: text in, translation (and everything it attended to) out."""
from __future__ import annotations

import itertools
import math
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import torch

from attnscope.checkpoints import checkpoint
from attnscope.checkpoints.checkpoint import Bundle
from attnscope.checkpoints.decoding_rules import ATTNSCOPE, DecodingRules
from attnscope.engine.decoding.beam import beam_search, beam_search_batch
from attnscope.engine.decoding.beam_record import beam_decode
from attnscope.engine.decoding.beam_result import BeamResult
from attnscope.engine.decoding.beam_streaming import BeamStream
from attnscope.engine.decoding.decode import Decoded, greedy, greedy_batch, teacher_force
from attnscope.engine.decoding.rules import chosen, limit
from attnscope.engine.decoding.streaming import TranslationStream
from attnscope.engine.recording.sharing import eval_mode, model_lock
from attnscope.model.batch import pad
from attnscope.model.transformer import Transformer
from attnscope.records.attention import AttentionRecord, DecodeStep

MAX_CHARS = 2000  # longer input is cut before tokenizing (the model reads at most max_len tokens anyway)
MAX_BEAM = 16


class InputError(ValueError):
    """The user's text or options cannot be translated; the message says what to change."""


def budget_batches(model: Transformer, sources: dict[int, Sequence[int]], batch_size: int,
                   max_len: int | None = None, rules: DecodingRules = ATTNSCOPE) -> Iterator[tuple[list[int], int]]:
    """Batches of the keys of `sources` (source ids by sentence), similar lengths together, each with the budget
    `Translator.translate` gives every sentence in it (`max_len`, else the rules' limit for its source): a batch
    holds one budget, so it decodes what the sentences one by one do (frameworks that measure the padded batch's
    longest source give these budgets to batches of one sentence)."""
    def budget(i: int) -> int:
        return max_len or limit(rules, model, len(sources[i]))

    order = sorted(sources, key=lambda i: (budget(i), len(sources[i])))
    for value, group in itertools.groupby(order, key=budget):
        members = list(group)
        for start in range(0, len(members), batch_size):
            yield members[start:start + batch_size], value


def _array(weights: torch.Tensor) -> np.ndarray:
    return weights.float().cpu().numpy()


@dataclass(frozen=True)
class Translation:
    """One translated sentence with its tokens, decoding steps and captured attention."""

    text: str
    source_tokens: tuple[str, ...]  # pieces of the source ids, framed as the model was trained (`x <eos>` or `<bos> x <eos>`)
    target_tokens: tuple[str, ...]  # decoder inputs: <bos> y1 .. y_{n-1}; row t chose steps[t]
    source_ids: tuple[int, ...]
    target_ids: tuple[int, ...]  # generated ids, ending with <eos> when the model produced it
    attention: AttentionRecord | None
    steps: list[DecodeStep] | None
    notes: tuple[str, ...] = ()  # truncation, unknown characters, ...
    beam: BeamResult | None = None
    log_prob: float = 0.0
    budget: int = 0  # the most tokens decoding could produce: the user's maximum, or the one the source set
    stopped: bool = False  # decoding was stopped before its end (Translator.stream): the record holds what was decoded

    @property
    def output_tokens(self) -> tuple[str, ...]:
        """What each step produced (target_tokens shifted by one, ending with <eos>)."""
        return tuple(s.token for s in self.steps) if self.steps else ()


@dataclass
class Translator:
    """Public entry point for translating with a checkpoint (see `attnscope.load`)."""

    model: Transformer
    bundle: Bundle
    device: torch.device | None = None  # where inputs go; None: wherever the model's weights are
    label: str = ""  # the checkpoint's file name; distinguishes copies of one run
    revision: float = 0.0  # modification time of that file: a re-published checkpoint is another model
    rules: DecodingRules | str | None = None  # default decoding rules: "model"/None (the checkpoint's), "attnscope", rules

    def __post_init__(self) -> None:
        if self.device is None:  # a model moved to a GPU gets its inputs there without being told twice
            self.device = next(self.model.parameters()).device
        self.rules = chosen(self.bundle, self.rules)  # a bad choice or a checkpoint's invalid rules fail here, once

    def decoding_rules(self, choice: DecodingRules | str | None = None) -> DecodingRules:
        """The rules a call decodes by: `choice` ("model": the checkpoint's, "attnscope": attnscope's own, or rules),
        None: this translator's."""
        return chosen(self.bundle, self.rules if choice is None else choice)

    @property
    def name(self) -> str:
        return self.label or str(self.bundle.summary.get("name", f"{self.bundle.src_lang}-{self.bundle.tgt_lang}"))

    @property
    def cache_key(self) -> str:
        """Names these exact weights, so cached results never outlive the file they came from."""
        return f"{self.name}@{self.revision!r}"

    @contextmanager
    def inference(self) -> Iterator[None]:
        """Hold the model's lock and run it in eval mode (a training job may share the model)."""
        with model_lock(self.model), eval_mode(self.model):
            yield

    def source(self, text: str, task_prefix: str | None = None) -> tuple[list[int], list[str]]:
        """Source ids framed as the model was trained (config.frame_source), cut to fit, and notes for the user.

        `task_prefix` (None: the checkpoint's, bundle.task_prefix; "" for none) goes before the text, tokenized with
        it as one string, as a T5 trained on several tasks reads it ("translate English to German: " + text)."""
        if not isinstance(text, str) or not text.strip():
            raise InputError("Type a sentence to translate: the text is empty.")
        if task_prefix is not None and not isinstance(task_prefix, str):
            raise InputError(f"The task prefix must be text, got {type(task_prefix).__name__}.")
        notes = []
        if len(text) > MAX_CHARS:
            text = text[:MAX_CHARS]
            notes.append(f"The text was cut to its first {MAX_CHARS:,} characters.")
        text = (self.bundle.task_prefix if task_prefix is None else task_prefix[:MAX_CHARS]) + text
        ids = self.bundle.src_codec.encode(text)
        config = self.model.config
        limit = config.max_len - config.source_overhead
        if len(ids) > limit:
            notes.append(f"The sentence has {len(ids)} tokens; this model reads at most {limit}, "
                         f"so only the first {limit} were translated.")
            ids = ids[:limit]
        unknown = self.bundle.src_codec.unknown_characters(text)
        if unknown:
            notes.append("The tokenizer does not know " + ", ".join(repr(u) for u in unknown[:10]) +
                         "; they were read as <unk>.")
        return config.frame_source(ids), notes

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write this model and its tokenizers as one attnscope checkpoint (`attnscope.load` and the app read it)."""
        return checkpoint.save(self.model, self.bundle, path)

    def translate(self, text: str, beam_size: int = 1, max_len: int | None = None, use_cache: bool = True,
                  capture: bool = True, prefix: Sequence[int] = (), length_penalty: float | None = None,
                  rules: DecodingRules | str | None = None, task_prefix: str | None = None) -> Translation:
        """Translate one sentence; with `capture`, record every head and every step.

        `rules` ("model", "attnscope" or DecodingRules; None: the translator's) set the length limit, each step's
        bans and forced tokens, and how beam search scores (alpha: `length_penalty` if given) and finishes.
        `max_len` None decodes at most the rules' limit for this source (attnscope's: twice the source plus 10,
        within the model's limit), so a short sentence never waits for a long budget; the result's `budget` says
        which was used.
        `prefix` forces the first tokens (ids) and lets the model continue (greedy only); `task_prefix` is text
        before the sentence (`source`).
        With beam search, steps and attention are those of the best hypothesis, recorded while the search
        computed them (`beam_decode`).
        """
        if not 1 <= beam_size <= MAX_BEAM:
            raise InputError(f"Beam size must be between 1 and {MAX_BEAM}, got {beam_size}.")
        src_ids, notes = self.source(text, task_prefix)
        chosen_rules = self.decoding_rules(rules).with_penalty(length_penalty)
        max_len = self._max_len(max_len, len(src_ids), chosen_rules)
        beam = None
        with self.inference():
            if beam_size == 1:
                decoded = greedy(self.model, src_ids, max_len=max_len, use_cache=use_cache, capture=capture, prefix=prefix,
                                 rules=chosen_rules)
            elif capture:
                beam, decoded = beam_decode(self.model, src_ids, beam_size, max_len=max_len, use_cache=use_cache,
                                            rules=chosen_rules)
            else:
                src = torch.tensor([src_ids], device=self.device)
                beam = beam_search(self.model, src, beam_size, max_len=max_len, use_cache=use_cache, rules=chosen_rules)[0]
                decoded = Decoded(beam.hypotheses[0][0])
        return self.assemble(src_ids, decoded, tuple(notes), beam, max_len)

    def stream(self, text: str, max_len: int | None = None, capture: bool = True,
               rules: DecodingRules | str | None = None, task_prefix: str | None = None, beam_size: int = 1,
               length_penalty: float | None = None) -> TranslationStream | BeamStream:
        """`translate`, step by step: iterate the stream for each step as it is decoded (greedy: each token with its
        attention rows; a beam: the best hypothesis so far); `stop()` ends it early and `result()` is the Translation
        so far (translate's own once finished). A beam search streams with every head recorded."""
        if not 1 <= beam_size <= MAX_BEAM:
            raise InputError(f"Beam size must be between 1 and {MAX_BEAM}, got {beam_size}.")
        if beam_size > 1 and not capture:
            raise InputError("A beam search streams with its attention recorded: stream it with capture=True, or "
                             "call translate.")
        src_ids, notes = self.source(text, task_prefix)
        chosen_rules = self.decoding_rules(rules).with_penalty(length_penalty)
        budget = self._max_len(max_len, len(src_ids), chosen_rules)
        if beam_size > 1:
            return BeamStream(self, src_ids, tuple(notes), budget, chosen_rules, beam_size)
        return TranslationStream(self, src_ids, tuple(notes), budget, chosen_rules, capture)

    def score(self, text: str, reference: str, task_prefix: str | None = None) -> Translation:
        """Teacher-force a reference translation: its probabilities and attention."""
        src_ids, notes = self.source(text, task_prefix)
        if not reference.strip():
            raise InputError("The reference translation is empty.")
        tgt = self.bundle.tgt_codec.encode(reference)[: self.model.config.max_len - 1] + [self.model.config.eos_id]
        with self.inference():
            decoded = teacher_force(self.model, src_ids, tgt)
        return self.assemble(src_ids, decoded, tuple(notes), None)

    def hypothesis(self, text: str, ids: Sequence[int], task_prefix: str | None = None) -> Translation:
        """Record of any given output (e.g. a beam hypothesis), by teacher forcing."""
        src_ids, notes = self.source(text, task_prefix)
        with self.inference():
            decoded = teacher_force(self.model, src_ids, list(ids))
        return self.assemble(src_ids, decoded, tuple(notes), None)

    def _max_len(self, max_len: int | None, src_len: int | None = None, rules: DecodingRules = ATTNSCOPE) -> int:
        """The user's maximum, checked; without one, the rules' budget for the source (given no source: the model's
        limit)."""
        positions = self.model.config.max_len
        if max_len is not None and not 1 <= max_len <= positions:
            raise InputError(f"Maximum output length must be between 1 and {positions}, got {max_len}.")
        if max_len is None and src_len is not None:
            return limit(rules, self.model, src_len)
        return max_len or positions

    def assemble(self, src_ids: list[int], decoded: Decoded, notes: tuple[str, ...], beam: BeamResult | None,
                 budget: int = 0) -> Translation:
        codec_src, codec_tgt = self.bundle.src_codec, self.bundle.tgt_codec
        source_tokens = tuple(codec_src.pieces(src_ids))
        target_tokens = tuple(codec_tgt.pieces([self.model.config.bos_id, *decoded.ids[:-1]])) if decoded.ids else ()
        record, steps = None, None
        if decoded.encoder is not None and decoded.ids:
            record = AttentionRecord(source_tokens, target_tokens, _array(decoded.encoder), _array(decoded.decoder),
                                     _array(decoded.cross))
            ids = list({i for s in decoded.steps for i in (s.token_id, *s.top_ids)})
            piece = dict(zip(ids, codec_tgt.pieces(ids)))  # one tokenizer call, not two a step
            steps = [DecodeStep(t, s.token_id, piece[s.token_id], math.exp(s.log_prob),
                                tuple(zip([piece[i] for i in s.top_ids], s.top_probs)), s.entropy, tuple(s.top_ids))
                     for t, s in enumerate(decoded.steps)]
        return Translation(codec_tgt.decode(decoded.ids), source_tokens, target_tokens, tuple(src_ids),
                           tuple(decoded.ids), record, steps, notes, beam, decoded.log_prob, budget)

    @torch.no_grad()
    def translate_batch(self, texts: Sequence[str], beam_size: int = 1, max_len: int | None = None,
                        batch_size: int = 64, use_cache: bool = True, rules: DecodingRules | str | None = None,
                        task_prefix: str | None = None) -> list[str]:
        """Translate many sentences, batching sources of similar length together; each gets the budget and rules
        `translate` would give it (the user's maximum, else its source's), so a batch equals one by one."""
        chosen_rules = self.decoding_rules(rules)
        if not 1 <= beam_size <= MAX_BEAM:
            raise InputError(f"Beam size must be between 1 and {MAX_BEAM}, got {beam_size}.")
        self._max_len(max_len)  # a bad maximum is refused before any work
        kept = [i for i, t in enumerate(texts) if isinstance(t, str) and t.strip()]  # blank input -> ""
        sources = {i: self.source(texts[i], task_prefix)[0] for i in kept}
        out: list[str] = [""] * len(texts)
        with self.inference():
            for idx, budget in budget_batches(self.model, sources, batch_size, max_len, chosen_rules):
                src = pad([sources[i] for i in idx], self.model.config.pad_id).to(self.device)
                ids = (greedy_batch(self.model, src, budget, use_cache, chosen_rules) if beam_size == 1
                       else beam_search_batch(self.model, src, beam_size, budget, chosen_rules))
                for i, row in zip(idx, ids):
                    out[i] = self.bundle.tgt_codec.decode(row)
        return out

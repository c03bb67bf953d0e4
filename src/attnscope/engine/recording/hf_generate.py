"""Hugging Face encoder-decoders (Marian, BART and the like): the attention of one `generate()` as AttentionRecords.

    out = attnscope.generate_with_attention(model, **batch, num_beams=4)   # greedy, sampling or beam search
    record = attnscope.from_generate(out, batch["input_ids"], tokenizer, attention_mask=batch["attention_mask"], item=0)

transformers' default attention ('sdpa') computes no weights; `generate_with_attention` switches the
model to eager attention for the call and back, and asks for the weights. `generate` returns the
encoder's attention once and the decoder's at every step (with its cache, one new query row per
step), one row per batch row (per beam, in a beam search). Each step's row is what the model
attended to while choosing that token; a beam search moves hypotheses between rows, and says which
row each returned hypothesis held at every step (`beam_indices`), so each one gets exactly the rows
that chose its tokens. Needs no import of `transformers` (the output is read by its attribute names).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from torch import Tensor

from attnscope.engine.recording.sharing import model_lock
from attnscope.engine.recording.steps import join_steps
from attnscope.records.attention import AttentionRecord, RecordError


def generate_with_attention(model: Any, **generate_kwargs: Any) -> Any:
    """`model.generate(**generate_kwargs)` with every step's attention weights, under eager attention.

    The model's attention implementation (transformers' default 'sdpa' returns no weights) is switched to
    'eager' for this call and restored afterwards, also when generate raises. The tokens are the ones the
    eager computation chose, which the record then shows exactly (sdpa and eager agree to float rounding).
    """
    previous = getattr(model.config, "_attn_implementation", None)
    with model_lock(model):
        if previous != "eager":
            _set_attention(model, "eager")
        try:
            with torch.no_grad():
                return model.generate(**{**generate_kwargs, "output_attentions": True, "return_dict_in_generate": True})
        finally:
            if previous != "eager":
                _set_attention(model, previous)


def _set_attention(model: Any, implementation: str | None) -> None:
    if hasattr(model, "set_attn_implementation") and implementation is not None:
        model.set_attn_implementation(implementation)
    else:
        model.config._attn_implementation = implementation


def from_generate(output: Any, input_ids: Tensor, tokenizer: Any = None, *, attention_mask: Tensor | None = None,
                  item: int = 0) -> AttentionRecord:
    """The AttentionRecord of returned sequence `item` of a `generate(..., output_attentions=True,
    return_dict_in_generate=True)` result (or of `generate_with_attention`).

    Args:
        output: what generate returned: greedy, sampling or beam search, with num_return_sequences or not.
        input_ids: the sources [B, S] given to generate; sequence `item` translates source item // (sequences per source).
        tokenizer: for `convert_ids_to_tokens` (else the ids are the tokens) and the <eos> that ends a greedy
            sentence early in a batch; its pad token cuts right padding when no `attention_mask` is given.
        attention_mask: the sources' mask given to generate: padding is left out of the record.
        item: which returned sequence (0 .. len(output.sequences) - 1).
    """
    _check(output)
    n_seq, n_src = output.sequences.shape[0], input_ids.shape[0]
    if n_seq % n_src:
        raise RecordError(f"generate() returned {n_seq} sequences for {n_src} sources: pass the input_ids given to it")
    if not 0 <= item < n_seq:
        raise RecordError(f"generate() returned sequences 0..{n_seq - 1}; asked for item {item}")
    source = item // (n_seq // n_src)
    keep = _source_positions(input_ids[source], attention_mask[source] if attention_mask is not None else None, tokenizer)
    rows = _rows_per_step(output, item, getattr(tokenizer, "eos_token_id", None))
    prompt = output.cross_attentions[0][0].shape[-2]  # decoder queries at the first step: the decoder's prompt
    encoder = np.stack([_numpy(w[source if w.shape[0] == n_src else rows[0]][:, keep][:, :, keep])
                        for w in output.encoder_attentions])
    decoder, cross = _decoder_rows(output, rows, keep)
    targets = output.sequences[item, : prompt + len(rows) - 1].tolist()
    return AttentionRecord(_tokens(tokenizer, input_ids[source, keep].tolist()), _tokens(tokenizer, targets),
                           encoder, decoder, cross)


def _check(output: Any) -> None:
    for name in ("encoder_attentions", "decoder_attentions", "cross_attentions", "sequences"):
        if getattr(output, name, None) is None:
            raise RecordError(f"the generate() output has no {name}: call generate(..., output_attentions=True, "
                              "return_dict_in_generate=True) on an encoder-decoder model, or "
                              "attnscope.generate_with_attention(model, ...)")
    if not output.cross_attentions or not output.cross_attentions[0] or not output.encoder_attentions:
        raise RecordError("the generate() output holds no attention weights: transformers' default attention "
                          "('sdpa') computes none; use attnscope.generate_with_attention(model, **inputs), which "
                          "switches the model to eager attention for the call")
    if hasattr(output, "sequences_scores") and getattr(output, "beam_indices", None) is None:
        raise RecordError("this beam search output has no beam_indices, so which row each hypothesis held at each "
                          "step is unknown: generate with return_dict_in_generate=True (transformers >= 5 returns them)")


def _rows_per_step(output: Any, item: int, eos: int | None) -> list[int]:
    """The batch row that held sequence `item` at each decoding step, up to the step that chose its last token."""
    beam = getattr(output, "beam_indices", None)
    if beam is not None:
        rows = [int(r) for r in beam[item].tolist()]
        return rows[: rows.index(-1)] if -1 in rows else rows
    n_steps = len(output.cross_attentions)
    generated = output.sequences[item, output.sequences.shape[1] - n_steps:].tolist()
    if eos is not None and eos in generated:
        n_steps = generated.index(eos) + 1  # later steps of a finished sentence only pad the batch
    return [item] * n_steps


def _decoder_rows(output: Any, rows: Sequence[int], keep: Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Decoder self- and cross-attention [L, H, T, T] and [L, H, T, S]: the first step's rows (the prompt), then
    each later step's new query, taken from the row the hypothesis held then; future keys are zero."""
    n_layers = len(output.cross_attentions[0])
    decoder, cross = [], []
    for layer in range(n_layers):
        self_rows, cross_rows = [], []
        for step, row in enumerate(rows):
            self_w = output.decoder_attentions[step][layer][row]  # (H, Q, K): Q is the prompt at step 0, else 1
            cross_w = output.cross_attentions[step][layer][row]
            queries = slice(None) if step == 0 else slice(-1, None)
            self_rows.append(self_w[:, queries])
            cross_rows.append(cross_w[:, queries][..., keep])
        decoder.append(join_steps(self_rows))
        cross.append(join_steps(cross_rows))
    return np.stack([_numpy(d) for d in decoder]), np.stack([_numpy(c) for c in cross])


def _source_positions(ids: Tensor, mask: Tensor | None, tokenizer: Any) -> Tensor:
    """Indices of the real source tokens: where the mask is 1, else up to trailing padding (Marian, BART pad right)."""
    if mask is not None:
        return mask.bool().nonzero().flatten().cpu()
    pad, n = getattr(tokenizer, "pad_token_id", None), len(ids)
    listed = ids.tolist()
    while pad is not None and n > 1 and listed[n - 1] == pad:
        n -= 1
    return torch.arange(n)


def _numpy(t: Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy()


def _tokens(tokenizer: Any, ids: Sequence[int]) -> tuple[str, ...]:
    if tokenizer is None:
        return tuple(str(i) for i in ids)
    return tuple(tokenizer.convert_ids_to_tokens(list(ids)))

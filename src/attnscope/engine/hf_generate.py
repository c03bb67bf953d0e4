"""Hugging Face encoder-decoders (Marian, BART, T5): the attention of one `generate()` as an AttentionRecord.

    out = model.generate(**batch, output_attentions=True, return_dict_in_generate=True)   # greedy or sampling
    record = attnscope.from_generate(out, batch["input_ids"], tokenizer)

`generate` returns the encoder's attention once and the decoder's per step (with its cache, one new
query row per step); each step's rows are what the model attended to while choosing that token, so
the record's rows are exactly what was computed. Needs no import of `transformers` (the output is read
by its attribute names). Beam search keeps one row per beam and reorders them: not supported here.
"""
from __future__ import annotations

from typing import Any, Sequence

from torch import Tensor

from attnscope.engine.capture import Recording
from attnscope.engine.record import AttentionRecord, RecordError


def from_generate(output: Any, input_ids: Tensor, tokenizer: Any = None, *, attention_mask: Tensor | None = None,
                  item: int = 0) -> AttentionRecord:
    """The AttentionRecord of batch item `item` of a `generate(..., output_attentions=True,
    return_dict_in_generate=True)` result; tokens via `tokenizer.convert_ids_to_tokens` (else the ids).
    Padded sources need `attention_mask` (or a tokenizer with a pad token) to cut the padding off."""
    for name in ("encoder_attentions", "decoder_attentions", "cross_attentions", "sequences"):
        if getattr(output, name, None) is None:
            raise RecordError(f"the generate() output has no {name}: call generate(..., output_attentions=True, "
                              "return_dict_in_generate=True) on an encoder-decoder model")
    if output.sequences.shape[0] != input_ids.shape[0]:
        raise RecordError(f"generate() returned {output.sequences.shape[0]} sequences for {input_ids.shape[0]} sources: "
                          "beam search (num_beams > 1, num_return_sequences) is not supported; decode greedily")
    source = input_ids[item].tolist()
    n_src = int(attention_mask[item].sum()) if attention_mask is not None else _unpadded(source, tokenizer)
    sequence = output.sequences[item].tolist()
    n_steps = _steps_until_eos(sequence, getattr(tokenizer, "eos_token_id", None), len(output.cross_attentions))
    rec = Recording()
    for layer, weights in enumerate(output.encoder_attentions):
        rec.calls[f"encoder.{layer}"], rec.kinds[f"encoder.{layer}"] = [_cut(weights, item, n_src, n_src)], "encoder"
    for step in range(n_steps):
        for layer, (self_w, cross_w) in enumerate(zip(output.decoder_attentions[step], output.cross_attentions[step])):
            for kind, weights in (("decoder", self_w), ("cross", cross_w)):
                name = f"decoder.{layer}.{kind}"
                rec.kinds[name] = kind
                rec.calls.setdefault(name, []).append(_cut(weights, item, None if kind == "decoder" else n_src))
    n_rows = rec.weights["decoder.0.cross"].shape[2] if n_steps else 0
    return rec.to_record(_tokens(tokenizer, source[:n_src]), _tokens(tokenizer, sequence[:n_rows]))


def _unpadded(ids: list[int], tokenizer: Any) -> int:
    """Length without trailing padding (Marian and BART pad on the right)."""
    pad = getattr(tokenizer, "pad_token_id", None)
    n = len(ids)
    while pad is not None and n > 1 and ids[n - 1] == pad:
        n -= 1
    return n


def _cut(weights: Tensor, item: int, n_keys: int | None, n_queries: int | None = None) -> Tensor:
    """One batch item as [1, H, Q, K], padded source keys and queries cut off."""
    w = weights[item: item + 1].float()
    if n_keys is not None:
        w = w[..., :n_keys]
    return w[:, :, :n_queries] if n_queries is not None else w


def _steps_until_eos(sequence: Sequence[int], eos: int | None, n_steps: int) -> int:
    """Steps up to and including the one that produced <eos> (later steps of a finished item are padding)."""
    generated = list(sequence[len(sequence) - n_steps:])
    return generated.index(eos) + 1 if eos is not None and eos in generated else n_steps


def _tokens(tokenizer: Any, ids: Sequence[int]) -> tuple[str, ...]:
    if tokenizer is None:
        return tuple(str(i) for i in ids)
    return tuple(tokenizer.convert_ids_to_tokens(list(ids)))

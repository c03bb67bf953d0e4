"""The speed sections of the benchmark: training throughput beside nn.Transformer, decoding with and without the
KV cache, what recording every head costs, batched translation and a dataset's scale."""
from __future__ import annotations

import math
import os
import statistics
import time
from functools import partial
from typing import Any, Callable, Sequence

import torch
from torch import Tensor, nn

from attnscope.bench.measure import LONG_SENTENCES, SENTENCES, median_times
from attnscope.bench.paired import ratio_summary
from attnscope.engine.decoding.translator import Translator
from attnscope.model.batch import pad
from attnscope.model.config import ModelConfig
from attnscope.model.device import autocast, autocast_dtype, pick_device
from attnscope.model.positions import sinusoidal_table
from attnscope.model.transformer import DecoderCache, Transformer
from attnscope.training.loss import label_smoothed_loss


class TorchBaseline(nn.Module):
    """nn.Transformer with our embeddings, positions and tied output layer: the training baseline."""

    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        self.d = c.d_model
        self.embed = nn.Embedding(c.tgt_vocab_size, c.d_model)
        self.register_buffer("pe", sinusoidal_table(c.max_len, c.d_model), persistent=False)
        self.core = nn.Transformer(c.d_model, c.n_heads, c.n_encoder_layers, c.n_decoder_layers, c.d_ff, c.dropout,
                                   batch_first=True, norm_first=c.norm == "pre")
        self.out = nn.Linear(c.d_model, c.tgt_vocab_size)
        self.out.weight = self.embed.weight

    def _embed(self, x: Tensor) -> Tensor:
        return self.embed(x) * math.sqrt(self.d) + self.pe[: x.shape[1]]

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        causal = torch.ones(tgt.shape[1], tgt.shape[1], dtype=torch.bool, device=tgt.device).triu(1)  # True = masked
        h = self.core(self._embed(src), self._embed(tgt), tgt_mask=causal, src_key_padding_mask=src == 0,
                      tgt_key_padding_mask=tgt == 0, memory_key_padding_mask=src == 0, tgt_is_causal=True)
        return self.out(h)


def training_throughput(c: ModelConfig, batch: int, length: int, steps: int, repeats: int) -> list[dict[str, Any]]:
    """Target tokens per second of a training step, ours vs nn.Transformer, same sizes and optimizer."""
    device = pick_device()
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, c.src_vocab_size, (batch, length), generator=g).to(device)
    tgt = torch.randint(4, c.tgt_vocab_size, (batch, length + 1), generator=g).to(device)
    precisions = [None] + ([torch.bfloat16] if autocast_dtype(device) is not None else [])
    rows = []
    for dtype in precisions:
        result: dict[str, Any] = {"precision": "fp32" if dtype is None else "bf16"}
        runs = {name: training_steps(model, src, tgt, steps, device, dtype, c.pad_id)
                for name, model in (("attnscope", Transformer(c)), ("nn.Transformer", TorchBaseline(c)))}
        for name, seconds in median_times(runs, repeats).items():
            result[f"{name} tokens/s"] = round(batch * length * steps / seconds)
        result["ratio"] = round(result["attnscope tokens/s"] / result["nn.Transformer tokens/s"], 3)
        rows.append(result)
    return rows


def training_steps(model: nn.Module, src: Tensor, tgt: Tensor, steps: int, device: torch.device,
                   dtype: torch.dtype | None, pad_id: int) -> Callable[[], None]:
    """`steps` optimizer steps of `model` on one fixed batch (padded with `pad_id`), as a function to time."""
    model.to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)

    def run() -> None:
        for _ in range(steps):
            with autocast(device, dtype):
                logits = model(src, tgt[:, :-1])
            loss, n = label_smoothed_loss(logits, tgt[:, 1:], 0.1, pad_id)
            opt.zero_grad()
            (loss / n).backward()
            opt.step()
    return run


@torch.no_grad()
def decode_n(model: Transformer, src: Tensor, n: int, use_cache: bool) -> Tensor:
    """Greedy decoding of exactly n tokens (no early stop), to time a fixed amount of work."""
    source = model.encode(src)
    cache = DecoderCache.empty(len(model.decoder)) if use_cache else None
    out = torch.full((src.shape[0], 1), model.config.bos_id, dtype=torch.long, device=src.device)
    for _ in range(n):
        logits = model.next_logits(out[:, -1:] if use_cache else out, source, cache)
        out = torch.cat([out, logits.argmax(-1, keepdim=True)], 1)
    return out


def decoding_speed(tr: Translator, lengths: Sequence[int], batches: Sequence[int], repeats: int) -> list[dict[str, Any]]:
    rows = []
    for b in batches:
        texts = [SENTENCES[i % len(SENTENCES)] for i in range(b)]
        src = pad([tr.source(t)[0] for t in texts], tr.model.config.pad_id).to(tr.device)
        for n in lengths:
            n = min(n, tr.model.config.max_len - 1)
            timed = median_times({"cached": partial(decode_n, tr.model, src, n, True),
                                  "full": partial(decode_n, tr.model, src, n, False)}, repeats)
            cached, full = timed["cached"], timed["full"]
            same = torch.equal(decode_n(tr.model, src, n, True), decode_n(tr.model, src, n, False))
            rows.append({"batch": b, "tokens": n, "cached ms": round(cached * 1e3, 1), "uncached ms": round(full * 1e3, 1),
                         "speed-up": round(full / cached, 2), "identical output": same})
    return rows


def capture_overhead(tr: Translator, rounds: int) -> list[dict[str, Any]]:
    """Greedy translation with capture (every head, every step, the record) against without, for the bench's
    short sentences and for long ones. Each sentence is translated both ways back to back, the order swapped
    every round, so a change in the machine's speed (on a shared machine the plain time moves by ±40% between
    runs) hits both halves of a pair alike; the ratio is the median of the pairs' ratios, with its middle half."""
    rows = []
    for label, texts in (("short (8-12 words)", SENTENCES), ("long (31-36 words)", LONG_SENTENCES)):
        for text in texts:  # warm-up
            tr.translate(text, capture=False)
            tr.translate(text, capture=True)
        load = os.getloadavg()[0]
        times: dict[bool, list[float]] = {False: [], True: []}
        for r in range(rounds):
            for text in texts:
                for capture in (False, True) if r % 2 == 0 else (True, False):
                    start = time.perf_counter()
                    tr.translate(text, capture=capture)
                    times[capture].append(time.perf_counter() - start)
        ratios = [c / p for p, c in zip(times[False], times[True])]
        median, middle = ratio_summary(ratios)
        rows.append({"sentences": label, "target tokens": sum(len(tr.translate(s, capture=False).target_ids) for s in texts),
                     "plain ms (median)": round(statistics.median(times[False]) * 1e3, 1),
                     "captured ms (median)": round(statistics.median(times[True]) * 1e3, 1),
                     "ratio (median of pairs)": median, "middle half of the pairs' ratios": middle,
                     "pairs": len(ratios), "load average (1 min) before / after": [round(load, 2), round(os.getloadavg()[0], 2)]})
    return rows


def batch_throughput(tr: Translator, texts: list[str], one_by_one: int) -> list[dict[str, Any]]:
    rows = []
    for beam in (1, 4):
        start = time.perf_counter()
        tr.translate_batch(texts, beam_size=beam)
        batched = len(texts) / (time.perf_counter() - start)
        subset = texts[:one_by_one]
        start = time.perf_counter()
        for t in subset:
            tr.translate_batch([t], beam_size=beam)
        single = len(subset) / (time.perf_counter() - start)
        rows.append({"beam": beam, "batched sent/s": round(batched, 1), "one-by-one sent/s": round(single, 1),
                     "speed-up": round(batched / single, 2), "sentences": len(texts)})
    return rows


def dataset_scale(tr: Translator, texts: Sequence[str], one_by_one: int, attributed: int) -> dict[str, Any]:
    """Head statistics over `texts` from batched capture (wall and CPU seconds), against translating
    `one_by_one` of them singly; and every attribution of a sentence (IG at its default completeness)."""
    from attnscope.engine.analysis.dataset import head_stats_batched
    from attnscope.engine.analysis.heads import head_stats_over
    from attnscope.engine.attribution.quadrature import IGSettings
    from attnscope.engine.attribution.sentence import attribute

    wall, cpu = time.perf_counter(), time.process_time()
    head_stats_batched(tr, texts)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    single = time.perf_counter()
    head_stats_over(tr, texts[:one_by_one])
    single = (time.perf_counter() - single) / one_by_one
    times = []
    for text in texts[:attributed]:
        result = tr.translate(text)
        start = time.perf_counter()
        attribute(tr, result, IGSettings())
        times.append(time.perf_counter() - start)
    return {"sentences": len(texts), "head_stats_batched_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "sentences_per_s": round(len(texts) / wall, 1), "one_by_one_s_per_sentence": round(single, 4),
            "speedup": round(single * len(texts) / wall, 2),
            "attribution_ms_per_sentence (all methods, IG to 5%)": round(1000 * statistics.median(times), 1)}

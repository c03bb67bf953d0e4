"""Random models of the shapes users import (issue 26): opus-mt-en-de's and NLLB-200-distilled-600M's.

Each is built with the variants its family's importer sets (Marian: [sin | cos] sinusoids, SiLU,
scaled embeddings, post-LN, an added <bos> row; NLLB: fairseq sinusoids from position 2, ReLU,
pre-LN with final norms, a forced target-language code) and a word-level vocabulary of the family's
size, so that every page's work is what it is on the real model, only the weights are random.
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import torch

from attnscope.bench.app_latency import app_latency
from attnscope.bench.measure import SENTENCES, median_times
from attnscope.checkpoints import checkpoint
from attnscope.checkpoints.checkpoint import Bundle
from attnscope.checkpoints.importers.vocab_files import word_level
from attnscope.engine.decoding.translator import Translator
from attnscope.model.config import SPECIAL_TOKENS, ModelConfig
from attnscope.model.tokenization import TextCodec
from attnscope.model.transformer import Transformer

SHAPES: dict[str, dict[str, Any]] = {
    "tiny-marian": dict(vocab=301, d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=64, max_len=64,
                        positional="sinusoidal", sinusoid="halves", activation="silu", norm="post", decoder_start=0,
                        suppressed=(1,)),  # --tiny's stand-in
    "opus-mt-en-de": dict(vocab=58101 + 1, d_model=512, n_heads=8, n_encoder_layers=6, n_decoder_layers=6, d_ff=2048,
                          max_len=512, positional="sinusoidal", sinusoid="halves", activation="silu", norm="post",
                          decoder_start=0, suppressed=(1,)),
    "nllb-200-distilled-600M": dict(vocab=256206, d_model=1024, n_heads=16, n_encoder_layers=12, n_decoder_layers=12,
                                    d_ff=4096, max_len=1024, positional="sinusoidal", sinusoid="fairseq", position_offset=2,
                                    activation="relu", norm="pre", final_norm=True, decoder_start=2, forced_first=4,
                                    source_prefix=(5,)),
}


def shaped_checkpoint(name: str, folder: Path, words: Sequence[str]) -> Path:
    """A random model of SHAPES[name] with a word-level vocabulary (`words` first, filler after), saved in fp16."""
    spec = dict(SHAPES[name])
    size = spec.pop("vocab")
    tokens = list(SPECIAL_TOKENS) + list(dict.fromkeys(w for w in words if w not in SPECIAL_TOKENS))
    tokens += [f"w{i}" for i in range(size - len(tokens))]
    codec = TextCodec(word_level(tokens))
    config = ModelConfig(src_vocab_size=size, tgt_vocab_size=size, share_embeddings=True, dropout=0.0,
                         attention_dropout=0.0, **spec)
    torch.manual_seed(0)
    model = Transformer(config).eval()
    return checkpoint.save(model, Bundle(config, codec, codec, "en", "de", {"name": name}), folder / f"{name}.safetensors",
                           half=True)


TYPICAL = 25  # output tokens of a typical sentence's translation: random weights never end by themselves


def timings(fns: dict[str, Any], repeats: int) -> dict[str, tuple[float, float]]:
    """(fastest, median) seconds of each function, run in turn: on a shared machine the fastest run is the best
    estimate of the work itself, the median of what a user waits under that load."""
    for fn in fns.values():
        fn()  # warm-up
    seen: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            seen[name].append(time.perf_counter() - start)
    return {name: (min(t), statistics.median(t)) for name, t in seen.items()}


def server_latency(tr: Translator, sentences: Sequence[str], repeats: int) -> dict[str, Any]:
    """Seconds (fastest / median) of what the pages ask of the model for a translation of TYPICAL tokens: the
    sentence with every head recorded (Translate), without recording, beam 4, and one decoding step with the cache."""
    from attnscope.model.transformer import DecoderCache

    src = torch.tensor([tr.source(sentences[0])[0]])
    with torch.no_grad():
        source = tr.model.encode(src)

    def one_step() -> None:
        cache = DecoderCache.empty(len(tr.model.decoder))
        with torch.no_grad():
            tr.model.next_logits(torch.tensor([[1]]), source, cache)

    text, n = sentences[0], TYPICAL
    timed = timings({"sentence + every head": lambda: tr.translate(text, max_len=n, capture=True),
                     "sentence, no capture": lambda: tr.translate(text, max_len=n, capture=False),
                     "beam 4": lambda: tr.translate(text, beam_size=4, max_len=n, capture=False),
                     "first decoding step": one_step}, repeats)
    result = tr.translate(text, max_len=n)
    return {"parameters": f"{sum(p.numel() for p in tr.model.parameters()):,}",
            "tokens (source x target)": f"{len(result.source_ids)} x {len(result.target_ids)}",
            **{f"{name} ms (fastest / median)": f"{fast * 1e3:.0f} / {median * 1e3:.0f}"
               for name, (fast, median) in timed.items()}}


def load_seconds(path: Path) -> float:
    start = time.perf_counter()
    checkpoint.load(path)
    return round(time.perf_counter() - start, 2)


def inside_latency(tr: Translator, repeats: int, max_len: int | None = None) -> dict[str, Any]:
    """Server-side seconds of the Inside-one-head page's work. A new sentence is traced once (one teacher-forced pass)
    with its logit lens at every step, and its payload laid out (the shared arrays and each layer's, kept); picking a
    kind, layer, head, step or query costs the server nothing (the browser draws it), and a rerun only joins the
    kept bytes under a new header."""
    from attnscope.engine.inside.lens import logit_lenses
    from attnscope.engine.inside.traced import sentence_trace
    from attnscope.engine.recording.trace import decoder_inputs
    from attnscope.viz.explorer import Selection
    from attnscope.viz.inside import Block, TracedSentence, layer_arrays, payload, present_layers, shared_arrays

    result = tr.translate(SENTENCES[2], max_len=max_len)
    piece = tr.bundle.tgt_codec.piece
    chosen = [s.token_id for s in result.steps]

    def traced() -> TracedSentence:
        with tr.inference():
            bos = tr.model.config.bos_id
            whole = sentence_trace(tr.model, result.source_ids, decoder_inputs(result.target_ids, bos))  # as the page
        lenses = logit_lenses(tr.model, whole, chosen)
        return TracedSentence.of(whole, lenses, piece, result.attention, result.steps, tr.model.config.embed_norm)

    sentence = traced()
    present = present_layers(sentence, 0)

    def blocks() -> tuple[Block, list[Block]]:
        return Block.of(shared_arrays(sentence)), [Block.of(layer_arrays(sentence, layer)) for layer in present]

    kept = blocks()

    def rerun() -> bytes:
        return payload(sentence, *kept, view_id="bench", selection=Selection(), query=None, epoch=0, present=present)

    timed = median_times({"trace": traced, "blocks": blocks, "rerun": rerun}, repeats)
    return {"tokens (source x target)": f"{len(result.source_ids)} x {len(result.steps)}",
            "trace the sentence and its lens ms (once)": round(timed["trace"] * 1e3, 1),
            "lay out its payload ms (once)": round(timed["blocks"] * 1e3, 1),
            "a rerun's payload ms": round(timed["rerun"] * 1e3, 1), "payload MB": round(len(rerun()) / 1e6, 2),
            "layers in the payload": len(present)}


def imported_shape(name: str, repeats: int, app: bool) -> dict[str, Any]:
    """A random model of an imported family's shape: checkpoint size and load time, what the pages ask of the
    server, Inside one head, and (with `app`) issue 17's journeys in headless Chromium."""
    words = " ".join(SENTENCES).replace(".", " .").split()
    path = shaped_checkpoint(name, Path(tempfile.mkdtemp()), words)
    tr = Translator(*checkpoint.load(path))
    row = {"model": name, "load average": round(os.getloadavg()[0], 1), "threads": torch.get_num_threads(),
           "fp16 file MB": round(path.stat().st_size / 1e6, 1), "load s": load_seconds(path),
           **server_latency(tr, SENTENCES, repeats), **inside_latency(tr, repeats, TYPICAL)}
    if app:
        row |= app_latency(path, SENTENCES, 3 if name.startswith("tiny") else 8)
    return row

"""Whole workflows measured end to end: a fresh process's memory, translation quality, toy training and
importing a tutorial's state_dict."""
from __future__ import annotations

import io
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import nn

from attnscope.bench.measure import SENTENCES, median_times, other_load
from attnscope.checkpoints import checkpoint
from attnscope.checkpoints.importers.state_dict import import_weights
from attnscope.checkpoints.importers.torch_files import read_state_dict
from attnscope.engine.analysis.bleu import scores
from attnscope.engine.decoding.translator import Translator
from attnscope.model.positions import sinusoidal_table
from attnscope.training.data import DataError, data_dir, load_pairs


def memory(path: Path) -> dict[str, Any]:
    """Peak RSS of a fresh process that loads the model and translates; size of one record."""
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec, so it would report the (large)
    # benchmark process that forked the child rather than the child itself
    code = ("import resource, re, attnscope; tr = attnscope.load(%r); tr.translate(%r)\n"
            "try: print(re.search(r'VmHWM:\\s*(\\d+)', open('/proc/self/status').read()).group(1))\n"
            "except OSError: print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)") % (str(path), SENTENCES[0])
    rss_kb = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()[-1])
    tr = Translator(*checkpoint.load(path))
    record = tr.translate("A man in a blue shirt is playing the guitar on the street while two dogs watch him closely.").attention
    n = sum(record.array(k).nbytes for k in ("encoder", "decoder", "cross"))
    return {"peak RSS MB (load + translate)": round(rss_kb / 1024, 1),
            "record tokens (source x target)": f"{len(record.source_tokens)} x {len(record.target_tokens)}",
            "record KB float32": round(n / 1024, 1), "record KB float16": round(n / 2048, 1)}


def quality(paths: Sequence[Path], splits: Sequence[str], beams: Sequence[int], limit: int | None) -> list[dict[str, Any]]:
    rows = []
    for path in paths:
        tr = Translator(*checkpoint.load(path))
        for split in splits:
            try:
                pairs = load_pairs(data_dir(), split, tr.bundle.src_lang, tr.bundle.tgt_lang)[:limit]
            except DataError as err:
                rows.append({"checkpoint": path.stem, "split": split, "error": str(err)})
                continue
            for beam in beams:
                hyps = tr.translate_batch([s for s, _ in pairs], beam_size=beam)
                rows.append({"checkpoint": path.stem, "split": split, "beam": beam, **scores(hyps, [t for _, t in pairs])})
    return rows


def toy_training(task: str = "reverse", target: float = 0.95, limit_s: float = 300.0,
                 max_steps: int | None = None) -> dict[str, Any]:
    """Toy training: seconds to 95% exact reversals of held-out sequences, with the Train page's toy preset
    (training/toy.py), counted from creating the trainer (data, tokenizer, model) to the validation that
    first reaches `target`; validations are every TOY_SCHEDULE["eval_every"] steps and are included."""
    import tempfile
    import threading

    from attnscope.training.config import TrainConfig
    from attnscope.training.loop import Trainer
    from attnscope.training.toy import TOY_MODEL, TOY_SCHEDULE

    before = other_load()
    stop, curve = threading.Event(), []
    start = time.perf_counter()

    def watch(event: Any) -> None:
        if event.kind == "eval":
            curve.append((event.step, round(time.perf_counter() - start, 1), round(100 * event.exact, 1)))
            if event.exact >= target:
                stop.set()
        if time.perf_counter() - start > limit_s:
            stop.set()
    config = TrainConfig(out_dir=tempfile.mkdtemp(), task=task, preset="toy", model=dict(TOY_MODEL), src_lang="en",
                         tgt_lang="en", save_minutes=1e9, **TOY_SCHEDULE | ({"max_steps": max_steps} if max_steps else {}))
    Trainer(config, watch, stop).run()
    reached = next((c for c in curve if c[2] >= 100 * target), None)
    return {"task": task, "target exact %": 100 * target, "seconds to target": reached[1] if reached else None,
            "steps to target": reached[0] if reached else None, "threads": TOY_SCHEDULE["threads"],
            "validations (step, s, exact %)": curve, "while it ran": before, "after": other_load()}


def import_speed(megabytes: float, repeats: int) -> dict[str, Any]:
    """Seconds to import a PyTorch-tutorial-style state_dict (nn.Transformer 3+3 layers, d 256) of about
    `megabytes` MB with torchtext-style vocabularies: read, recognise, build."""
    d = 256
    core = {f"transformer.{k}": v for k, v in nn.Transformer(d, 8, 3, 3, 1024).state_dict().items()}
    vocab = max(10, int((megabytes * 1e6 / 4 - sum(v.numel() for v in core.values())) / (3 * d)))
    state = {**core, "src_tok_emb.embedding.weight": torch.randn(vocab, d),
             "tgt_tok_emb.embedding.weight": torch.randn(vocab, d),
             "generator.weight": torch.randn(vocab, d), "generator.bias": torch.zeros(vocab),
             "positional_encoding.pos_embedding": sinusoidal_table(5000, d).unsqueeze(1)}
    buffer = io.BytesIO()
    torch.save(state, buffer)
    data = buffer.getvalue()
    itos = ["<unk>", "<pad>", "<bos>", "<eos>"] + [f"w{i}" for i in range(vocab - 4)]

    def run() -> Any:
        return import_weights(read_state_dict(data, "model.pt"), itos, itos, n_heads=8)

    start = time.perf_counter()
    run()
    first = time.perf_counter() - start
    return {"file_mb": round(len(data) / 1e6, 1), "vocab": vocab, "first_s": round(first, 3),
            "median_s": round(median_times({"import": run}, repeats)["import"], 3)}

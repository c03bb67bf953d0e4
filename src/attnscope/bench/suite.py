"""The benchmark sections (`python -m attnscope.bench`): speed, memory and quality, measured side by side.

Every figure is a median over repetitions in one process, reported with the machine. Ratios
compare against an honest baseline run in the same process (nn.Transformer for training,
uncached decoding, capture off). `--tiny` runs everything on a tiny random model in seconds
(the test suite's smoke test); it proves the code runs, its numbers mean nothing.
"""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from torch import nn

from attnscope.bench.app_latency import app_latency
from attnscope.bench.app_memory import app_memory
from attnscope.bench.attribution import ig_completeness, methods_tab_of_shape, split_by_position
from attnscope.bench.explorer_latency import explorer_latency
from attnscope.bench.hf_peer import peer
from attnscope.bench.hf_t5_peer import peer_t5
from attnscope.bench.measure import LONG_SENTENCES, SENTENCES, machine, median_times, other_load, print_table
from attnscope.bench.speed import batch_throughput, capture_overhead, dataset_scale, decoding_speed, training_throughput
from attnscope.checkpoints import checkpoint
from attnscope.checkpoints.importers.state_dict import import_weights
from attnscope.checkpoints.importers.torch_files import read_state_dict
from attnscope.checkpoints.registry import default_checkpoint, shipped_dir
from attnscope.engine.analysis.bleu import scores
from attnscope.engine.decoding.translator import Translator
from attnscope.model.config import ModelConfig
from attnscope.model.device import apply_thread_policy
from attnscope.model.positions import sinusoidal_table
from attnscope.model.transformer import Transformer
from attnscope.training.data import DataError, data_dir, load_pairs, sample_pairs


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


def inside_latency(tr: Translator, repeats: int, max_len: int | None = None) -> dict[str, Any]:
    """Server-side seconds of the Inside-one-head page's work. The page traces a sentence once (one teacher-forced
    pass, kept in memory);
    moving the step cuts that trace, slices a head, builds every panel and the logit lens (HTML);
    switching head does the same without the lens."""
    from attnscope.engine.inside.head_view import head_view
    from attnscope.engine.inside.lens import logit_lens
    from attnscope.engine.inside.traced import sentence_trace
    from attnscope.engine.recording.trace import decoder_inputs
    from attnscope.viz.inside import PANELS
    from attnscope.viz.lens import lens_table

    result = tr.translate(SENTENCES[2], max_len=max_len)
    piece = tr.bundle.tgt_codec.piece

    def traced() -> Any:
        with tr.inference():
            bos = tr.model.config.bos_id
            return sentence_trace(tr.model, result.source_ids, decoder_inputs(result.target_ids, bos))  # as the page

    whole = traced()
    state = {"step": 0}

    def draw(t: int, head: int, with_lens: bool) -> None:
        view = head_view(whole.until(t), "decoder", 0, head, t, result.source_tokens, result.target_tokens[: t + 1])
        views = [build(view) for build in PANELS]
        if with_lens:
            views.append(lens_table(logit_lens(tr.model, whole, t, result.steps[t].token_id), piece))

    def move_step() -> None:
        state["step"] = (state["step"] + 1) % len(result.steps)
        draw(state["step"], 0, True)

    timed = median_times({"trace": traced, "move": move_step, "head": lambda: draw(len(result.steps) - 1, 1, False)}, repeats)
    return {"tokens (source x target)": f"{len(result.source_ids)} x {len(result.steps)}",
            "trace the sentence ms (once)": round(timed["trace"] * 1e3, 1),
            "move the step ms": round(timed["move"] * 1e3, 1),
            "switch head ms": round(timed["head"] * 1e3, 1), "panels": len(PANELS) + 1}


def imported_shape(name: str, repeats: int, app: bool) -> dict[str, Any]:
    """A random model of an imported family's shape: checkpoint size and load time, what the pages ask of the
    server, Inside one head, and (with `app`) issue 17's journeys in headless Chromium."""
    import tempfile

    from attnscope.bench.imported_shapes import TYPICAL, load_seconds, server_latency, shaped_checkpoint

    words = " ".join(SENTENCES).replace(".", " .").split()
    path = shaped_checkpoint(name, Path(tempfile.mkdtemp()), words)
    tr = Translator(*checkpoint.load(path))
    row = {"model": name, "load average": round(os.getloadavg()[0], 1), "threads": torch.get_num_threads(),
           "fp16 file MB": round(path.stat().st_size / 1e6, 1), "load s": load_seconds(path),
           **server_latency(tr, SENTENCES, repeats), **inside_latency(tr, repeats, TYPICAL)}
    if app:
        row |= app_latency(path, SENTENCES, 3 if name.startswith("tiny") else 8)
    return row


def tiny_checkpoint(folder: Path) -> Path:
    """A random tiny model saved as a checkpoint (for --tiny)."""
    from attnscope.checkpoints.checkpoint import Bundle
    from attnscope.model.tokenization import TextCodec, train_word_level
    codec = TextCodec(train_word_level([" ".join(SENTENCES)]))
    c = ModelConfig(src_vocab_size=codec.vocab_size, tgt_vocab_size=codec.vocab_size, d_model=32, n_heads=4, d_ff=64,
                    n_encoder_layers=2, n_decoder_layers=2, max_len=64, share_embeddings=True)
    torch.manual_seed(0)
    bundle = Bundle(c, codec, codec, "en", "de", {"name": "tiny"})
    return checkpoint.save(Transformer(c).eval(), bundle, folder / "tiny.safetensors")


def run(out: Path, tiny: bool = False, checkpoint_path: Path | None = None, threads: int | None = None,
        skip: Sequence[str] = (), only: Sequence[str] = ()) -> dict[str, Any]:
    """Run the sections (all, or those in `only`) less those in `skip`, print a table for each and write the
    report (JSON) to `out`; returns the report."""
    if threads:
        torch.set_num_threads(threads)
    else:
        apply_thread_policy()  # out of the box: what the app and `attnscope.load` run with
    if tiny:
        import tempfile
        path = tiny_checkpoint(Path(tempfile.mkdtemp()))
        reps, lengths, batches, train_steps, train_reps, quality_limit, one_by_one = 2, (5, 10), (1, 4), 2, 2, 20, 5
    else:
        path = checkpoint_path or default_checkpoint()
        reps, lengths, batches, train_steps, train_reps, quality_limit, one_by_one = 11, (10, 30, 60), (1, 32), 3, 11, None, 100
    tr = Translator(*checkpoint.load(path))
    c = tr.model.config
    report: dict[str, Any] = {"machine": machine(), "checkpoint": path.name, "tiny": tiny}
    sections: list[tuple[str, str, Callable[[], Any]]] = [
        ("training", "1. Training throughput (target tokens/s), ours vs nn.Transformer",
         lambda: training_throughput(c, 32 if tiny else 64, 12 if tiny else 24, train_steps, train_reps)),
        ("decoding", "2. Greedy decoding, KV cache vs full recomputation", lambda: decoding_speed(tr, lengths, batches, reps)),
        ("capture", "3. Capture overhead (every head + steps) vs plain translation", lambda: capture_overhead(tr, 3 * reps)),
        ("batch", "4. Batch translation throughput", lambda: _batch(tr, tiny, one_by_one)),
        ("memory", "5. Memory", lambda: memory(path)),
        ("quality", "6. Quality (sacreBLEU cased, lowercased, chrF)",
         lambda: quality([path] if tiny else sorted(shipped_dir().glob("*.safetensors")),
                         ["val", "test_2016_flickr", "test_2017_flickr"], (1, 4), quality_limit)),
        ("app", "7. App latency (headless Chromium against streamlit run), against issue 17's targets",
         lambda: app_latency(path, SENTENCES, 3 if tiny else 8)),
        ("import", "8. Import of a 30 MB PyTorch-tutorial state_dict (python -m attnscope import)",
         lambda: import_speed(2 if tiny else 30, 2 if tiny else 5)),
        ("dataset", "9. Dataset scale: head statistics from batched capture; attribution per sentence",
         lambda: dataset_scale(tr, _sentences(tr, 20 if tiny else 1000), *((3, 1) if tiny else (50, 10)))),
        ("toy", "10. Toy training: seconds to 95% exact reversals (Train page's toy preset)",
         lambda: toy_training(max_steps=20 if tiny else None)),
        ("inside", "11. Inside one head: server-side work of opening a head and moving the step",
         lambda: inside_latency(tr, reps)),
        ("ig", "12. Integrated gradients at the defaults (5%, at most 256 path points): completeness per token",
         lambda: ig_completeness(tr, _sample(tr, 3 if tiny else 100))),
        ("split", "13. Source share by target position (mean over the sample): ALTI+ vs value zeroing's rollout",
         lambda: split_by_position(tr, _sample(tr, 10 if tiny else 1000))),
        ("imported", "14. A model of opus-mt-en-de's shape (random weights): server side, Inside one head, the app",
         lambda: imported_shape("tiny-marian" if tiny else "opus-mt-en-de", reps, app="app" not in skip)),
        ("large", "15. A model of NLLB-200-distilled-600M's shape (random weights): server side",
         lambda: imported_shape("tiny-marian" if tiny else "nllb-200-distilled-600M", 3, app=False)),
        ("app-memory", "16. App server's resident memory (MB) after each page, one session (targets: 300 after the first "
         "translation, 380 after Attribution), and the floor: a server that only shows the translation",
         lambda: app_memory(path, SENTENCES[1], LONG_SENTENCES[0], c.n_decoder_layers, c.n_heads)),
        ("peer", "17. opus-mt-en-de's shape with Hugging Face's classes and a MarianTokenizer, imported by the README's "
         "command: captured decoding beside generate(output_attentions=True), and the app's journeys quiet and beside a "
         "busy process", lambda: peer(list(SENTENCES), tiny, app="app" not in skip)),
        ("peer-t5", "18. t5-small's shape with Hugging Face's classes and a T5 tokenizer, imported with its en -> de task: "
         "captured decoding beside generate(output_attentions=True)", lambda: peer_t5(list(SENTENCES), tiny)),
        ("methods", "19. Attribution's methods tab on opus-mt-en-de's shape (random weights, IG at the defaults), with the load",
         lambda: methods_tab_of_shape("tiny-marian" if tiny else "opus-mt-en-de", 1 if tiny else 5)),
        ("explorer", "20. The attention explorer (issue 42)", lambda: explorer_latency(default_checkpoint(), tiny)),
    ]
    for key, title, measure in sections:
        if key in skip or (only and key not in only):
            continue
        report[key] = measure()
        print_table(title, report[key])
    out.write_text(json.dumps(report, indent=2))
    print(f"\nwrote {out}")
    return report


def _sentences(tr: Translator, n: int) -> list[str]:
    """The first n source sentences of test_2016_flickr (ATTNSCOPE_DATA), or the bench's examples repeated."""
    try:
        texts = [s for s, _ in load_pairs(data_dir(), "test_2016_flickr", tr.bundle.src_lang, tr.bundle.tgt_lang)]
    except DataError:
        texts = list(SENTENCES) * (n // len(SENTENCES) + 1)
    return texts[:n]


def _sample(tr: Translator, n: int) -> list[str]:
    """The first n source sentences of the embedded evaluation sample (test_2016_flickr), or the bench's examples."""
    try:
        return [s for s, _ in sample_pairs(tr.bundle.src_lang, tr.bundle.tgt_lang, "test_2016_flickr", n)]
    except DataError:
        return (list(SENTENCES) * (n // len(SENTENCES) + 1))[:n]


def _batch(tr: Translator, tiny: bool, one_by_one: int) -> list[dict[str, Any]]:
    try:
        texts = [s for s, _ in load_pairs(data_dir(), "test_2016_flickr", tr.bundle.src_lang, tr.bundle.tgt_lang)]
    except DataError:
        texts = list(SENTENCES) * 20
    return batch_throughput(tr, texts[:40] if tiny else texts, one_by_one)


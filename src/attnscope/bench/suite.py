"""The benchmark sections (`python -m attnscope.bench`): speed, memory and quality, measured side by side.

Every figure is a median over repetitions in one process, reported with the machine. Ratios
compare against an honest baseline run in the same process (nn.Transformer for training,
uncached decoding, capture off). `--tiny` runs everything on a tiny random model in seconds
(the test suite's smoke test); it proves the code runs, its numbers mean nothing.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from attnscope.bench.app_latency import app_latency
from attnscope.bench.app_memory import app_memory
from attnscope.bench.atlas import atlas_bench
from attnscope.bench.attribution import ig_completeness, methods_tab_of_shape, split_by_position
from attnscope.bench.big_models import big_models
from attnscope.bench.contrast import contrast_bench
from attnscope.bench.explorer_latency import explorer_latency
from attnscope.bench.hf_peer import peer
from attnscope.bench.hf_t5_peer import peer_t5
from attnscope.bench.imported_shapes import imported_shape, inside_latency
from attnscope.bench.measure import LONG_SENTENCES, SENTENCES, machine, print_table
from attnscope.bench.session_memory import sessions_memory
from attnscope.bench.speed import batch_throughput, capture_overhead, dataset_scale, decoding_speed, training_throughput
from attnscope.bench.streaming import streaming
from attnscope.bench.workloads import import_speed, memory, quality, toy_training
from attnscope.checkpoints import checkpoint
from attnscope.checkpoints.registry import default_checkpoint, shipped_dir
from attnscope.engine.decoding.translator import Translator
from attnscope.model.config import ModelConfig
from attnscope.model.device import apply_thread_policy
from attnscope.model.transformer import Transformer
from attnscope.training.data import DataError, data_dir, load_pairs, sample_pairs


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
        ("inside", "11. Inside one head: server-side work of a new sentence (picks are answered in the browser)",
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
        ("atlas", "21. The head atlas (issue 46)",
         lambda: atlas_bench(tr, path, _sample(tr, 20 if tiny else 200), tiny, app="app" not in skip)),
        ("big", "22. Big models of real shapes (issue 44): import, peak memory, load, a sentence beside HF",
         lambda: big_models(tiny, app="app" not in skip, shots=out.parent)),
        ("contrast", "23. One step's contrastive attributions (Step page), every method, with the load (issue 46)",
         lambda: contrast_bench(tr, "tiny-marian" if tiny else "opus-mt-en-de", 1 if tiny else 5)),
        ("streaming", "24. A long output on opus-mt-en-de's shape, streamed (issue 44)",
         lambda: streaming(SENTENCES, tiny, app="app" not in skip)),
        ("sessions", "25. Server memory over 20 sessions of long outputs on opus-mt-en-de's shape (issue 44)",
         lambda: sessions_memory(LONG_SENTENCES, tiny, app="app" not in skip)),
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


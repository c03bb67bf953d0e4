"""Big models of real shapes, imported by the README's command (issue 44's bench section "big").

For each shape (mBART-large-50's 611M, NLLB-200 1.3B's, Flan-T5-large's and, opted in with ATTNSCOPE_BENCH_3B=1,
NLLB-200 3.3B's) a random model is built with Hugging Face's own classes beside a SentencePiece tokenizer trained
here on the embedded Multi30k sample (fewer tokens than the model's rows, which the import reports; nothing is
downloaded): saved by save_pretrained, or for 3.3B written shard by shard (bench/big_folders.py). Then: `python -m
attnscope import` in a child process (its wall seconds and peak resident memory beside the size of the weights),
`attnscope.load`, and a 25-token sentence with every head captured beside `generate(output_attentions=True)`
(tokens compared), both on one thread, one side after the other (two copies of a 1.3B model would not fit beside
the other work on the machine), with the load beside each figure; with `app`, the app serves the checkpoint and
headless Chromium opens the Translate and Step pages on the sentence until their heatmaps are drawn.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch

from attnscope.bench.big_folders import hf_folder, sharded_folder
from attnscope.bench.measure import load_average, status_kb
from attnscope.model.budget import available_bytes, model_refusal

MBART = dict(d_model=1024, encoder_layers=12, decoder_layers=12, encoder_attention_heads=16, decoder_attention_heads=16,
             encoder_ffn_dim=4096, decoder_ffn_dim=4096, max_position_embeddings=1024, scale_embedding=True,
             dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
SHAPES: dict[str, tuple[str, dict[str, Any]]] = {
    "mbart-large-50": ("mbart-50", MBART | dict(vocab_size=250054, activation_function="gelu")),
    "nllb-200-1.3B": ("nllb", MBART | dict(vocab_size=256206, encoder_layers=24, decoder_layers=24,
                                           encoder_ffn_dim=8192, decoder_ffn_dim=8192, activation_function="relu")),
    "flan-t5-large": ("flan-t5", dict(vocab_size=32128, d_model=1024, d_kv=64, d_ff=2816, num_layers=24,
                                 num_decoder_layers=24, num_heads=16, relative_attention_num_buckets=32,
                                 relative_attention_max_distance=128, dropout_rate=0.0, feed_forward_proj="gated-gelu",
                                 tie_word_embeddings=False, layer_norm_epsilon=1e-6, pad_token_id=0, eos_token_id=1,
                                 decoder_start_token_id=0)),
}
OPT_IN = "ATTNSCOPE_BENCH_3B"  # "1": also NLLB-200 3.3B's shape (15.6 GB of memory, 27 GB of disk, ~20 min)
SHARDED = {"nllb-200-3.3B": ("nllb", MBART | dict(vocab_size=256206, d_model=2048, encoder_layers=24,
                                                  decoder_layers=24, encoder_ffn_dim=8192, decoder_ffn_dim=8192,
                                                  activation_function="relu"))}
TINY = {"tiny-mbart": ("mbart-50", MBART | dict(vocab_size=4000, d_model=32, encoder_layers=2, decoder_layers=2,
                                             encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                                             decoder_ffn_dim=64, max_position_embeddings=128))}
LANGS = {"mbart-50": ("en_XX", "de_DE"), "nllb": ("eng_Latn", "deu_Latn"), "flan-t5": ("en", "de")}
T5_PREFIX = "translate English to German: "
TOKENS = 25  # output tokens of a typical sentence's translation: random weights run to the length asked
SENTENCE = "A man in an orange hat starring at something."
IMPORTED = "imported.safetensors"  # the checkpoint `measured` writes in the model's folder
CEILING_MS = 1_800_000  # a hang limit for a page: a 3.3B model loads and decodes in minutes on a busy 2-core machine
POLL_S = 0.02  # how often a child's peak memory is read (growth in its last interval is missed)
PAGES = (("Translate", "", "server start to heatmaps s"), ("Step", "step", "open to heatmaps s"))
# Installed in the page: the time from its navigation's start to the live view's first attention row on screen
LIVE_TIMER = """new MutationObserver((_, seen) => {
  if (document.querySelector('.attn-live tbody tr')) { window.__live = performance.now(); seen.disconnect(); }
}).observe(document, {childList: true, subtree: true});"""


def child_run(args: list[str]) -> tuple[float, float, float]:
    """Wall seconds, peak resident memory (GB) and CPU seconds (user + system: what a quiet machine's wall time would
    be, near enough, for a one-thread job) of a child process running `args`, which must succeed.

    The peak is the child's own high-water mark (VmHWM), read while it runs: its rusage would count this process's
    peak too (Linux keeps the memory's high-water mark from before exec), and this process has just built the model
    the child imports."""
    start, peak_kb = time.perf_counter(), 0
    with tempfile.TemporaryFile("w+") as err:  # a file, not a pipe: a child writing much would wait for a reader
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err, text=True)
        while not (done := os.wait4(proc.pid, os.WNOHANG))[0]:
            peak_kb = max(peak_kb, _high_water_kb(proc.pid))
            time.sleep(POLL_S)
        seconds = time.perf_counter() - start
        _, status, usage = done
        if os.waitstatus_to_exitcode(status):
            err.seek(0)
            raise RuntimeError(f"{' '.join(args[:4])} failed: {err.read().strip()[-400:]}")
    return seconds, peak_kb * 1024 / 2**30, usage.ru_utime + usage.ru_stime


def _high_water_kb(pid: int) -> int:
    """A running process's peak resident memory so far (kB), 0 once it has ended."""
    return status_kb(pid, "VmHWM")


def _timed(fn: Callable[[], Any], repeats: int) -> tuple[list[float], float]:
    """Seconds of `repeats` runs after a warm-up, and the load average when they ended."""
    fn()
    seen = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        seen.append(time.perf_counter() - start)
    return seen, load_average()


def _ours(out: Path, sentence: str, repeats: int) -> tuple[dict[str, Any], list[float], float]:
    """Load seconds, peak RSS (a child process), parameters and the output's token ids, then the captured sentence's
    seconds on one thread and the load."""
    from attnscope.engine.decoding.loading import load

    code = "import attnscope; attnscope.load(%r)" % str(out)
    _, peak, _ = child_run([sys.executable, "-c", code])  # with the child's start, for its own peak memory
    row = {"load average": load_average(), "peak": round(peak, 2)}
    start = time.perf_counter()
    tr = load(out)
    row |= {"load s": round(time.perf_counter() - start, 2),
            "parameters": f"{sum(p.numel() for p in tr.model.parameters()):,}",
            "ids": list(tr.translate(sentence, max_len=TOKENS).target_ids)}  # the original's ids (the import keeps them)
    torch.set_num_threads(1)
    return row, *_timed(lambda: tr.translate(sentence, max_len=TOKENS, capture=True), repeats)


def _theirs(folder: Path, text: str, tgt_lang: str | None, repeats: int) -> tuple[list[int], list[float], float]:
    """generate's output ids, and generate(output_attentions=True)'s seconds for the sentence on one thread (eager
    attention) with the load; an mBART or NLLB output starts on the target language's code, as attnscope forces
    it (`tgt_lang`)."""
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(str(folder), attn_implementation="eager").eval()
    encoded = tokenizer([text], return_tensors="pt")
    forced = {} if tgt_lang is None else {"forced_bos_token_id": tokenizer.convert_tokens_to_ids(tgt_lang)}

    def generate() -> Any:
        return model.generate(**encoded, max_new_tokens=TOKENS, do_sample=False, output_attentions=True,
                              return_dict_in_generate=True, **forced)

    ids = generate().sequences[0].tolist()[1:]  # less the decoder's start
    torch.set_num_threads(1)
    return ids, *_timed(generate, repeats)


def app_pages(checkpoint: Path, name: str, shots: Path) -> dict[str, Any]:
    """The app serving `checkpoint` alone: seconds from the server's start to the Translate page's heatmaps drawn
    (the model's load and the sentence's decode included) and from the page's opening to the first attention rows of
    its live view (decoding streams), then from the Step page's opening to its heatmaps; the errors either page shows,
    the server's peak resident memory, and a screenshot of each page's heatmaps in folder `shots`, named for the
    model (`name`)."""
    from urllib.parse import quote_plus

    from attnscope.bench.app_latency import HEATMAPS_DRAWN, NOT_STALE, served

    row: dict[str, Any] = {"load average (app)": load_average()}
    with served(checkpoint) as app:
        app.page.add_init_script(LIVE_TIMER)
        for title, path, figure in PAGES:
            opened = time.perf_counter()
            start = app.started if title == "Translate" else opened
            app.page.goto(f"{app.url}/{path}?sentence={quote_plus(SENTENCE)}&max_len={TOKENS}")
            app.page.locator(HEATMAPS_DRAWN).first.wait_for(timeout=CEILING_MS)
            app.page.wait_for_function(NOT_STALE, timeout=CEILING_MS)
            row[f"{title}: {figure}"] = round(time.perf_counter() - start, 1)
            if title == "Translate":  # the server was up: what a user opening the page waits for
                live = app.page.evaluate("window.__live")  # None: decoded before the live view was drawn
                row["Translate: open to heatmaps s"] = round(time.perf_counter() - opened, 1)
                row["Translate: open to the first live heatmap s"] = None if live is None else round(live / 1e3, 1)
            row[f"{title}: errors shown"] = app.page.locator('[data-testid="stException"], '
                                                             '[data-testid="stAlertContentError"]').all_inner_texts()
            app.page.locator(".atsx").first.screenshot(path=str(shots / f"{name}-{title.lower()}.png"))
        row["app server peak RSS GB"] = round(_high_water_kb(app.server.pid) / 2**20, 2)
    return row


def big_shape(name: str, kind: str, shape: dict[str, Any], repeats: int, app: bool, shots: Path,
              sharded: bool = False) -> dict[str, Any]:
    """One shape's row: its folder built (shard by shard with `sharded`), then measured (`measured`), then with
    `app` its pages (`app_pages`, screenshots in `shots`)."""
    with tempfile.TemporaryDirectory(prefix="attnscope-big-") as tmp:
        folder = (sharded_folder if sharded else hf_folder)(kind, shape, Path(tmp))
        row = {"model": name} | measured(folder, kind, repeats)
        if app:
            row |= app_pages(folder / IMPORTED, name, shots)
        return row


def measured(folder: Path, kind: str, repeats: int) -> dict[str, Any]:
    """A Hugging Face folder's import (seconds, peak RSS against its weights) into its IMPORTED checkpoint, load,
    and the sentence beside generate (the output's ids compared)."""
    src_lang, tgt_lang = LANGS[kind]
    weights = sum(f.stat().st_size for f in folder.glob("*.safetensors") if f.name.startswith("model"))
    out = folder / IMPORTED
    load_before = load_average()
    import_s, peak, import_cpu = child_run([sys.executable, "-m", "attnscope", "import", str(folder), "--out",
                                            str(out), "--src-lang", src_lang, "--tgt-lang", tgt_lang])
    loaded, ours, ours_load = _ours(out, SENTENCE, repeats)
    t5 = kind == "flan-t5"
    tokens, theirs, theirs_load = _theirs(folder, (T5_PREFIX if t5 else "") + SENTENCE, None if t5 else tgt_lang,
                                          repeats)
    fast, peer = min(ours), min(theirs)
    return {"parameters": loaded["parameters"], "weights GB": round(weights / 2**30, 2),
            "import s": round(import_s, 1), "import CPU s": round(import_cpu, 1),
            "import peak RSS GB": round(peak, 2),
            "peak / file": round(peak * 2**30 / weights, 2), "load average (import)": load_before,
            "load s": loaded["load s"], "load peak RSS GB": loaded["peak"],
            "load average (load)": loaded["load average"],
            "tokens identical": loaded["ids"] == tokens,
            "sentence + every head s (fastest / median)": [round(fast, 2), round(statistics.median(ours), 2)],
            "load average (ours)": ours_load,
            "HF generate(output_attentions) s (fastest / median)": [round(peer, 2),
                                                                    round(statistics.median(theirs), 2)],
            "load average (HF)": theirs_load, "ours / HF (fastest)": round(fast / peer, 2), "threads": 1}


def big_models(tiny: bool, app: bool, shots: Path) -> list[dict[str, Any]]:
    """The section: each shape in turn, skipping one whose float32 weights would take more than a third of the memory
    available now (the import's child, then this process, hold them, and Hugging Face's copy after ours); NLLB-200
    3.3B's when opted in (OPT_IN) and the app's own memory decision accepts it (each step holds one copy). With
    `app`, each page's screenshots go to folder `shots`."""
    rows = []
    for name, (kind, shape) in (TINY if tiny else SHAPES).items():
        count = _parameters(kind, shape)
        if count * 4 * 3 > available_bytes():
            rows.append({"model": name, "parameters": f"{count:,}", "skipped": "its float32 weights need more than a "
                         f"third of the {available_bytes() / 2**30:.1f} GB available now"})
            continue
        rows.append(big_shape(name, kind, shape, 1 if tiny else 3, app, shots))
    for name, (kind, shape) in ({} if tiny else SHARDED).items():
        refused = model_refusal(_parameters(kind, shape), name)
        if os.environ.get(OPT_IN) != "1" or refused:
            rows.append({"model": name, "skipped": refused or f"opt in with {OPT_IN}=1"})
            continue
        rows.append(big_shape(name, kind, shape, 2, app, shots, sharded=True))
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    return rows


def _parameters(kind: str, shape: dict[str, Any]) -> int:
    """About the parameters of a shape, counted from its config (the model is not built)."""
    d, vocab = shape["d_model"], shape["vocab_size"]
    if kind == "flan-t5":
        inner = shape["d_kv"] * shape["num_heads"]
        enc = shape["num_layers"] * (4 * d * inner + 3 * d * shape["d_ff"] + 2 * d)
        dec = shape["num_decoder_layers"] * (8 * d * inner + 3 * d * shape["d_ff"] + 3 * d)
        return enc + dec + 2 * vocab * d
    ff = shape["encoder_ffn_dim"]
    layer = 4 * d * d + 2 * d * ff + 9 * d + ff
    return shape["encoder_layers"] * layer + shape["decoder_layers"] * (layer + 4 * d * d + 6 * d) + vocab * d

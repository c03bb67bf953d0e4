"""Big models of real shapes, imported by the README's command (issue 44's bench section "big").

For each shape (mBART-large-50's 611M, NLLB-200 1.3B's, Flan-T5-large's and, when this process may take its
memory, NLLB-200 3.3B's) a random model is built with Hugging Face's own classes and saved with save_pretrained
beside a SentencePiece tokenizer trained here on the embedded Multi30k sample (fewer tokens than the model's rows,
which the import reports; nothing is downloaded). Then: `python -m attnscope import` in a child process (its wall
seconds and peak resident memory beside the size of model.safetensors), `attnscope.load`, and a 25-token sentence
with every head captured beside `generate(output_attentions=True)`, both on one thread, one side after the other
(two copies of a 1.3B model would not fit beside the other work on the machine), with the load beside each figure.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch

from attnscope.bench.hf_peer import train_sentencepiece
from attnscope.bench.hf_t5_peer import t5_small_folder
from attnscope.bench.measure import load_average
from attnscope.model.budget import available_bytes
from attnscope.training.data import sample_pairs

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
    "nllb-200-3.3B": ("nllb", MBART | dict(vocab_size=256206, d_model=2048, encoder_layers=24, decoder_layers=24,
                                           encoder_ffn_dim=8192, decoder_ffn_dim=8192, activation_function="relu")),
}
TINY = {"tiny-mbart": ("mbart-50", MBART | dict(vocab_size=4000, d_model=32, encoder_layers=2, decoder_layers=2,
                                             encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                                             decoder_ffn_dim=64, max_position_embeddings=128))}
LANGS = {"mbart-50": ("en_XX", "de_DE"), "nllb": ("eng_Latn", "deu_Latn"), "flan-t5": ("en", "de")}
T5_PREFIX = "translate English to German: "
TOKENS = 25  # output tokens of a typical sentence's translation: random weights run to the length asked


def hf_folder(kind: str, shape: dict[str, Any], folder: Path) -> Path:
    """A save_pretrained folder of a random model of `shape` and its tokenizer; </s> is suppressed on both sides so
    that outputs run to their length."""
    import transformers

    if kind == "flan-t5":
        t5_small_folder(folder, shape)
        config = folder / "config.json"  # t5_small_folder writes t5-small's (tied); Flan-T5's says it is not
        config.write_text(json.dumps(json.loads(config.read_text()) | {"tie_word_embeddings": False}, indent=2))
        return folder
    pairs = sample_pairs("en", "de", "val")
    train_sentencepiece([s for pair in pairs for s in pair], folder / "sentencepiece.bpe.model", 2000)
    if kind == "mbart-50":
        tok = transformers.MBart50Tokenizer.from_pretrained(str(folder), src_lang="en_XX", tgt_lang="de_DE")
        config = transformers.MBartConfig(**shape, decoder_start_token_id=tok.eos_token_id,
                                          forced_bos_token_id=tok.convert_tokens_to_ids("de_DE"))
        cls = transformers.MBartForConditionalGeneration
    else:
        tok = transformers.NllbTokenizer.from_pretrained(str(folder), src_lang="eng_Latn", tgt_lang="deu_Latn",
                                                         additional_special_tokens=["eng_Latn", "deu_Latn"])
        config = transformers.M2M100Config(**shape, decoder_start_token_id=tok.eos_token_id,
                                           forced_bos_token_id=tok.convert_tokens_to_ids("deu_Latn"))
        cls = transformers.M2M100ForConditionalGeneration
    torch.manual_seed(0)
    model = cls(config).eval()
    model.generation_config.bad_words_ids = [[config.eos_token_id]]  # the import reads it as a suppressed token
    model.save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    return folder


def child_run(args: list[str]) -> tuple[float, float, float]:
    """Wall seconds, peak resident memory (GB) and CPU seconds (user + system: what a quiet machine's wall time would
    be, near enough, for a one-thread job) of a child process running `args`, which must succeed."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read() if proc.stderr else ""
    if proc.returncode:
        raise RuntimeError(f"{' '.join(args[:4])} failed: {err.strip()[-400:]}")
    return seconds, usage.ru_maxrss * 1024 / 2**30, usage.ru_utime + usage.ru_stime



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
    """Load seconds, peak RSS (a child process) and parameters, then the captured sentence's seconds on one thread
    and the load."""
    from attnscope.engine.decoding.loading import load

    code = "import attnscope; attnscope.load(%r)" % str(out)
    _, peak, _ = child_run([sys.executable, "-c", code])  # with the child's start, for its own peak memory
    row = {"load average": load_average(), "peak": round(peak, 2)}
    start = time.perf_counter()
    tr = load(out)
    row |= {"load s": round(time.perf_counter() - start, 2),
            "parameters": f"{sum(p.numel() for p in tr.model.parameters()):,}"}
    torch.set_num_threads(1)
    return row, *_timed(lambda: tr.translate(sentence, max_len=TOKENS, capture=True), repeats)


def _theirs(folder: Path, text: str, repeats: int) -> tuple[list[float], float]:
    """generate(output_attentions=True)'s seconds for the sentence on one thread (eager attention), and the load."""
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(str(folder), attn_implementation="eager").eval()
    encoded = tokenizer([text], return_tensors="pt")
    torch.set_num_threads(1)
    return _timed(lambda: model.generate(**encoded, max_new_tokens=TOKENS, do_sample=False, output_attentions=True,
                                         return_dict_in_generate=True), repeats)


def big_shape(name: str, kind: str, shape: dict[str, Any], repeats: int) -> dict[str, Any]:
    """One shape's row: its folder built, then measured (`measured`)."""
    with tempfile.TemporaryDirectory(prefix="attnscope-big-") as tmp:
        return {"model": name} | measured(hf_folder(kind, shape, Path(tmp)), kind, repeats)


def measured(folder: Path, kind: str, repeats: int) -> dict[str, Any]:
    """A Hugging Face folder's import (seconds, peak RSS against its weights), load, and the sentence beside
    generate."""
    src_lang, tgt_lang = LANGS[kind]
    sentence = "A man in an orange hat starring at something."
    weights = sum(f.stat().st_size for f in folder.glob("*.safetensors") if f.name.startswith("model"))
    out = folder / "imported.safetensors"
    load_before = load_average()
    import_s, peak, import_cpu = child_run([sys.executable, "-m", "attnscope", "import", str(folder), "--out",
                                            str(out), "--src-lang", src_lang, "--tgt-lang", tgt_lang])
    loaded, ours, ours_load = _ours(out, sentence, repeats)
    theirs, theirs_load = _theirs(folder, (T5_PREFIX if kind == "flan-t5" else "") + sentence, repeats)
    fast, peer = min(ours), min(theirs)
    return {"parameters": loaded["parameters"], "model.safetensors GB": round(weights / 2**30, 2),
            "import s": round(import_s, 1), "import CPU s": round(import_cpu, 1),
            "import peak RSS GB": round(peak, 2),
            "peak / file": round(peak * 2**30 / weights, 2), "load average (import)": load_before,
            "load s": loaded["load s"], "load peak RSS GB": loaded["peak"],
            "load average (load)": loaded["load average"],
            "sentence + every head s (fastest / median)": [round(fast, 2), round(statistics.median(ours), 2)],
            "load average (ours)": ours_load,
            "HF generate(output_attentions) s (fastest / median)": [round(peer, 2),
                                                                    round(statistics.median(theirs), 2)],
            "load average (HF)": theirs_load, "ours / HF (fastest)": round(fast / peer, 2), "threads": 1}


def big_models(tiny: bool) -> list[dict[str, Any]]:
    """The section: each shape in turn, skipping one whose float32 weights would take more than a third of the memory
    available now (the import's child, then this process, hold them, and Hugging Face's copy after ours)."""
    rows = []
    for name, (kind, shape) in (TINY if tiny else SHAPES).items():
        count = _parameters(kind, shape)
        if count * 4 * 3 > available_bytes():
            rows.append({"model": name, "parameters": f"{count:,}", "skipped": "its float32 weights need more than a "
                         f"third of the {available_bytes() / 2**30:.1f} GB available now"})
            continue
        rows.append(big_shape(name, kind, shape, 1 if tiny else 3))
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

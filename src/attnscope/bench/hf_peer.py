"""attnscope beside the peer users would pick, on a real model's size (issue 33's bench section).

A random MarianMTModel of opus-mt-en-de's exact shape is built with Hugging Face's own classes and a real
MarianTokenizer (SentencePiece models trained here on the embedded Multi30k sample, a 58,101-entry vocab.json;
nothing is downloaded), saved with save_pretrained and imported by the README's command. Then, in one process and
with the output tokens checked identical, captured greedy decoding (every head and every step) and beam 4 with
capture are timed against `generate(..., output_attentions=True, return_dict_in_generate=True)` on eager attention,
as interleaved pairs whose order alternates; each row is the median of the pairs' ratios with its middle half.
`hf_peer` times any folder the import reads (AutoTokenizer, AutoModelForSeq2SeqLM): section "peer-t5" runs it on a
T5 of t5-small's shape (hf_t5_peer.py), with its task prefix on both sides.

"Out of the box" runs each side as it comes: attnscope under its thread policy (one thread unless
ATTNSCOPE_THREADS), Hugging Face with torch's own thread count; "one thread" runs both with one. The model's
</s> bias is pushed down so every output runs to its length (random weights end at random otherwise), and
generate's forced </s> at the length limit is turned off, since attnscope's decoding does not force one.
"""
from __future__ import annotations

import io
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from attnscope.bench.measure import load_average
from attnscope.bench.paired import paired
from attnscope.engine.decoding.loading import load
from attnscope.engine.decoding.translator import Translator
from attnscope.model.device import apply_thread_policy, policy_threads
from attnscope.training.data import sample_pairs

TORCH_THREADS = torch.get_num_threads()  # torch's own choice, read on import, before the bench applies the policy

OPUS_MT_EN_DE = dict(vocab_size=58101, d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
                     decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048, max_position_embeddings=512,
                     activation_function="swish", scale_embedding=True, eos_token_id=0, pad_token_id=58100,
                     decoder_start_token_id=58100, forced_eos_token_id=0, bad_words_ids=[[58100]],
                     dropout=0.1, attention_dropout=0.0, activation_dropout=0.0)
TINY_MARIAN = OPUS_MT_EN_DE | dict(vocab_size=1201, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                                   decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
                                   pad_token_id=1200, decoder_start_token_id=1200, bad_words_ids=[[1200]])  # --tiny's stand-in


def train_sentencepiece(lines: list[str], path: Path, size: int) -> list[str]:
    """A unigram SentencePiece model as Marian ships them (no <s>, </s>, <pad> inside); its pieces but <unk>."""
    import sentencepiece as spm

    out = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=out, vocab_size=size, model_type="unigram",
                                   character_coverage=1.0, minloglevel=2, hard_vocab_limit=False, unk_id=0, bos_id=-1,
                                   eos_id=-1, pad_id=-1)
    path.write_bytes(out.getvalue())
    sp = spm.SentencePieceProcessor(model_file=str(path))
    return [sp.id_to_piece(i) for i in range(1, sp.get_piece_size())]


def opus_mt_folder(folder: Path, shape: dict[str, Any] = OPUS_MT_EN_DE, seed: int = 0) -> Path:
    """A save_pretrained folder of a random Marian model of `shape` (opus-mt-en-de's) and its tokenizer."""
    import transformers

    size, pad = shape["vocab_size"], shape["pad_token_id"]
    pairs = sample_pairs("en", "de", "val") + sample_pairs("en", "de", "test_2016_flickr")
    n_pieces = min(4000, (size - 3) // 2)
    pieces = [*train_sentencepiece([s for s, _ in pairs], folder / "source.spm", n_pieces),
              *train_sentencepiece([t for _, t in pairs], folder / "target.spm", n_pieces)]
    vocab = ["</s>", "<unk>", *dict.fromkeys(p for p in pieces if p not in ("</s>", "<unk>", "<pad>"))][: size - 1]
    vocab = vocab + [f"▁filler{i}" for i in range(size - 1 - len(vocab))] + ["<pad>"]  # <pad> last, as opus-mt's
    (folder / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(vocab)}, ensure_ascii=False))
    tokenizer = transformers.MarianTokenizer(str(folder / "source.spm"), str(folder / "target.spm"),
                                             str(folder / "vocab.json"), source_lang="en", target_lang="de")
    torch.manual_seed(seed)
    model = transformers.MarianMTModel(transformers.MarianConfig(**shape)).eval()
    with torch.no_grad():
        model.final_logits_bias[0, shape["eos_token_id"]] = -1e4  # outputs run to their length
    model.generation_config.bad_words_ids = [[pad]]
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


ENDS = ("</s>", "<eos>", "<pad>", "<no token>")  # attnscope's names for the end and padding, HF's for </s>


def _tokens(tr: Translator, text: str, **kw: Any) -> list[str]:
    """The output's tokens as the imported tokenizer spells them, less the end, padding and rows without a token
    (generate's are filtered alike: `_their_tokens`), to compare with generate's."""
    tokens = map(tr.bundle.tgt_codec.token, tr.translate(text, **kw).target_ids)
    return [t for t in tokens if t not in ENDS]


def _their_tokens(tokenizer: Any, model: Any, ids: list[int]) -> list[str]:
    """generate's output tokens less its decoder start, </s>, <pad> and rows beyond the tokenizer; <unk> and other
    specials (T5's <extra_id_N> sentinels) are kept, as attnscope keeps them."""
    ends = {tokenizer.eos_token_id, tokenizer.pad_token_id, model.generation_config.decoder_start_token_id}
    return [t for t in tokenizer.convert_ids_to_tokens([i for i in ids if i not in ends and i < len(tokenizer)])
            if t is not None and t not in ENDS]


def peer(sentences: list[str], tiny: bool, app: bool) -> list[dict[str, Any]]:
    """The section: the model built and imported, timed beside generate, then (with `app`) the app's journeys on it
    in headless Chromium, quiet and while one other process keeps a core busy."""
    from attnscope.bench.app_latency import app_latency

    with tempfile.TemporaryDirectory(prefix="attnscope-peer-") as tmp:  # ~600 MB: both models' weights
        folder = opus_mt_folder(Path(tmp), TINY_MARIAN if tiny else OPUS_MT_EN_DE)
        rows = hf_peer(sentences[0], folder, *((1, (5,), 5) if tiny else (7, (25, 60), 25)))
        if app:
            for neighbour in (False, True):
                journeys = app_latency(folder / CHECKPOINT, sentences, 3 if tiny else 6, neighbour=neighbour)
                rows.append({"what": "app journeys" + (" beside a busy process" if neighbour else ""), **journeys})
    return rows


CHECKPOINT = "opus-mt-shape.safetensors"


def hf_peer(sentence: str, folder: Path, pairs: int = 7, lengths: tuple[int, ...] = (25, 60), beam_length: int = 25,
            checkpoint: str = CHECKPOINT, langs: tuple[str, str] | None = None, prefix: str = "") -> list[dict[str, Any]]:
    """Import time, then captured greedy and beam 4 against Hugging Face's generate on the model in `folder`, any
    folder `python -m attnscope import` reads (AutoTokenizer, AutoModelForSeq2SeqLM on eager attention). `langs`
    go to the import (--src-lang, --tgt-lang: a T5's task); generate reads `prefix` + the sentence, attnscope the
    sentence after the task prefix the import found (the row says both)."""
    import transformers

    out = folder / checkpoint
    flags = ["--src-lang", langs[0], "--tgt-lang", langs[1]] if langs else []
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "attnscope", "import", str(folder), "--out", str(out), *flags], check=True,
                   capture_output=True, text=True)
    import_s = time.perf_counter() - start
    start = time.perf_counter()
    tr = load(out)
    load_s = time.perf_counter() - start
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(str(folder), attn_implementation="eager").eval()
    encoded = tokenizer([prefix + sentence], return_tensors="pt")

    def generate(n: int, beams: int) -> list[str]:
        result = model.generate(**encoded, max_new_tokens=n, num_beams=beams, do_sample=False, output_attentions=True,
                                return_dict_in_generate=True)  # the generation_config's forced </s>, as attnscope's rules
        return _their_tokens(tokenizer, model, result.sequences[0].tolist())

    command = " ".join(["python -m attnscope import", *flags])
    rows: list[dict[str, Any]] = [{"what": f"import ({command}) / load s", "load average": load_average(),
                                   "result": [round(import_s, 1), round(load_s, 2)]}]
    if prefix or tr.bundle.task_prefix:
        rows[0]["task prefix (ours, HF)"] = [tr.bundle.task_prefix, prefix]
    ours_policy = policy_threads() or TORCH_THREADS
    for label, threads in (("out of the box", (ours_policy, TORCH_THREADS)), ("one thread", (1, 1))):
        settings = (lambda t=threads[0]: torch.set_num_threads(t), lambda t=threads[1]: torch.set_num_threads(t))
        for n, beams in [*((n, 1) for n in lengths), (beam_length, 4)]:
            settings[0]()
            mine = _tokens(tr, sentence, max_len=n, beam_size=beams)
            settings[1]()
            identical = mine == generate(n, beams)
            row = {"what": f"{'greedy' if beams == 1 else 'beam 4'}, {n} tokens, every head captured", "threads": label,
                   "threads (ours, HF)": list(threads), "load average": load_average(), "tokens identical": identical,
                   "output tokens": len(mine)}  # </s> and <pad> aside: a random model's run to their length
            row |= paired(lambda n=n, b=beams: tr.translate(sentence, max_len=n, beam_size=b),
                          lambda n=n, b=beams: generate(n, b), pairs, settings)
            rows.append(row)
    apply_thread_policy()
    return rows


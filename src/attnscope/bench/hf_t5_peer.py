"""attnscope beside Hugging Face's generate on a T5 of t5-small's exact shape (issue 36's bench section "peer-t5").

A random T5ForConditionalGeneration with t5-small's config (60M parameters: d_model 512, 6 + 6 layers, 8 heads of
64, ReLU feed-forward of 2048, 32,128 rows, output = shared embedding rescaled by d_model^-0.5, relative buckets
32 / max distance 128, t5-small's task prefixes in task_specific_params) is saved with a T5 tokenizer: a
SentencePiece model trained here on the embedded Multi30k sample with T5's ids (<pad> 0, </s> 1, <unk> 2, no <s>),
filled up to t5-small's 32,000 pieces with pieces no sentence uses, and 100 <extra_id_N> sentinels (32,100 tokens
for 32,128 rows, as t5-small). Nothing is downloaded. It is imported by `python -m attnscope import --src-lang en
--tgt-lang de`, which picks the "translate English to German: " prefix that Translator puts before each sentence;
generate reads `tokenizer(prefix + sentence)`, as transformers' translation pipeline does.

Random weights end at random or repeat: </s> and <pad> are suppressed on both sides by the generation config's
bad_words_ids [[1], [0]] (which the import reads as `suppressed`), so every output runs to its length. (<pad> too:
with the output tied to the embedding, a random T5 echoes its decoder's input, the start token <pad>, at every step;
without <pad> it mostly repeats one token: the cost per step is the same whatever the token, and generate's
argmax over 32,128 rows is still checked at every step.)
"""
from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import torch

from attnscope.bench.hf_peer import hf_peer
from attnscope.training.data import sample_pairs

PREFIXES = {"summarization": {"prefix": "summarize: "},
            "translation_en_to_de": {"prefix": "translate English to German: "},
            "translation_en_to_fr": {"prefix": "translate English to French: "},
            "translation_en_to_ro": {"prefix": "translate English to Romanian: "}}  # t5-small's config.json
T5_SMALL = dict(vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_decoder_layers=6, num_heads=8,
                relative_attention_num_buckets=32, relative_attention_max_distance=128, dropout_rate=0.1,
                feed_forward_proj="relu", layer_norm_epsilon=1e-6, n_positions=512, pad_token_id=0, eos_token_id=1,
                decoder_start_token_id=0)
TINY_T5 = T5_SMALL | dict(vocab_size=1128, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
                          relative_attention_num_buckets=8, relative_attention_max_distance=16)  # --tiny's stand-in
EXTRA_IDS, SPARE_ROWS = 100, 28  # t5-small: 32,000 pieces + 100 sentinels = 32,100 tokens for 32,128 rows
CHECKPOINT = "t5-small-shape.safetensors"


def spiece(lines: list[str], path: Path, pieces: int) -> None:
    """A unigram SentencePiece model with T5's ids, trained on `lines` and filled up to `pieces` pieces with
    pieces no sentence uses (a small sample yields fewer), written to `path`."""
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    out = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=out, vocab_size=min(pieces, 8000),
                                   model_type="unigram", character_coverage=1.0, minloglevel=2, hard_vocab_limit=False,
                                   pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
    proto = model_pb2.ModelProto()
    proto.ParseFromString(out.getvalue())
    lowest = min(p.score for p in proto.pieces)
    for i in range(pieces - len(proto.pieces)):
        piece = proto.pieces.add()
        piece.piece, piece.score, piece.type = f"▁filler{i}", lowest - 10.0, model_pb2.ModelProto.SentencePiece.NORMAL
    path.write_bytes(proto.SerializeToString())


def t5_small_folder(folder: Path, shape: dict[str, Any] = T5_SMALL, seed: int = 0) -> Path:
    """A save_pretrained folder of a random T5 of `shape` (t5-small's) and its T5 tokenizer, config.json written as
    t5-small's (nothing said about tying: the output layer is the shared embedding, rescaled)."""
    import transformers

    pairs = sample_pairs("en", "de", "val") + sample_pairs("en", "de", "test_2016_flickr")
    spiece([s for pair in pairs for s in pair], folder / "spiece.model", shape["vocab_size"] - EXTRA_IDS - SPARE_ROWS)
    tokenizer = transformers.T5Tokenizer.from_pretrained(str(folder), extra_ids=EXTRA_IDS)
    torch.manual_seed(seed)
    config = transformers.T5Config(**shape, task_specific_params=PREFIXES)
    config.tie_word_embeddings = shape.get("tie_word_embeddings", True)  # transformers 5 keeps it only set so
    model = transformers.T5ForConditionalGeneration(config).eval()
    model.generation_config.bad_words_ids = [[shape["eos_token_id"]], [shape["pad_token_id"]]]  # run to their length
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    path = folder / "config.json"
    written = json.loads(path.read_text())
    for key in ("scale_decoder_outputs", "tie_word_embeddings"):  # transformers 5 writes these; t5-small's does not
        written.pop(key, None)
    path.write_text(json.dumps(written, indent=2))
    return folder


def peer_t5(sentences: list[str], tiny: bool) -> list[dict[str, Any]]:
    """The section: the model built, imported with its en -> de task, and timed beside generate."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="attnscope-peer-t5-") as tmp:  # ~360 MB: both models' weights
        folder = t5_small_folder(Path(tmp), TINY_T5 if tiny else T5_SMALL)
        return hf_peer(sentences[0], folder, *((1, (5,), 5) if tiny else (7, (25, 60), 25)), checkpoint=CHECKPOINT,
                       langs=("en", "de"), prefix=PREFIXES["translation_en_to_de"]["prefix"])

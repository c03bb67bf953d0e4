"""What a run trains on: the Multi30k pair or a toy task, encoded with the run's tokenizer (trained unless given)."""
from __future__ import annotations

from dataclasses import dataclass

from attnscope.model.tokenization import TextCodec, train_bpe, train_word_level
from attnscope.training.config import TrainConfig
from attnscope.training.data import Example, data_dir, load_pairs, make_example, toy_split


@dataclass
class Corpus:
    bundle_codecs: tuple[TextCodec, TextCodec]
    train: list[Example]
    val: list[Example]
    val_text: list[tuple[str, str]]


def build_corpus(cfg: TrainConfig, codecs: tuple[TextCodec, TextCodec] | None, max_len: int) -> Corpus:
    """Read (or generate) the data and encode it, training the tokenizer unless given one."""
    if cfg.task == "multi30k":
        directory = data_dir(cfg.data_dir)
        train_text = load_pairs(directory, "train", cfg.src_lang, cfg.tgt_lang)
        val_text = load_pairs(directory, "val", cfg.src_lang, cfg.tgt_lang)
    else:
        train_text, val_text = toy_split(cfg.task, cfg.toy_size, 200, cfg.seed)
    if codecs is None:
        texts = [s for s, _ in train_text] + [t for _, t in train_text]
        tok = train_bpe(texts, cfg.vocab_size) if cfg.task == "multi30k" else train_word_level(texts)
        codecs = (TextCodec(tok), TextCodec(tok))
    src, tgt = codecs

    def encode(pairs: list[tuple[str, str]]) -> list[Example]:
        return [make_example(src.encode(s), tgt.encode(t), max_len, tgt.specials) for s, t in pairs]
    return Corpus(codecs, encode(train_text), encode(val_text), val_text)

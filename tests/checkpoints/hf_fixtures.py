"""Tiny random Hugging Face translation models of each family, saved as a user's folder would be.

Nothing is downloaded: SentencePiece and byte-level BPE tokenizers are trained here on a few
sentences, the models are the real transformers classes at tiny sizes, and `save_pretrained`
writes config.json, model.safetensors and the tokenizer files into a temporary folder.
"""
from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Callable

import torch

transformers = __import__("pytest").importorskip("transformers")
spm = __import__("pytest").importorskip("sentencepiece")

EN = ["A man rides a red bike down the street.", "Two dogs are playing in the snow.", "The children sing a song together.",
      "A woman reads a book in the park.", "People walk along the river at night.", "A black cat sleeps on the old sofa.",
      "The old man is fishing by the lake.", "Three girls jump into the cold water!", "Is the boy eating an apple?",
      "A musician plays the guitar on a stage.", "Workers build a house near the road.", "Two friends drink coffee, laughing."]
DE = ["Ein Mann fährt ein rotes Fahrrad die Straße hinunter.", "Zwei Hunde spielen im Schnee.",
      "Die Kinder singen zusammen ein Lied.", "Eine Frau liest ein Buch im Park.", "Menschen gehen nachts am Fluss entlang.",
      "Eine schwarze Katze schläft auf dem alten Sofa.", "Der alte Mann angelt am See.",
      "Drei Mädchen springen ins kalte Wasser!", "Isst der Junge einen Apfel?", "Ein Musiker spielt Gitarre auf einer Bühne.",
      "Arbeiter bauen ein Haus nahe der Straße.", "Zwei Freunde trinken lachend Kaffee."]
# Test sentences: seen words, unseen words, characters no tokenizer here has seen, punctuation and spacing.
SENTENCES = EN[:8] + DE[:4] + ["A dog runs.", "Zwei Männer!", "The café in Zürich is ☃ cold.", "  Spaces   and\ttabs  .",
                                "It's 5 o'clock, isn't it?", "Ünïcödé ß", "a", "Who? Why! How..."]
SIZES = dict(d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
             encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=64, dropout=0.0, attention_dropout=0.0,
             activation_dropout=0.0, init_std=0.5)  # weights large enough that outputs depend on the input


def train_spm(lines: list[str], path: Path, size: int, model_type: str, **kw: object) -> spm.SentencePieceProcessor:
    """A tiny SentencePiece model trained on `lines`, written to `path`."""
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines * 3), model_writer=out, vocab_size=size,
                                   model_type=model_type, character_coverage=1.0, minloglevel=2, hard_vocab_limit=False,
                                   **kw)
    path.write_bytes(out.getvalue())
    return spm.SentencePieceProcessor(model_file=str(path))


def random_model(cls: type, config: object, seed: int, eos_boost: float = 3.0) -> object:
    """The model with random weights and a random logits bias where it has one, in eval mode with eager attention.
    </s> is made likelier (its bias raised, or its tied embedding row scaled), so that some outputs end
    before the length limit and beam search's length penalty has finished hypotheses of several lengths to rank."""
    torch.manual_seed(seed)
    config._attn_implementation = "eager"
    model = cls(config).eval()
    eos = config.eos_token_id
    with torch.no_grad():
        if hasattr(model, "final_logits_bias"):
            model.final_logits_bias.normal_(0.0, 1.0)
            model.final_logits_bias[0, eos] += eos_boost
        else:
            model.get_output_embeddings().weight[eos] *= eos_boost
    return model


def marian(folder: Path) -> Path:
    """opus-mt's layout: source.spm and target.spm (unigram), one joint vocab.json, swish, sinusoids, scaled embeddings."""
    src = train_spm(EN, folder / "source.spm", 70, "unigram", unk_id=0, bos_id=-1, eos_id=-1, pad_id=-1)
    tgt = train_spm(DE, folder / "target.spm", 70, "unigram", unk_id=0, bos_id=-1, eos_id=-1, pad_id=-1)
    pieces = [p for sp in (src, tgt) for p in (sp.id_to_piece(i) for i in range(1, sp.get_piece_size()))]
    vocab = ["</s>", "<unk>", *dict.fromkeys(pieces), "<pad>"]
    (folder / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(vocab)}, ensure_ascii=False))
    tok = transformers.MarianTokenizer(str(folder / "source.spm"), str(folder / "target.spm"), str(folder / "vocab.json"),
                                       source_lang="en", target_lang="de")
    pad = len(vocab) - 1
    config = transformers.MarianConfig(vocab_size=len(vocab), pad_token_id=pad, decoder_start_token_id=pad, eos_token_id=0,
                                       forced_eos_token_id=0, activation_function="swish", scale_embedding=True,
                                       bad_words_ids=[[pad]], **SIZES)
    model = random_model(transformers.MarianMTModel, config, 0)
    model.generation_config.bad_words_ids = [[pad]]
    return _save(folder, model, tok)


def bart(folder: Path) -> Path:
    """BART: byte-level BPE, learned positions (offset 2), LayerNorm on embeddings, post-LN, GELU."""
    from tokenizers import ByteLevelBPETokenizer

    trainer = ByteLevelBPETokenizer()
    trainer.train_from_iterator(EN + DE, vocab_size=300, min_frequency=1,
                                special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"], show_progress=False)
    trainer.save_model(str(folder))
    tok = transformers.BartTokenizer(vocab=str(folder / "vocab.json"), merges=str(folder / "merges.txt"))
    config = transformers.BartConfig(vocab_size=len(tok), **SIZES)
    return _save(folder, random_model(transformers.BartForConditionalGeneration, config, 1), tok)


def mbart(folder: Path, *, fifty: bool = False) -> Path:
    """mBART (or mBART-50's tokenizer): SentencePiece + language codes; pre-LN with final norms, LayerNorm on
    embeddings; cc25 style starts the decoder on the target language code, mBART-50 forces it."""
    train_spm(EN + DE, folder / "sentencepiece.bpe.model", 90, "bpe")
    tok = (transformers.MBart50Tokenizer if fifty else transformers.MBartTokenizer).from_pretrained(
        str(folder), src_lang="en_XX", tgt_lang="de_DE")
    start = tok.eos_token_id if fifty else tok.convert_tokens_to_ids("de_DE")
    config = transformers.MBartConfig(vocab_size=len(tok), scale_embedding=True, decoder_start_token_id=start, **SIZES)
    return _save(folder, random_model(transformers.MBartForConditionalGeneration, config, 2), tok)


def m2m100(folder: Path) -> Path:
    """M2M100: SentencePiece BPE + fairseq vocab.json + __xx__ codes; fairseq sinusoids (offset 2), pre-LN, ReLU."""
    sp = train_spm(EN + DE, folder / "sentencepiece.bpe.model", 90, "bpe")
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if not sp.is_control(i) and not sp.is_unknown(i)]
    kept = pieces[: len(pieces) - 5]  # a fairseq dictionary lacks some pieces: they read as <unk>
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, **{p: i + 4 for i, p in enumerate(kept)}}
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    tok = transformers.M2M100Tokenizer(str(folder / "vocab.json"), str(folder / "sentencepiece.bpe.model"),
                                       src_lang="en", tgt_lang="de", language_codes="wmt21", num_madeup_words=0)
    config = transformers.M2M100Config(vocab_size=len(tok.encoder) + len(tok.lang_code_to_id), scale_embedding=True,
                                       **SIZES)
    return _save(folder, random_model(transformers.M2M100ForConditionalGeneration, config, 3, -3.0), tok)


def nllb(folder: Path) -> Path:
    """NLLB-200's layout on M2M100ForConditionalGeneration: its tokenizer puts the language code first."""
    train_spm(EN + DE, folder / "sentencepiece.bpe.model", 90, "bpe")
    tok = transformers.NllbTokenizer.from_pretrained(str(folder), src_lang="eng_Latn", tgt_lang="deu_Latn",
                                                     additional_special_tokens=["eng_Latn", "deu_Latn", "fra_Latn"])
    config = transformers.M2M100Config(vocab_size=len(tok), scale_embedding=True, activation_function="relu", **SIZES)
    return _save(folder, random_model(transformers.M2M100ForConditionalGeneration, config, 4, -4.0), tok)


def _save(folder: Path, model: object, tok: object) -> Path:
    model.save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    return folder


FAMILIES: dict[str, Callable[[Path], Path]] = {"marian": marian, "bart": bart, "mbart": mbart, "m2m100": m2m100,
                                               "nllb": nllb}
LANGS = {"marian": ("en", "de"), "bart": ("en", "en"), "mbart": ("en_XX", "de_DE"), "m2m100": ("en", "de"),
         "nllb": ("eng_Latn", "deu_Latn")}

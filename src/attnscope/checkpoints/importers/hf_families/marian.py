"""MarianMT (Helsinki-NLP's opus-mt models): sinusoids in [sin, cos] halves, post-LN without final norms, no
embeddings LayerNorm; a vocabulary per side when config.json says `separate_vocabs` (source.spm/target.spm onto
vocab.json, or target_vocab.json); no <bos>: the decoder starts on <pad>; a model that translates into several
languages reads the target's `>>de<<` token before the source."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.importers.hf_families.architecture import Architecture
from attnscope.checkpoints.importers.hf_files import HFFolder
from attnscope.checkpoints.importers.hf_models import OPTIONAL, SETTINGS, SIZES, architecture, weights
from attnscope.checkpoints.importers.hf_tokenizers import spm_codec
from attnscope.checkpoints.importers.hf_tokens import Tokens, generation_fields
from attnscope.checkpoints.importers.vocab_plan import VocabPlan

LAYOUT = dict(positional="sinusoidal", sinusoid="halves", norm="post", final_norm=False, embed_norm=False)


def fields(config: dict[str, Any]) -> dict[str, Any]:
    """ModelConfig fields of a Marian config.json."""
    return architecture(config, LAYOUT)


def tokens(folder: HFFolder, tok: Any, src_lang: str | None, tgt_lang: str | None) -> Tokens:
    """Marian's vocabularies, codecs, languages and token-level fields (the module docstring)."""
    separate = bool(getattr(tok, "separate_vocabs", False))
    vocabs = (tok.encoder, tok.target_encoder if separate else tok.encoder)
    config = folder.config
    sizes = (int(config["vocab_size"]), int(config.get("decoder_vocab_size") or config["vocab_size"]))
    tgt = VocabPlan.build(sizes[1], pad=_id(vocabs[1], tok.pad_token), bos=None, eos=_id(vocabs[1], tok.eos_token),
                          unk=_id(vocabs[1], tok.unk_token))
    plans = [VocabPlan.build(sizes[0], pad=_id(vocabs[0], tok.pad_token), bos=None, eos=_id(vocabs[0], tok.eos_token),
                             unk=_id(vocabs[0], tok.unk_token), at=tgt), tgt]
    codecs = []
    for vocab, plan, spm in zip(vocabs, plans, tok.spm_files):
        names = {i: t for t, i in vocab.items()}
        special = {vocab[t] for t in tok.all_special_tokens if t in vocab}
        codecs.append(spm_codec(plan, Path(spm), vocab, vocab[tok.unk_token], lambda i, n=names: n.get(i, "<unk>"),
                                special, cleanup=bool(tok.clean_up_tokenization_spaces)))
    codes = list(getattr(tok, "supported_language_codes", []) or [])
    prefix: tuple[int, ...] = ()
    if codes:
        code = f">>{tgt_lang}<<"
        if code not in codes:
            raise CheckpointError(f"this Marian model translates into several languages: give the target language "
                                  f"(--tgt-lang) as one of {', '.join(c[2:-2] for c in codes[:30])}")
        prefix = (plans[0].ours(vocabs[0][code]),)
    langs = (src_lang or tok.source_lang or "src", tgt_lang or tok.target_lang or "tgt")
    start = int(folder.setting("decoder_start_token_id") if folder.setting("decoder_start_token_id") is not None
                else config["pad_token_id"])
    framed = dict(source_framing="eos", source_prefix=prefix, **generation_fields(folder, plans[1], start, None))
    return Tokens(plans[0], plans[1], codecs[0], codecs[1], langs, framed)


def _id(vocab: dict[str, int], token: str) -> int:
    if token not in vocab:
        raise CheckpointError(f"the vocabulary has no {token} token")
    return vocab[token]


MARIAN = Architecture("MarianMT", SIZES, OPTIONAL, SETTINGS, fields, weights, tokens)

"""A Hugging Face tokenizer as an attnscope TextCodec that runs on the `tokenizers` library alone.

Done once, at import (transformers and sentencepiece are needed here, never to run the model):
- a tokenizer backed by `tokenizers` (BART, mBART, NLLB) is copied as it is;
- a SentencePiece one (Marian's source.spm/target.spm, M2M100's sentencepiece.bpe.model) is converted
  with transformers' own SpmConverter, and each piece is given the id the original gives it (its
  vocab.json id, or <unk> when the vocabulary lacks the piece).
The codec's IdMap gives those ids as the model's (vocab_plan.py; the specials under attnscope's names) and says how the
original decodes: which ids `decode(..., skip_special_tokens=True)` drops, whether it strips spaces and
whether it cleans up tokenization spaces.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from tokenizers import Tokenizer

from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.importers.vocab_plan import ROLES, VocabPlan
from attnscope.model.config import SPECIAL_TOKENS
from attnscope.model.tokenization import CLEANUP, IdMap, TextCodec

IdToken = Callable[[int], "str | None"]
NO_TOKEN = "<no token>"  # the label of an output row the tokenizer has no token for


def backend_codec(tok: Any, plan: VocabPlan) -> TextCodec:
    """A tokenizer backed by `tokenizers` (its tokenizer.json): the same object, on the model's ids."""
    raw = Tokenizer.from_str(tok.backend_tokenizer.to_str())
    raw.post_processor = None  # attnscope frames sources itself (config.frame_source)
    raw.no_truncation()
    raw.no_padding()
    size = raw.get_vocab_size(with_added_tokens=True)
    special = {i for i, added in raw.get_added_tokens_decoder().items() if added.special}
    cleanup = bool(getattr(tok, "clean_up_tokenization_spaces", False)) and not (
        type(raw.model).__name__ == "BPE" and not getattr(
            tok, "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output", False))
    return TextCodec(raw, id_map(list(range(size)), plan, tok.convert_ids_to_tokens, special, strip=False,
                                  replace=CLEANUP if cleanup else ()))


def spm_codec(plan: VocabPlan, model: Path, piece_ids: Mapping[str, int], unk: int, id_token: IdToken,
              special: set[int], *, cleanup: bool) -> TextCodec:
    """A SentencePiece tokenizer converted to `tokenizers`; each piece gets the original's id for it (`piece_ids`,
    <unk> when absent), as transformers' Marian and M2M100 tokenizers look pieces up in their vocab.json. Their
    decode() drops `special` and strips the text."""
    raw = spm_tokenizer(model)
    pieces = [raw.id_to_token(i) for i in range(raw.get_vocab_size(with_added_tokens=True))]
    originals = [piece_ids.get(p, unk) for p in pieces]
    return TextCodec(raw, id_map(originals, plan, id_token, special, strip=True, replace=CLEANUP if cleanup else (),
                                  by_text=True))


def spm_tokenizer(model: Path) -> Tokenizer:
    """transformers' conversion of a SentencePiece model to `tokenizers`: its normalizer, Metaspace, and a Unigram
    model (SpmConverter), or a BPE one with the merges transformers extracts for its own fast NLLB tokenizer."""
    try:
        from tokenizers.models import BPE
        from transformers.convert_slow_tokenizer import SentencePieceExtractor, SpmConverter
    except ImportError:
        raise CheckpointError("converting a SentencePiece tokenizer needs transformers and sentencepiece at import time: "
                              "pip install -e \".[hf]\" (the tested versions)") from None

    class Original:  # what SpmConverter reads of a slow tokenizer
        vocab_file = str(model)

    class Converter(SpmConverter):
        def tokenizer(self, proto: Any) -> Tokenizer:
            if proto.trainer_spec.model_type != 2:  # Unigram: SpmConverter's own
                return super().tokenizer(proto)
            found = SentencePieceExtractor(str(model)).extract(BPE)
            tok = Tokenizer(BPE(found["vocab"], found["merges"], unk_token=proto.trainer_spec.unk_piece, fuse_unk=True,
                                byte_fallback=False, dropout=None))
            tok.add_tokens(found["additional_special_tokens"])
            return tok

    try:
        return Converter(Original()).converted()
    except Exception as err:  # a corrupt or unsupported SentencePiece file
        raise CheckpointError(f"{model.name} is not a SentencePiece model transformers can convert "
                              f"({str(err).splitlines()[0][:160] if str(err) else type(err).__name__})") from None


def id_map(originals: Sequence[int], plan: VocabPlan, id_token: IdToken, special: set[int], *, strip: bool,
           replace: tuple[tuple[str, str], ...] = (), by_text: bool = False, utf8: bool = False) -> IdMap:
    """Tokenizer ids -> the model's, the model's tokens (specials renamed) and the ids decode() drops: the specials,
    and the output rows the tokenizer has no token for (T5's 28 spare rows), which transformers decodes to nothing
    (`utf8`: the tokens are bytes, labelled by model.tokenization.byte_label)."""
    ids = tuple(plan.ours(o) if plan.has(o) else plan.unk for o in originals)
    names = {getattr(plan, role): name for role, name in zip(ROLES, SPECIAL_TOKENS)}  # <pad> wins when it is <bos>
    names[plan.pad] = SPECIAL_TOKENS[0]
    found = [names.get(i) or id_token(old) for i, old in enumerate(plan.order)]
    tokens = tuple(NO_TOKEN if t is None else str(t) for t in found)
    hidden = frozenset(plan.ours(o) for o in special if plan.has(o)) | {i for i, t in enumerate(found) if t is None}
    return IdMap(ids, tokens, hidden, strip, replace, by_text, utf8=utf8)


def framing(tok: Any, plan: VocabPlan) -> tuple[list[int], list[int]]:
    """The ids the tokenizer puts before and after a sentence (the model's ids), read from its own output."""
    probe = "a b c"
    framed = tok(probe)["input_ids"]
    bare = tok(probe, add_special_tokens=False)["input_ids"]
    for start in range(len(framed) - len(bare) + 1):
        if framed[start:start + len(bare)] == bare:
            return [plan.ours(i) for i in framed[:start]], [plan.ours(i) for i in framed[start + len(bare):]]
    raise CheckpointError("the tokenizer's framed output does not contain the sentence's own ids: cannot tell how it "
                          "frames sources")

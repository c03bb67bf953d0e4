"""Vocabularies of models trained elsewhere, turned into attnscope tokenizers.

Three kinds of file are read: a Hugging Face `tokenizer.json`, a JSON list of tokens (what
torchtext's `vocab.get_itos()` gives) and a text file with one token per line. The special
tokens are found by name in any order and spelling (`<pad>`/`<blank>`, `<bos>`/`<sos>`/`<s>`,
`<eos>`/`</s>`, `<unk>`...) or given explicitly, then renamed where they are to attnscope's names
(`Vocabulary.plan`, vocab_plan.py as for every family, holds their ids, which the model's config takes).
A source vocabulary whose specials sit at other ids than the target's has them moved to the target's
(rows swapped the same way), so the model computes exactly what it computed before, token for token.

Word-level vocabularies (the two list kinds) get a built-in splitter: text is split at
whitespace and every punctuation character becomes its own token ("Hunde." -> "Hunde", "."),
and it is lowercased when no token of the vocabulary has an upper-case letter. The splitter is
stored in the checkpoint's tokenizer, so the app splits text the same way.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.importers.vocab_plan import VocabPlan
from attnscope.model import untrusted
from attnscope.model.config import SPECIAL_TOKENS
from attnscope.model.tokenization import TextCodec, TokenizerError

ROLES = ("pad", "bos", "eos", "unk")  # named SPECIAL_TOKENS in this order
# Spellings of each special token, compared without <>, [] and case: "<SOS>", "[PAD]", "</s>"...
SPELLINGS = {"pad": {"pad", "blank", "padding"}, "bos": {"bos", "sos", "s", "start", "go", "cls"},
             "eos": {"eos", "/s", "end", "stop", "sep"}, "unk": {"unk", "oov", "unknown"}}
BRACKETED = re.compile(r"^(<[^<>\s]+>|\[[^\[\]\s]+\])$")

Specials = Mapping[str, "int | str"]  # role -> the user's id or token


def shown(token: "str | int") -> str:
    """A token as the user writes it (pad=<blank>, as the page and --specials take them), quoted only
    when it is empty or has spaces at its ends, which would otherwise be invisible."""
    text = str(token)
    return text if text and text.strip() == text else repr(text)


@dataclass(frozen=True)
class Vocabulary:
    """A user's vocabulary as the model reads it: the codec, and its plan (the user's id of each id, the specials)."""

    codec: TextCodec
    plan: VocabPlan  # the model's id i is the user's id plan.order[i]
    specials: dict[str, str]  # role -> the user's spelling, e.g. {"bos": "<sos>"}
    kind: str  # "tokenizer.json", "token list" or "token lines"

    @property
    def size(self) -> int:
        return self.plan.size


def read_tokens(source: "str | Path | bytes | Sequence[str]", name: str = "") -> tuple[list[str] | dict, str]:
    """A token list (list kinds) or a parsed tokenizer.json (dict), and which kind it was."""
    if isinstance(source, (list, tuple)):
        return [str(t) for t in source], "token list"
    if isinstance(source, (str, Path)) and not isinstance(source, bytes):
        path = Path(source)
        name = name or path.name
        try:
            source = path.read_bytes()
        except OSError as err:
            raise CheckpointError(f"cannot read the vocabulary {path}: {err.strerror or err}") from None
    text = bytes(source).decode("utf-8", errors="replace")
    stripped = text.lstrip()
    if stripped.startswith(("[", "{")):
        try:
            data = untrusted.loads(text)
        except json.JSONDecodeError as err:
            raise CheckpointError(f"{name or 'the vocabulary'} looks like JSON but does not parse ({err.msg} at line "
                                  f"{err.lineno}): give a tokenizer.json, a JSON list of tokens or one token a line") from None
        if isinstance(data, list) and all(isinstance(t, str) for t in data):
            return data, "token list"
        if isinstance(data, dict) and isinstance(data.get("model"), dict):
            return data, "tokenizer.json"
        found = f"a JSON {type(data).__name__}" + (f" with keys {', '.join(list(data)[:5])}" if isinstance(data, dict) else "")
        raise CheckpointError(f"{name or 'the vocabulary'} is {found}, neither a Hugging Face tokenizer.json nor a "
                              "list of tokens (torchtext: json.dump(vocab.get_itos(), f))")
    return [line.rstrip("\r") for line in text.split("\n") if line.strip()], "token lines"


def find_specials(tokens: Sequence[str], given: Specials | None = None, what: str = "vocabulary") -> dict[str, int]:
    """The user's id of each special token: given explicitly, else found by its spelling."""
    given = dict(given or {})
    unknown = sorted(set(given) - set(ROLES))
    if unknown:
        raise CheckpointError(f"unknown special token role {shown(unknown[0])}: use {', '.join(ROLES)}, "
                              "e.g. pad=<blank>")
    index = {t: i for i, t in enumerate(tokens)}
    found: dict[str, int] = {}
    for role in ROLES:
        if role in given:
            value = given[role]
            if isinstance(value, int) and 0 <= value < len(tokens):
                found[role] = value
            elif isinstance(value, str) and value in index:
                found[role] = index[value]
            else:
                raise CheckpointError(f"the {what} has no token {shown(value)} ({len(tokens):,} tokens): correct "
                                      f"{role}={shown(value)} in the special tokens")
            continue
        hits = [i for i, t in enumerate(tokens) if BRACKETED.match(t) and t.strip("<>[]").lower() in SPELLINGS[role]]
        if len(hits) > 1:
            names = ", ".join(tokens[i] for i in hits)
            raise CheckpointError(f"the {what} has several tokens that could be {role} ({names}): "
                                  f"say which in the special tokens, e.g. {role}={shown(tokens[hits[0]])}")
        if not hits:
            seen = [t for t in tokens[:50] if BRACKETED.match(t)]
            raise CheckpointError(f"the {what} has no {role} token (looked for " +
                                  ", ".join(f"<{s}>" for s in sorted(SPELLINGS[role])) + "; its bracketed tokens are " +
                                  (", ".join(seen) or "none") + f"): name it in the special tokens, e.g. "
                                  f"{role}=<yours>")
        found[role] = hits[0]
    if len(set(found.values())) < len(found):
        pairs = ", ".join(f"{role}={shown(tokens[i])}" for role, i in found.items())
        raise CheckpointError(f"the {what} uses one token for two roles ({pairs}): give the special tokens explicitly")
    return found


def load_vocabulary(source: "str | Path | bytes | Sequence[str]", name: str = "", specials: Specials | None = None,
                    what: str = "vocabulary", at: VocabPlan | None = None) -> Vocabulary:
    """Read a vocabulary of any supported kind, its specials renamed where they are (or moved to `at`'s ids)."""
    data, kind = read_tokens(source, name)
    if kind == "tokenizer.json":
        return _from_tokenizer_json(data, specials, what, at)
    if not data:
        raise CheckpointError(f"the {what} is empty")
    duplicates = sorted({t for t in data if data.count(t) > 1}) if len(set(data)) < len(data) else []
    if duplicates:
        raise CheckpointError(f"the {what} lists {shown(duplicates[0])} more than once: one token a line, each once")
    roles = find_specials(data, specials, what)
    plan = VocabPlan.build(len(data), **roles, at=at)
    tokens = [_renamed(data[old], old, roles) for old in plan.order]
    return Vocabulary(TextCodec(word_level(tokens)), plan, {r: data[i] for r, i in roles.items()}, kind)


def _renamed(token: str, old_id: int, roles: dict[str, int]) -> str:
    for role, name in zip(ROLES, SPECIAL_TOKENS):
        if roles[role] == old_id:
            return name
    if token in SPECIAL_TOKENS:
        raise CheckpointError(f"the vocabulary uses {token} as an ordinary token: give the special tokens explicitly, "
                              "e.g. pad=<blank>,bos=<s>")
    return token


def word_level(tokens: Sequence[str]) -> Tokenizer:
    """A word-level tokenizer over `tokens` (ids in list order): whitespace, then each punctuation mark apart."""
    tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate(tokens)}, unk_token=SPECIAL_TOKENS[3]))
    if not any(ch.isupper() for t in tokens if t not in SPECIAL_TOKENS for ch in t):
        tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                 pre_tokenizers.Punctuation(behavior="isolated")])
    tok.decoder = decoders.WordPiece(prefix="\x00")  # joins tokens with spaces, then ' .' -> '.'
    tok.add_special_tokens(list(SPECIAL_TOKENS))
    return tok


def _from_tokenizer_json(data: dict, specials: Specials | None, what: str, at: VocabPlan | None) -> Vocabulary:
    """Reorder a Hugging Face tokenizer's ids (its vocabulary and added tokens) around the specials."""
    try:
        tok = Tokenizer.from_str(json.dumps(data))
    except Exception as err:  # tokenizers raises a bare Exception on a bad file
        raise CheckpointError(f"the {what} tokenizer.json does not load ({str(err).splitlines()[0][:160]})") from None
    size = tok.get_vocab_size(with_added_tokens=True)
    tokens = [tok.id_to_token(i) or "" for i in range(size)]
    roles = find_specials(tokens, specials, what)
    plan = VocabPlan.build(size, **roles, at=at)
    order = plan.order
    new_id = {old: new for new, old in enumerate(order)}
    rename = {tokens[roles[r]]: name for r, name in zip(ROLES, SPECIAL_TOKENS)}
    for name in SPECIAL_TOKENS:
        if name in tokens and name not in rename.values() | rename.keys():
            raise CheckpointError(f"the {what} uses {name} as an ordinary token: give the special tokens explicitly, "
                                  "e.g. pad=<blank>,bos=<s>")
    model = data["model"]
    vocab = model.get("vocab")
    if isinstance(vocab, dict):
        model["vocab"] = {rename.get(t, t): new_id[i] for t, i in vocab.items()}
    elif isinstance(vocab, list):  # Unigram: [piece, score] in id order
        model["vocab"] = [[rename.get(vocab[old][0], vocab[old][0]), vocab[old][1]] for old in order if old < len(vocab)]
        if model.get("unk_id") is not None:
            model["unk_id"] = new_id[model["unk_id"]]
    else:
        raise CheckpointError(f"the {what} tokenizer.json has a {model.get('type')} model without a vocabulary")
    if isinstance(model.get("unk_token"), str):
        model["unk_token"] = rename.get(model["unk_token"], model["unk_token"])
    for added in data.get("added_tokens") or []:
        added["id"] = new_id[added["id"]]
        added["content"] = rename.get(added["content"], added["content"])
    data["post_processor"] = None  # attnscope frames sources and targets itself
    try:
        codec = TextCodec(Tokenizer.from_str(json.dumps(data)))
    except (TokenizerError, Exception) as err:
        raise CheckpointError(f"the {what} tokenizer.json cannot be reordered ({str(err).splitlines()[0][:160]})") from None
    return Vocabulary(codec, plan, {r: tokens[i] for r, i in roles.items()}, "tokenizer.json")

"""One import, whatever the family: what a family supplies (`Family`) and the one step that makes a model of it.

A family reads its framework's settings into ModelConfig fields, maps its layers onto the names of
model/parameters.py, and gives its vocabularies (their special tokens' ids, which the config takes as
they are, codecs, languages and the token-level config fields). `assemble` does the rest the same way for
every family: the vocabulary rows, the config, the model, the check against the user's outputs where the
family has one, the import report, the summary and the checkpoint bundle.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from torch import Tensor

from attnscope.checkpoints.checkpoint import Bundle, CheckpointError
from attnscope.checkpoints.decoding_rules import ATTNSCOPE, DecodingRules
from attnscope.checkpoints.decoding_rules import KEY as RULES_KEY
from attnscope.checkpoints.importers.parts import Imported, ImportReport, build, checked, vocab_tensors
from attnscope.checkpoints.importers.vocab_plan import ROLES, VocabPlan
from attnscope.model.config import ConfigError, ModelConfig
from attnscope.model.tokenization import TextCodec
from attnscope.model.transformer import Transformer


@dataclass(frozen=True)
class Vocabularies:
    """Both sides' vocabularies: the model's row order, codecs, languages and the token-level config fields."""

    src: VocabPlan
    tgt: VocabPlan
    src_codec: TextCodec
    tgt_codec: TextCodec
    langs: tuple[str, str]
    fields: dict[str, Any] = field(default_factory=dict)  # source_framing, decoder_start, suppressed, ...
    specials: dict[str, dict[str, str]] = field(default_factory=dict)  # side -> role -> the user's spelling
    task_prefix: str = ""  # text before every source sentence (a T5 trained on several tasks), Bundle.task_prefix


@dataclass(frozen=True)
class Weights:
    """A family's tensors under our names, with the four vocabulary tensors apart, still in the original row order."""

    layers: dict[str, Tensor]
    src_embed: Tensor
    tgt_embed: Tensor
    output: Tensor
    output_bias: Tensor | None = None  # None: the output layer has no bias


class Family(Protocol):
    """What one family of models (Hugging Face, fairseq, OpenNMT-py, state_dicts) supplies to `assemble`."""

    label: str  # the report's name of the family, e.g. "fairseq transformer"
    data: str  # the summary's line saying what was imported from where
    name: str  # the checkpoint's name

    def config_fields(self) -> dict[str, Any]:
        """ModelConfig fields read from the family's settings (not the vocabulary sizes, tying or sharing)."""
        ...

    def vocabularies(self) -> Vocabularies:
        ...

    def weights(self, fields: dict[str, Any]) -> Weights:
        ...

    def settings(self, config: ModelConfig) -> dict[str, tuple[Any, str]]:
        """The report's settings: name -> (value, where it came from)."""
        ...

    def notes(self) -> tuple[str, ...]:
        """Sentences for the report that are no setting."""
        return ()

    def rules(self) -> DecodingRules:
        """How the family's own tool decodes by default: recorded in the checkpoint and used unless the user picks
        attnscope's own (decoding_rules.py)."""
        return ATTNSCOPE

    def check(self, model: Transformer, tensors: dict[str, Tensor]) -> int:
        """Examples the model reproduced (0: none given); raises CheckpointError naming what would reproduce them."""
        return 0


def assemble(family: Family) -> Imported:
    """The imported model, its bundle and report, made the same way for every family."""
    fields = family.config_fields()
    vocab = family.vocabularies()
    weights = family.weights(fields)
    tables, share, tie = vocab_tensors(weights.src_embed, weights.tgt_embed, weights.output, weights.output_bias,
                                       vocab.src, vocab.tgt)
    tensors = checked(weights.layers | tables)
    ids = {f"{role}_id": getattr(vocab.tgt, role) for role in ROLES}
    if any(getattr(vocab.src, role) != getattr(vocab.tgt, role) for role in ROLES if role != "bos"):
        raise CheckpointError("the source and target vocabularies number their special tokens differently: "
                              f"{ {r: getattr(vocab.src, r) for r in ROLES} } and {ids}")
    try:
        config = ModelConfig(src_vocab_size=vocab.src.size, tgt_vocab_size=vocab.tgt.size, tie_embeddings=tie,
                             share_embeddings=share, **fields, **vocab.fields, **ids)
    except (ConfigError, TypeError) as err:
        raise CheckpointError(f"this {family.label} model does not make a valid attnscope config: {err}") from None
    model = build(config, tensors)
    checked_on = family.check(model, tensors)
    settings = family.settings(config)
    report = ImportReport(family.label, {k: v for k, (v, _) in settings.items()},
                          {k: origin for k, (_, origin) in settings.items()}, checked_on, vocab.specials, family.notes())
    rules = family.rules()
    summary = {"data": family.data, "name": family.name, "import": report.lines(),
               **({RULES_KEY: rules.to_dict()} if rules != ATTNSCOPE else {})}
    bundle = Bundle(config, vocab.src_codec, vocab.tgt_codec, *vocab.langs, summary, vocab.task_prefix)
    return Imported(model, bundle, report, vocab.src.order, vocab.tgt.order)

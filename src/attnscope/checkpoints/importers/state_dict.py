"""Import a state_dict trained elsewhere so that it computes exactly what it computed in its own code.

One importer serves the Checkpoints page, `python -m attnscope import` and `attnscope.import_model`;
it is a family like the others (assemble.py). Steps:
1. recognise the family and rename the tensors (state_dict_layout.py);
2. read the vocabularies and find their special tokens (vocab_files.py): the config takes their ids, and
   only a source vocabulary whose specials sit elsewhere than the target's has its rows moved;
3. settle what the weights cannot show (heads, norm placement, activation, LayerNorm eps,
   embedding scale, source framing): read from the live module when there is one, else given
   or assumed, and then checked against the user's own outputs on a few sentences when given
   (state_dict_checks.py). A mismatch names the settings that do reproduce them; without examples,
   the report says which settings were not checked and how to check them.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from torch import Tensor, nn

from attnscope.checkpoints.boundary import boundary
from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.importers.assemble import Family, Vocabularies, Weights, assemble
from attnscope.checkpoints.importers.live_settings import read_settings
from attnscope.checkpoints.importers.parts import Imported
from attnscope.checkpoints.importers.state_dict_checks import HIDDEN, Example, example_ids, mismatch, reproduces
from attnscope.checkpoints.importers.state_dict_layout import Layout, recognise
from attnscope.checkpoints.importers.torch_files import read_torch_file
from attnscope.checkpoints.importers.vocab_files import Specials, Vocabulary, load_vocabulary
from attnscope.model.config import ConfigError, ModelConfig
from attnscope.model.parameters import OUTPUT, OUTPUT_BIAS, SRC_EMBED, TGT_EMBED, VOCABULARY
from attnscope.model.transformer import Transformer

DEFAULTS: dict[str, Any] = {"n_heads": 8, "norm_first": False, "activation": "relu", "norm_eps": 1e-5,
                            "embed_scale": True, "source_framing": "bos-eos"}
VocabSource = "str | Path | bytes | Sequence[str] | Vocabulary"


@dataclass(frozen=True)
class StateDict(Family):
    """A state_dict's family (nn.Transformer, Annotated Transformer): its layout, vocabularies and settled settings."""

    layout: Layout
    src: Vocabulary
    tgt: Vocabulary
    langs: tuple[str, str]
    chosen: dict[str, Any]  # HIDDEN -> value
    source: dict[str, str]  # HIDDEN -> where it came from
    examples: Sequence[Example]
    max_len: int | None
    name: str

    @property
    def label(self) -> str:
        return self.layout.family

    @property
    def data(self) -> str:
        return f"imported {self.layout.family} state_dict"

    def config_fields(self) -> dict[str, Any]:
        return fields(self.layout, self.chosen, self.max_len)

    def vocabularies(self) -> Vocabularies:
        return Vocabularies(self.src.plan, self.tgt.plan, self.src.codec, self.tgt.codec, self.langs,
                            specials={"source": dict(self.src.specials), "target": dict(self.tgt.specials)})

    def weights(self, fields: dict[str, Any]) -> Weights:
        t = self.layout.tensors
        return Weights({k: v for k, v in t.items() if k not in VOCABULARY}, t[SRC_EMBED], t[TGT_EMBED], t[OUTPUT],
                       t[OUTPUT_BIAS])

    def settings(self, config: ModelConfig) -> dict[str, tuple[Any, str]]:
        stored = self.layout.max_len is not None  # a positional table in the state_dict shows the kind
        return {**{k: (self.chosen[k], self.source[k]) for k in self.chosen},
                "positional": (self.layout.positional, "read from the weights" if stored else "assumed")}

    def check(self, model: Transformer, tensors: dict[str, Tensor]) -> int:
        if not self.examples:
            return 0
        pairs = [example_ids(ex, self.src, self.tgt, model.config) for ex in self.examples]
        if not reproduces(model, pairs):
            def config(candidate: dict[str, Any]) -> ModelConfig:
                return dataclasses.replace(model.config, **fields(self.layout, candidate, self.max_len))
            raise CheckpointError(mismatch(self.layout.d_model, config, tensors, self.chosen, self.source, pairs))
        return len(pairs)


def import_weights(state: dict[str, Tensor], src_vocab: VocabSource, tgt_vocab: VocabSource | None = None, *,
                   src_lang: str = "src", tgt_lang: str = "tgt", specials: Specials | None = None,
                   tgt_specials: Specials | None = None, examples: Sequence[Example] = (), max_len: int | None = None,
                   read: dict[str, Any] | None = None, name: str = "imported", **settings: Any) -> Imported:
    """An attnscope model computing what the state_dict's model computed (see the module docstring).

    `settings` are HIDDEN names (n_heads=8, norm_first=False, ...); `read` holds those read from a live module.
    """
    unknown = sorted(set(settings) - set(HIDDEN))
    if unknown:
        raise CheckpointError(f"unknown import setting {unknown[0]!r}: the settings are {', '.join(HIDDEN)}")
    layout = recognise(state)
    src, tgt = _vocabularies(layout, src_vocab, tgt_vocab, specials, tgt_specials)
    chosen, source = _settle(layout, settings, read or {})
    return assemble(StateDict(layout, src, tgt, (src_lang.strip() or "src", tgt_lang.strip() or "tgt"), chosen, source,
                              examples, max_len, name))


def import_file(path: str | Path, src_vocab: VocabSource, tgt_vocab: VocabSource | None = None, **kw: Any) -> Imported:
    """Import a .pt/.pth state_dict file (loaded without running code; memory-mapped in torch.save's zip format)."""
    return import_weights(read_torch_file(Path(path)), src_vocab, tgt_vocab, **kw)


def import_module(module: nn.Module, src_vocab: VocabSource, tgt_vocab: VocabSource | None = None, **kw: Any) -> Imported:
    """Import a live model: its state_dict, with the hidden settings read from the objects themselves."""
    with boundary(f"your {type(module).__name__}"):
        return _import_module(module, src_vocab, tgt_vocab, **kw)


def _import_module(module: nn.Module, src_vocab: VocabSource, tgt_vocab: VocabSource | None, **kw: Any) -> Imported:
    state = {k: v.detach().to("cpu", copy=True) for k, v in module.state_dict().items()}  # never aliases its weights
    layout = recognise(state)
    read = read_settings(module, layout)
    clash = sorted(k for k in set(read) & set(kw) if read[k] != kw[k])
    if clash:
        raise CheckpointError(f"you gave {clash[0]}={kw[clash[0]]} but the model has {clash[0]}={read[clash[0]]}: "
                              "leave it out, a live model's own value is used")
    return import_weights(state, src_vocab, tgt_vocab, read=read, **{k: v for k, v in kw.items() if k not in read})


def _vocabulary(value: VocabSource, specials: Specials | None, what: str, at: Vocabulary | None = None) -> Vocabulary:
    if isinstance(value, Vocabulary):
        return value
    return load_vocabulary(value, specials=specials, what=what, at=None if at is None else at.plan)


def _vocabularies(layout: Layout, src_vocab: VocabSource, tgt_vocab: VocabSource | None,
                  specials: Specials | None, tgt_specials: Specials | None) -> tuple[Vocabulary, Vocabulary]:
    tgt = None if tgt_vocab is None else _vocabulary(tgt_vocab, tgt_specials or specials, "target vocabulary")
    src = _vocabulary(src_vocab, specials, "source vocabulary", tgt)  # its specials at the target's ids
    tgt = tgt or src
    if tgt.size != layout.tgt_rows:
        which = "target vocabulary" if tgt_vocab is not None else "vocabulary (no target vocabulary was given)"
        raise CheckpointError(f"the output layer has {layout.tgt_rows:,} rows but your {which} has {tgt.size:,} tokens: "
                              "upload the target vocabulary the model was trained with")
    if src.size != layout.src_rows:
        raise CheckpointError(f"the source embedding has {layout.src_rows:,} rows but your source vocabulary has "
                              f"{src.size:,} tokens: upload the source vocabulary the model was trained with")
    if layout.share_embeddings and src.plan.order != tgt.plan.order:
        raise CheckpointError("the model shares one embedding between source and target, but the two vocabularies "
                              "order their special tokens differently: give one joint vocabulary")
    return src, tgt


def _settle(layout: Layout, given: dict[str, Any], read: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    implied = {"norm_first": layout.implied["norm"] == "pre"} if "norm" in layout.implied else {}
    if layout.family == "Annotated Transformer":
        implied["norm_eps"] = 1e-6  # its LayerNorm's default; a live model's own value wins
    chosen, source = {}, {}
    for key in HIDDEN:
        for origin, values in (("read from the model", read), ("given", given), ("the family's code", implied),
                               ("assumed", DEFAULTS)):
            if key in values and values[key] is not None:
                chosen[key], source[key] = values[key], origin
                break
    if "norm_first" in implied and chosen["norm_first"] != implied["norm_first"]:
        raise CheckpointError(f"the {layout.family} always normalises before each sublayer (pre-LN): leave norm_first out")
    return chosen, source


def fields(layout: Layout, s: dict[str, Any], max_len: int | None) -> dict[str, Any]:
    """ModelConfig fields of the layout with the settings `s` (HIDDEN names)."""
    length = (layout.max_len or 256) if layout.positional == "learned" else max_len or min(layout.max_len or 256, 1024)
    try:
        return dict(d_model=layout.d_model, n_heads=int(s["n_heads"]), n_encoder_layers=layout.n_encoder_layers,
                    n_decoder_layers=layout.n_decoder_layers, d_ff=layout.d_ff, dropout=0.0, attention_dropout=0.0,
                    max_len=length, positional=layout.positional, norm="pre" if s["norm_first"] else "post",
                    final_norm=layout.final_norm, layer_norm=layout.implied.get("layer_norm", "torch"),
                    norm_eps=float(s["norm_eps"]), activation=s["activation"], embed_scale=bool(s["embed_scale"]),
                    source_framing=s["source_framing"])
    except (ConfigError, TypeError, ValueError) as err:
        raise CheckpointError(f"these weights and settings do not make a valid model: {err}") from None

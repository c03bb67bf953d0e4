"""Import a model trained elsewhere so that it computes exactly what it computed in its own code.

One importer serves the Checkpoints page, `python -m attnscope import` and
`attnscope.import_model`. Steps:
1. recognise the family and rename the tensors (convert.py);
2. read the vocabularies and move their special tokens to ids 0-3, permuting the embedding
   and output rows the same way (vocab.py), so every logit is the user's logit for that token;
3. settle what the weights cannot show (heads, norm placement, activation, LayerNorm eps,
   embedding scale, source framing): read from the live module when there is one, else given
   or assumed, and then checked against the user's own outputs on a few sentences when given.
   A mismatch names the settings that do reproduce them; without examples, the report says
   which settings were not checked and how to check them.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import torch
from torch import Tensor, nn

from attnscope.checkpoints.boundary import boundary
from attnscope.checkpoints.checkpoint import Bundle, CheckpointError, check_shapes
from attnscope.checkpoints.convert import Layout, read_state_dict, recognise
from attnscope.checkpoints.live import read_settings
from attnscope.checkpoints.vocab import Specials, Vocabulary, load_vocabulary
from attnscope.model.budget import over_budget
from attnscope.model.config import BOS_ID, EOS_ID, PAD_ID, ConfigError, ModelConfig
from attnscope.model.transformer import Transformer

HIDDEN = ("n_heads", "norm_first", "activation", "norm_eps", "embed_scale", "source_framing")
DEFAULTS: dict[str, Any] = {"n_heads": 8, "norm_first": False, "activation": "relu", "norm_eps": 1e-5,
                            "embed_scale": True, "source_framing": "bos-eos"}
# origins that need no check
KNOWN = ("read from the model", "read from the weights", "the family's code", "config.json", "the checkpoint's settings")
Example = tuple[str, "str | Sequence[int]"]  # a source sentence and the user's model's output (text or its ids)
VocabSource = "str | Path | bytes | Sequence[str] | Vocabulary"


@dataclass(frozen=True)
class ImportReport:
    """How each setting the weights cannot show was settled."""

    family: str
    settings: dict[str, Any]
    source: dict[str, str]  # setting -> one of KNOWN, "given" or "assumed"
    checked_on: int = 0  # examples the imported model reproduced exactly (0: none given)
    specials: dict[str, dict[str, str]] = field(default_factory=dict)  # side -> role -> the user's spelling
    notes: tuple[str, ...] = ()  # what the user should know that is no setting (a tokenizer smaller than the model's rows)

    @property
    def unchecked(self) -> list[str]:
        """Settings neither read from the model nor confirmed by the user's outputs."""
        if self.checked_on:
            return []
        return [k for k in self.settings if self.source[k] not in KNOWN]

    def lines(self) -> list[str]:
        """The report in sentences, for the page, the CLI and `Translator.bundle.summary`."""
        out = [f"Imported as {self.family}: " + ", ".join(f"{k}={v} ({self.source[k]})" for k, v in self.settings.items())]
        if self.checked_on:
            out.append(f"Checked: the imported model reproduces your model's outputs on all {self.checked_on} examples.")
        elif self.unchecked:
            out.append("Not checked (a state_dict cannot show them): " + ", ".join(
                f"{k}={self.settings[k]}" for k in self.unchecked) + ". If one is wrong the heatmaps are wrong even "
                "when translations look right. Check them by giving a few source sentences with your model's own "
                "outputs (examples=[(source, output), ...], --check FILE, or the page's check box), or import the "
                "live model in Python, which reads them from it.")
        return [*out, *self.notes]


@dataclass(frozen=True)
class Imported:
    """The imported model, its checkpoint bundle, and how its settings were settled."""

    model: Transformer
    bundle: Bundle
    report: ImportReport
    # for each of our ids, the original model's id (None: a row it lacks); compare logits as ours vs theirs[..., order]
    src_order: tuple[int | None, ...] = ()
    tgt_order: tuple[int | None, ...] = ()


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
    tensors = _permuted(checked(layout.tensors), src, tgt)
    chosen, source = _settle(layout, settings, read or {})
    config = _config(layout, src, tgt, chosen, max_len)
    model = build(config, tensors)
    checked_on = 0
    if examples:
        pairs = [_example_ids(ex, src, tgt) for ex in examples]
        if not reproduces(model, pairs):
            raise CheckpointError(_mismatch(layout, src, tgt, tensors, chosen, source, pairs, max_len))
        checked_on = len(pairs)
    stored = layout.max_len is not None  # a positional table in the state_dict shows the kind
    report = ImportReport(layout.family, {**chosen, "positional": layout.positional},
                          {**source, "positional": "read from the weights" if stored else "assumed"}, checked_on,
                          {"source": dict(src.specials), "target": dict(tgt.specials)})
    bundle = Bundle(config, src.codec, tgt.codec, src_lang.strip() or "src", tgt_lang.strip() or "tgt",
                    {"data": f"imported {layout.family} state_dict", "name": name, "import": report.lines()})
    return Imported(model, bundle, report)


def import_file(path: str | Path, src_vocab: VocabSource, tgt_vocab: VocabSource | None = None, **kw: Any) -> Imported:
    """Import a .pt/.pth state_dict file (loaded without running code)."""
    path = Path(path)
    try:
        refused = over_budget(2 * path.stat().st_size, f"reading {path.name}")  # its bytes, then its tensors
        if refused:
            raise CheckpointError(refused)
        data = path.read_bytes()
    except OSError as err:
        raise CheckpointError(f"cannot read {path}: {err.strerror or err}") from None
    return import_weights(read_state_dict(data, path.name), src_vocab, tgt_vocab, **kw)


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


# --- vocabularies and rows --------------------------------------------------------------

def _vocabulary(value: VocabSource, specials: Specials | None, what: str) -> Vocabulary:
    return value if isinstance(value, Vocabulary) else load_vocabulary(value, specials=specials, what=what)


def _vocabularies(layout: Layout, src_vocab: VocabSource, tgt_vocab: VocabSource | None,
                  specials: Specials | None, tgt_specials: Specials | None) -> tuple[Vocabulary, Vocabulary]:
    src = _vocabulary(src_vocab, specials, "source vocabulary")
    tgt = src if tgt_vocab is None else _vocabulary(tgt_vocab, tgt_specials or specials, "target vocabulary")
    if tgt.size != layout.tgt_rows:
        which = "target vocabulary" if tgt_vocab is not None else "vocabulary (no target vocabulary was given)"
        raise CheckpointError(f"the output layer has {layout.tgt_rows:,} rows but your {which} has {tgt.size:,} tokens: "
                              "upload the target vocabulary the model was trained with")
    if src.size != layout.src_rows:
        raise CheckpointError(f"the source embedding has {layout.src_rows:,} rows but your source vocabulary has "
                              f"{src.size:,} tokens: upload the source vocabulary the model was trained with")
    if layout.share_embeddings and src.order != tgt.order:
        raise CheckpointError("the model shares one embedding between source and target, but the two vocabularies "
                              "order their special tokens differently: give one joint vocabulary")
    return src, tgt


def _permuted(tensors: dict[str, Tensor], src: Vocabulary, tgt: Vocabulary) -> dict[str, Tensor]:
    """The tensors with vocabulary rows in attnscope's order (specials at 0-3)."""
    s_order, t_order = torch.tensor(src.order), torch.tensor(tgt.order)
    out = dict(tensors)
    out["src_embed.weight"] = out["src_embed.weight"][s_order]
    for key in ("tgt_embed.weight", "generator.weight", "generator.bias"):
        out[key] = out[key][t_order]
    return out


# --- settings ---------------------------------------------------------------------------

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


def _config(layout: Layout, src: Vocabulary, tgt: Vocabulary, s: dict[str, Any], max_len: int | None) -> ModelConfig:
    if layout.positional == "learned":
        length = layout.max_len or 256
    else:
        length = max_len or min(layout.max_len or 256, 1024)
    try:
        return ModelConfig(src_vocab_size=src.size, tgt_vocab_size=tgt.size, d_model=layout.d_model,
                           n_heads=int(s["n_heads"]), n_encoder_layers=layout.n_encoder_layers,
                           n_decoder_layers=layout.n_decoder_layers, d_ff=layout.d_ff, dropout=0.0,
                           attention_dropout=0.0, max_len=length, positional=layout.positional,
                           norm="pre" if s["norm_first"] else "post", tie_embeddings=layout.tie_embeddings,
                           share_embeddings=layout.share_embeddings, final_norm=layout.final_norm,
                           layer_norm=layout.implied.get("layer_norm", "torch"), norm_eps=float(s["norm_eps"]),
                           activation=s["activation"], embed_scale=bool(s["embed_scale"]),
                           source_framing=s["source_framing"])
    except (ConfigError, TypeError, ValueError) as err:
        raise CheckpointError(f"these weights and settings do not make a valid model: {err}") from None


def floating(tensor: Tensor, name: str) -> Tensor:
    """`tensor` as float32, refusing integer, boolean and complex weights (they are not a float model's weights)."""
    if not tensor.is_floating_point():
        raise CheckpointError(f"the weights {name} are {str(tensor.dtype).removeprefix('torch.')}, not floating point: "
                              "these are not a trained model's weights (quantized models are not imported; save the "
                              "float model)")
    return tensor.float()


def checked(tensors: dict[str, Tensor]) -> dict[str, Tensor]:
    """Every tensor as float32, refusing any that is not floating point or holds NaN or infinity (a checkpoint
    `load` would refuse, so the import stops here instead of writing one)."""
    out = {k: floating(v, k) for k, v in tensors.items()}
    for key, tensor in out.items():
        bad = int(tensor.numel() - torch.isfinite(tensor).sum())
        if bad:
            raise CheckpointError(f"the weights {key} hold {bad:,} NaN or infinite values: the model diverged or the "
                                  "file is damaged; import a checkpoint from before that happened")
    return out


def build(config: ModelConfig, tensors: dict[str, Tensor]) -> Transformer:
    """The model of `config` around `tensors` (shared, not copied: trying other settings costs one construction).

    Built on the CPU, not the meta device: the meta device's first use imports torch._dynamo (seconds).
    """
    refused = over_budget(config.element_count() * 4, f"a model of {config.element_count():,} float32 numbers")
    if refused:
        raise CheckpointError(refused)
    model = Transformer(config)
    wanted = model.state_dict()
    found = {k: tuple(v.shape) for k, v in tensors.items() if k in wanted}
    check_shapes(found, {k: tuple(v.shape) for k, v in wanted.items()}, "the imported weights")
    model.load_state_dict({k: tensors[k] for k in wanted}, assign=True)
    if config.tie_embeddings:
        model.generator.weight = model.tgt_embed.weight
    if config.share_embeddings:
        model.src_embed = model.tgt_embed
    return model.eval()


# --- checking against the user's outputs ------------------------------------------------

def _example_ids(example: Example, src: Vocabulary, tgt: Vocabulary) -> tuple[list[int], list[int], bool]:
    """Source ids without framing, the output's ids in attnscope's numbering (no specials), and whether the
    output is complete (text, or ids ending with <eos>) rather than cut at a length limit."""
    try:
        text, output = example
    except (TypeError, ValueError):
        raise CheckpointError(f"each example is (source sentence, your model's output), got {example!r}") from None
    if not isinstance(text, str) or not text.strip():
        raise CheckpointError(f"an example's source must be a sentence, got {text!r}")
    if isinstance(output, str):
        ids, complete = tgt.codec.encode(output), True
    else:
        try:
            ids = tgt.from_user([int(i) for i in output])
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(f"the output ids {list(output)[:10]} are not ids of your target vocabulary "
                                  f"(0-{tgt.size - 1})") from None
        complete = bool(ids) and ids[-1] == EOS_ID
    return src.codec.encode(text), [i for i in ids if i not in (PAD_ID, BOS_ID, EOS_ID)], complete


@torch.no_grad()
def reproduces(model: Transformer, pairs: Iterable[tuple[list[int], list[int], bool]]) -> bool:
    """Whether greedy decoding gives exactly each output, then <eos> if it is complete (checked by teacher forcing)."""
    for src_ids, out_ids, complete in pairs:
        src = torch.tensor([model.config.frame_source(src_ids)])
        expected = [*out_ids, EOS_ID] if complete else out_ids
        tgt_in = torch.tensor([[BOS_ID, *expected[:-1]]])
        if not expected or src.shape[1] > model.config.max_len or tgt_in.shape[1] > model.config.max_len:
            continue
        if model(src, tgt_in)[0].argmax(-1).tolist() != expected:
            return False
    return True


def _candidates(d_model: int, chosen: dict[str, Any], source: dict[str, str]) -> list[dict[str, Any]]:
    """Other combinations of the settings not read from the model, fewest changes first."""
    options = {"n_heads": [h for h in range(1, min(d_model, 64) + 1) if d_model % h == 0],
               "norm_first": [False, True], "activation": ["relu", "gelu"], "embed_scale": [True, False],
               "source_framing": ["bos-eos", "eos"], "norm_eps": [chosen["norm_eps"]]}
    fixed = ("read from the model", "the family's code")
    free = {k: [chosen[k]] if source[k] in fixed else options[k] for k in HIDDEN}
    found = [dict(zip(HIDDEN, values)) for values in itertools.product(*(free[k] for k in HIDDEN))]

    def changes(candidate: dict[str, Any]) -> int:
        return sum(candidate[k] != chosen[k] for k in HIDDEN)

    return sorted((c for c in found if changes(c)), key=changes)


def _mismatch(layout: Layout, src: Vocabulary, tgt: Vocabulary, tensors: dict[str, Tensor], chosen: dict[str, Any],
              source: dict[str, str], pairs: list[tuple[list[int], list[int], bool]], max_len: int | None) -> str:
    """Name the settings that reproduce the user's outputs, or say that none do."""
    for candidate in _candidates(layout.d_model, chosen, source):
        try:
            config = _config(layout, src, tgt, candidate, max_len)
        except CheckpointError:
            continue
        if reproduces(build(config, tensors), pairs):
            changed = ", ".join(f"{k}={candidate[k]} (not {chosen[k]})" for k in HIDDEN if candidate[k] != chosen[k])
            return (f"with these settings the imported model does not reproduce your model's outputs; with {changed} "
                    "it reproduces all of them: import again with those settings")
    return ("the imported model does not reproduce your model's outputs with any heads, norm placement, activation, "
            "embedding scale or source framing: check that the vocabularies are the files the model was trained with "
            "and that each output is your model's greedy translation of its source")

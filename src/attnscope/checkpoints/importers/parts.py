"""What every import route shares: the tensors' checks, the model built around them, the vocabulary rows in the
model's order, and the report and result of an import (assemble.py puts them together for every family)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from attnscope.checkpoints.checkpoint import Bundle, CheckpointError, assemble, check_shapes
from attnscope.checkpoints.finite import all_finite
from attnscope.checkpoints.importers.vocab_plan import VocabPlan
from attnscope.model.config import ModelConfig
from attnscope.model.parameters import OUTPUT, OUTPUT_BIAS, SRC_EMBED, TGT_EMBED, expected_shapes
from attnscope.model.transformer import Transformer

# origins that need no check
KNOWN = ("read from the model", "read from the weights", "the family's code", "config.json", "the checkpoint's settings")


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
    # for each of our ids, the original model's id: the identity unless a source side's specials moved to the
    # target's ids (compare logits as ours vs theirs[..., order])
    src_order: tuple[int, ...] = ()
    tgt_order: tuple[int, ...] = ()


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
        if not all_finite(tensor):
            bad = int(tensor.numel() - torch.isfinite(tensor).sum())
            raise CheckpointError(f"the weights {key} hold {bad:,} NaN or infinite values: the model diverged or the "
                                  "file is damaged; import a checkpoint from before that happened")
    return out


def build(config: ModelConfig, tensors: dict[str, Tensor]) -> Transformer:
    """The model of `config` around `tensors` (shared, not copied: trying other settings costs one construction).

    The model's own initialisation is skipped and a large one is built on the meta device (checkpoint.assemble), so
    the model never exists twice: the tensors read from the file are its weights.
    """
    wanted = expected_shapes(config)
    check_shapes({k: tuple(v.shape) for k, v in tensors.items() if k in wanted}, wanted, "the imported weights")
    model = assemble(config, {k: v for k, v in tensors.items() if k in wanted})
    if config.share_embeddings:
        model.src_embed = model.tgt_embed
    return model.eval()


def vocab_tensors(enc: Tensor, dec: Tensor, head: Tensor, bias: Tensor | None, src: VocabPlan,
                  tgt: VocabPlan) -> tuple[dict[str, Tensor], bool, bool]:
    """Token embeddings, output layer and its bias in our vocabulary order (the original's unless a plan moves rows), and
    whether source and target share one table and the output layer is the target table (tied)."""
    bias = torch.zeros(head.shape[0]) if bias is None else floating(bias, "of the output bias").reshape(-1)
    enc, dec, head = (floating(t, f"of the {what}") for t, what in ((enc, "source embedding"), (dec, "target embedding"),
                                                                    (head, "output layer")))
    out = {SRC_EMBED: src.rows(enc), TGT_EMBED: tgt.rows(dec), OUTPUT: tgt.rows(head),
           OUTPUT_BIAS: tgt.rows(bias.unsqueeze(1))[:, 0]}
    share = enc.shape == dec.shape and src.order == tgt.order and (enc is dec or bool(torch.equal(enc, dec)))
    tied = head is dec or (head.shape == dec.shape and bool(torch.equal(head, dec)))
    return out, share, tied

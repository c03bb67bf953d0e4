"""A state_dict import checked against the user's own outputs: greedy decoding must give each output exactly,
and when it does not, other combinations of the settings a state_dict cannot show are tried, fewest changes
first, so the refusal names the settings that do reproduce them."""
from __future__ import annotations

import itertools
from typing import Any, Callable, Iterable, Sequence

import torch
from torch import Tensor

from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.importers.parts import build
from attnscope.checkpoints.importers.vocab_files import Vocabulary
from attnscope.model.config import ConfigError, ModelConfig
from attnscope.model.transformer import Transformer

HIDDEN = ("n_heads", "norm_first", "activation", "norm_eps", "embed_scale", "source_framing")
Example = tuple[str, "str | Sequence[int]"]  # a source sentence and the user's model's output (text or its ids)


def example_ids(example: Example, src: Vocabulary, tgt: Vocabulary, config: ModelConfig) -> tuple[list[int], list[int], bool]:
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
            ids = [tgt.plan.ours(int(i)) for i in output]
        except (CheckpointError, TypeError, ValueError):
            raise CheckpointError(f"the output ids {list(output)[:10]} are not ids of your target vocabulary "
                                  f"(0-{tgt.size - 1})") from None
        complete = bool(ids) and ids[-1] == config.eos_id
    specials = (config.pad_id, config.bos_id, config.eos_id)
    return src.codec.encode(text), [i for i in ids if i not in specials], complete


@torch.no_grad()
def reproduces(model: Transformer, pairs: Iterable[tuple[list[int], list[int], bool]]) -> bool:
    """Whether greedy decoding gives exactly each output, then <eos> if it is complete (checked by teacher forcing)."""
    for src_ids, out_ids, complete in pairs:
        src = torch.tensor([model.config.frame_source(src_ids)])
        expected = [*out_ids, model.config.eos_id] if complete else out_ids
        tgt_in = torch.tensor([[model.config.bos_id, *expected[:-1]]])
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


def mismatch(d_model: int, config: Callable[[dict[str, Any]], ModelConfig], tensors: dict[str, Tensor],
             chosen: dict[str, Any], source: dict[str, str], pairs: list[tuple[list[int], list[int], bool]]) -> str:
    """Name the settings that reproduce the user's outputs (`config` makes the model's config of a candidate),
    or say that none do."""
    for candidate in _candidates(d_model, chosen, source):
        try:
            model = build(config(candidate), tensors)
        except (CheckpointError, ConfigError):
            continue
        if reproduces(model, pairs):
            changed = ", ".join(f"{k}={candidate[k]} (not {chosen[k]})" for k in HIDDEN if candidate[k] != chosen[k])
            return (f"with these settings the imported model does not reproduce your model's outputs; with {changed} "
                    "it reproduces all of them: import again with those settings")
    return ("the imported model does not reproduce your model's outputs with any heads, norm placement, activation, "
            "embedding scale or source framing: check that the vocabularies are the files the model was trained with "
            "and that each output is your model's greedy translation of its source")

"""`python -m attnscope train --out DIR ...`: train (or resume) an encoder-decoder Transformer.

Every TrainConfig field is a flag (`max_tokens` -> `--max-tokens`; a few keep shorter historical spellings,
given in the field's metadata), so a new setting needs one line in training/config.py and nothing here.
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import types
import typing
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from attnscope.training.config import TrainConfig


def model_override(item: str) -> tuple[str, Any]:
    """`FIELD=VALUE` of --set: numbers and true/false as JSON, anything else as text."""
    key, _, value = item.partition("=")
    return key, json.loads(value) if value[:1].isdigit() or value in ("true", "false") else value


def _value_type(hint: Any) -> type:
    """int for `int | None`, and so on: the one non-None type of a field."""
    kinds = [t for t in typing.get_args(hint) if t is not type(None)] if isinstance(hint, types.UnionType) else [hint]
    return typing.get_origin(kinds[0]) or kinds[0]


def parser() -> argparse.ArgumentParser:
    """`python -m attnscope train` flags, one per TrainConfig field; unset flags keep the field's default."""
    from attnscope.training.config import TrainConfig

    p = argparse.ArgumentParser(prog="python -m attnscope train", argument_default=argparse.SUPPRESS,
                                description="Train (or resume) an encoder-decoder Transformer.")
    hints = typing.get_type_hints(TrainConfig)
    for f in dataclasses.fields(TrainConfig):
        meta = dict(f.metadata)
        flag = meta.pop("flag", "--" + f.name.replace("_", "-"))
        kind = _value_type(hints[f.name])
        if kind is bool:
            p.add_argument(flag, dest=f.name, action="store_true", **meta)
        elif kind is dict:
            p.add_argument(flag, dest=f.name, action="append", type=model_override, metavar="FIELD=VALUE", **meta)
        else:
            p.add_argument(flag, dest=f.name, type=kind, metavar=flag[2:].upper().replace("-", "_"), **meta)
    return p


def parse_args(argv: Sequence[str]) -> TrainConfig:
    """The TrainConfig the command line asks for; a bad value exits with one line saying what to change."""
    from attnscope.training.config import TrainConfig

    p = parser()
    given = vars(p.parse_args(argv))
    if "model" in given:
        given["model"] = dict(given["model"])
    try:
        return TrainConfig(**given)
    except ValueError as err:
        p.error(str(err))


def main(argv: Sequence[str]) -> int:
    """Train as the flags say; under torchrun every process runs this and leaves its process group at the end."""
    import torch.distributed as dist

    from attnscope.training.loop import train

    train(parse_args(argv))
    if dist.is_initialized():
        # The finished trainer sits in reference cycles, and through its DDP wrapper it held the process group: collect
        # it now, so that gloo's worker threads end here, with the interpreter alive, and not during its shutdown
        # (a process group destroyed there aborts the process: SIGABRT, "terminate called without an active exception").
        gc.collect()
        dist.barrier()  # no rank closes its connections while another still reads the last broadcast (gloo aborts)
        dist.destroy_process_group()
    return 0

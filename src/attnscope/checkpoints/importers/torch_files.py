"""PyTorch checkpoint files read without running anything: `torch.load(weights_only=True)`, and one sentence
saying what a file holds when it is not a state_dict (a safetensors file, a pickled model, a framework's
checkpoint, something else)."""
from __future__ import annotations

import io
import pickle
import re
import zipfile
from pathlib import Path

import torch
from torch import Tensor

from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.model.budget import over_budget

PICKLED_MODULE = ("{name} holds a whole pickled model, which attnscope never unpickles because that would run its code: "
                  "save the weights with torch.save(model.state_dict(), '{stem}.pt') and import that, or pass the live "
                  "model to attnscope.import_model(model, ...) in Python.")


def is_torch_file(data: bytes) -> bool:
    """Whether `data` starts like something torch.save wrote: a zip archive (since torch 1.6) or a pickle
    (the legacy format); anything else is not a PyTorch checkpoint, whatever its name says."""
    return data[:4] == b"PK\x03\x04" or (data[:1] == b"\x80" and data[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"))


HEAD = 16  # first bytes that tell a file's format

NOT_TORCH = ("{name} is not a PyTorch checkpoint (torch.save writes a zip archive; this file is neither that nor a "
             "pickle): pick the file you saved with torch.save(model.state_dict(), ...)")


def read_state_dict(data: bytes | Path, name: str) -> dict[str, Tensor]:
    """Tensors of a .pt/.pth file (its bytes, or its path), loaded without executing code; nested dicts are unwrapped.
    A file on disk in torch.save's zip format is memory-mapped: its tensors are read when first used, so a big
    checkpoint is never held twice (its bytes, then its tensors) and whether its model fits can be decided from
    the tensors' sizes before they are read."""
    if isinstance(data, Path):
        with open(data, "rb") as f:
            head = f.read(HEAD)
        if head[:4] != b"PK\x03\x04":  # the legacy pickle format cannot be mapped: read it whole
            data = data.read_bytes()
    else:
        head = data[:HEAD]
    if _is_safetensors(head, len(data) if isinstance(data, bytes) else data.stat().st_size):
        raise CheckpointError(f"{name} is a safetensors file, not a PyTorch state_dict: a Hugging Face model imports as "
                              "its whole folder (or a zip of it, or its hub name); an attnscope checkpoint opens as it is")
    if not is_torch_file(head):
        raise CheckpointError(NOT_TORCH.format(name=name))
    try:
        if isinstance(data, Path):
            obj = torch.load(data, map_location="cpu", weights_only=True, mmap=True)
        else:
            obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        found = re.search(r"GLOBAL ([\w.]+)", str(err))
        if found and found[1] == "argparse.Namespace":
            raise CheckpointError(f"{name} keeps its settings in an argparse.Namespace, as fairseq and OpenNMT-py "
                                  "checkpoints do, but is neither of theirs: import it with python -m attnscope import "
                                  "(it reads fairseq's args/cfg with model, and OpenNMT-py's model/generator/vocab/opt), "
                                  "or save model.state_dict() alone") from None
        if found and pickled_model(found[1]):
            stem = name.rsplit(".", 1)[0] or "model"
            raise CheckpointError(PICKLED_MODULE.format(name=name, stem=stem)) from None
        held = f"holds pickled {found[1]} objects" if found else "needs code to unpickle"
        raise CheckpointError(f"{name} is not a PyTorch weights file that can be loaded safely: it {held}, which "
                              "attnscope never unpickles because that would run their code; save model.state_dict() "
                              "alone (of a fairseq or OpenNMT-py checkpoint, keep only its model and settings) and "
                              "import that") from None
    except Exception as err:  # RuntimeError, EOFError, zip errors...
        first = str(err).strip().splitlines()[0][:160] if str(err).strip() else type(err).__name__
        raise CheckpointError(f"{name} is not a PyTorch weights file that can be loaded safely ({first})") from None
    for key in ("state_dict", "model_state_dict", "model"):
        if isinstance(obj, dict) and isinstance(obj.get(key), dict):
            obj = obj[key]
    if not isinstance(obj, dict) or not obj or not all(isinstance(v, Tensor) for v in obj.values()):
        raise CheckpointError(f"{name} does not hold a state_dict (a mapping of names to tensors)")
    return {str(k): v for k, v in obj.items()}


def read_torch_file(path: Path) -> dict[str, Tensor]:
    """A .pt/.pth/.bin state_dict from disk: memory-mapped when in torch.save's zip format (read_state_dict); a
    legacy pickle is read whole, within the memory budget (its bytes, then its tensors)."""
    try:
        with open(path, "rb") as f:
            zipped = zipfile.is_zipfile(f)
        refused = None if zipped else over_budget(2 * path.stat().st_size, f"reading {path.name}")
        if refused:
            raise CheckpointError(refused)
        return read_state_dict(path, path.name)
    except OSError as err:
        raise CheckpointError(f"cannot read {path}: {err.strerror or err}") from None


def pickled_model(global_name: str) -> bool:
    """Whether a pickled class (as the unpickler names it) looks like a whole model rather than a value beside it."""
    return ".nn.modules." in global_name or global_name.rsplit(".", 1)[-1][:1].isupper()


def _is_safetensors(head: bytes, size: int) -> bool:
    """A safetensors file (its first bytes and its size): an 8-byte little-endian header length, then a JSON header."""
    return size > 9 and head[8:9] == b"{" and int.from_bytes(head[:8], "little") < size

"""A Hugging Face model folder: where it is (a folder, a zip of one, or a hub name) and what it holds.

Weights are read without running code: `model.safetensors` (also sharded), or `pytorch_model.bin`
through `torch.load(weights_only=True)`. A hub name (`Helsinki-NLP/opus-mt-en-de`) is read from the
local Hugging Face cache; it is downloaded only when it is not there and the machine is online
(`HF_HUB_OFFLINE=1` forbids it).
"""
from __future__ import annotations

import io
import json
import os
import re
import shutil
import tempfile
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import torch
from torch import Tensor

from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.importers.torch_files import read_torch_file
from attnscope.checkpoints.tensor_stream import read_header, read_tensors
from attnscope.model import untrusted
from attnscope.model.budget import model_refusal

HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
HUB_NAME_MAX = 96  # characters of a repository name on the hub
WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
FOREIGN = ("tf_model.h5", "flax_model.msgpack")
MAX_ZIP_BYTES = 8 * 2**30  # a zipped folder may unpack to at most this much


@dataclass(frozen=True)
class HFFolder:
    """A model folder's settings; its weights are read on demand (`weights()`)."""

    path: Path
    config: dict[str, Any]
    generation: dict[str, Any] = field(default_factory=dict)  # generation_config.json (empty when absent)

    @property
    def model_type(self) -> str:
        return str(self.config.get("model_type", ""))

    def setting(self, name: str) -> Any:
        """A generation setting as transformers' generate() sees it: generation_config.json first, then config.json."""
        return self.generation[name] if name in self.generation else self.config.get(name)

    def weights(self) -> dict[str, Tensor]:
        """Every tensor of the folder's weights, loaded without executing code."""
        return read_weights(self.path)


def is_hub_name(text: str) -> bool:
    """Whether `text` is a name the hub accepts (owner/name): its characters, no '..' or '--', no part that starts or
    ends with '.' or '-', at most 96 characters a part."""
    parts = text.split("/")
    return bool(HUB_NAME.match(text)) and ".." not in text and "--" not in text and all(
        p and len(p) <= HUB_NAME_MAX and p[0] not in ".-" and p[-1] not in ".-" for p in parts)


def is_hf_folder(path: Path) -> bool:
    return path.is_dir() and (path / "config.json").is_file()


def open_folder(path: Path) -> HFFolder:
    """Read config.json (and generation_config.json) of a Hugging Face model folder."""
    config = _json(path / "config.json")
    generation = _json(path / "generation_config.json") if (path / "generation_config.json").is_file() else {}
    return HFFolder(path, config, generation)


def _json(path: Path) -> dict[str, Any]:
    try:
        data = untrusted.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise CheckpointError(f"cannot read {path}: {err.strerror or err}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        msg, line = (err.msg, err.lineno) if isinstance(err, json.JSONDecodeError) else ("not UTF-8", 1)
        raise CheckpointError(f"{path.name} is not valid JSON ({msg} at line {line})") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path.name} must hold a JSON object")
    return data


def read_weights(folder: Path) -> dict[str, Tensor]:
    """The folder's tensors: safetensors first (one file or shards; floating point read as float32), else
    pytorch_model.bin (weights_only). Whether the model fits the available memory is decided from the sizes in the
    files' headers (safetensors) or their memory-mapped tensors (torch.save's zip format) before a weight is read."""
    for name in WEIGHTS:
        path = folder / name
        if not path.is_file():
            continue
        files = _shards(path) if name.endswith(".index.json") else [path]
        if name.startswith("model.safetensors"):
            _refuse(sum(_elements(f) for f in files), folder.name)
            state: dict[str, Tensor] = {}
            for file in files:
                state.update(_safetensors(file))
            return state
        state = {}
        for file in files:
            state.update(read_torch_file(file))
        _refuse(sum(t.numel() for t in state.values()), folder.name)
        return state
    present = sorted(p.name for p in folder.iterdir())
    if any(name in present for name in FOREIGN):
        raise CheckpointError(f"{folder.name} has TensorFlow/Flax weights only: save PyTorch weights first with transformers "
                              "(AutoModelForSeq2SeqLM.from_pretrained(folder, from_tf=True).save_pretrained(folder))")
    raise CheckpointError(f"{folder.name} has no model.safetensors or pytorch_model.bin (it holds {', '.join(present[:8])})")


def _refuse(elements: int, name: str) -> None:
    refused = model_refusal(elements, name)
    if refused:
        raise CheckpointError(refused)


def _shards(index: Path) -> list[Path]:
    weight_map = _json(index).get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise CheckpointError(f"{index.name} has no weight_map")
    files = [index.parent / str(name) for name in dict.fromkeys(weight_map.values())]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise CheckpointError(f"{index.name} lists {missing[0]}, which is not in the folder")
    return files


def _elements(path: Path) -> int:
    """Numbers a safetensors file holds, read from its header."""
    try:
        return sum(entry.elements for entry in read_header(path)[0].values())
    except (OSError, ValueError) as err:
        raise CheckpointError(f"{path.name} is not a readable safetensors file ({str(err)[:120]})") from None


def _safetensors(path: Path) -> dict[str, Tensor]:
    """Every tensor, floating point ones as float32 (the model's dtype) as each is read: no second copy."""
    try:
        return read_tensors(path, dtype=torch.float32)
    except (OSError, ValueError, RuntimeError) as err:
        raise CheckpointError(f"{path.name} is not a readable safetensors file ({str(err)[:120]})") from None


@contextmanager
def located(source: str | os.PathLike[str], *, cache_dir: str | os.PathLike[str] | None = None) -> Iterator[Path]:
    """The local folder of a path, a zip of a folder, or a hub name (the local cache first, then a download);
    a zip is unpacked into a temporary folder that is removed on leaving, whether the import worked or not."""
    path = Path(source).expanduser()
    if path.is_dir():
        yield _inner_folder(path, path.name)
    elif path.is_file() and zipfile.is_zipfile(path):
        with unzipped(path, path.name) as folder:
            yield folder
    elif path.exists() or not is_hub_name(str(source)):
        raise CheckpointError(f"{source} is neither a model folder (with config.json), a zip of one, nor a hub name "
                              "like Helsinki-NLP/opus-mt-en-de")
    else:
        yield from_hub(str(source), cache_dir)


def _inner_folder(path: Path, label: str) -> Path:
    """The folder itself, or its one sub-folder holding config.json (a zip of a folder unpacks into one); errors
    name the user's folder or zip (`label`), never a temporary folder."""
    if (path / "config.json").is_file():
        return path
    found = sorted({p.parent for p in path.rglob("config.json") if len(p.relative_to(path).parts) <= 3})
    if not found:
        nested = any(p.suffix.lower() == ".zip" for p in path.rglob("*") if len(p.relative_to(path).parts) <= 2)
        raise CheckpointError(f"{label} holds no config.json of a model"
                              + (" (a zip inside a zip is not opened: unzip the inner one)" if nested else ""))
    if len(found) > 1:
        raise CheckpointError(f"{label} holds several models ({', '.join(str(f.relative_to(path)) for f in found[:3])}): "
                              "give one folder")
    return found[0]


@contextmanager
def unzipped(data: bytes | Path, name: str) -> Iterator[Path]:
    """A zip of a model folder (its bytes, or its file, read as it is unpacked rather than held in memory) unpacked
    into a temporary folder that is removed on leaving; paths that leave it and archives that unpack to more than
    MAX_ZIP_BYTES or than the disk has free are refused before anything is written."""
    with tempfile.TemporaryDirectory(prefix="attnscope-import-") as tmp:
        target = Path(tmp) / (Path(name).stem or "model")  # files zipped without their folder take the zip's name
        target.mkdir()
        try:
            with zipfile.ZipFile(io.BytesIO(data) if isinstance(data, bytes) else data) as archive:
                _check_members(archive.infolist(), target, name)
                archive.extractall(target)
        except zipfile.BadZipFile:
            raise CheckpointError(f"{name} is not a readable zip file") from None
        except OSError as err:  # a full disk while unpacking
            raise CheckpointError(f"{name} could not be unpacked ({err.strerror or err})") from None
        yield _inner_folder(target, name)


def _check_members(members: list[zipfile.ZipInfo], target: Path, name: str) -> None:
    """Refuse an archive before unpacking: too large unpacked (as its headers declare, which zipfile holds it to),
    or with a path outside its folder."""
    if not members:
        raise CheckpointError(f"{name} is an empty zip: zip the model's folder")
    unpacked = sum(m.file_size for m in members)
    free = shutil.disk_usage(target).free
    if unpacked > min(MAX_ZIP_BYTES, free):
        limit = "the limit" if unpacked > MAX_ZIP_BYTES else "the free space in the temporary folder"
        raise CheckpointError(f"{name} unpacks to {unpacked / 2**20:,.0f} MB, more than {limit} "
                              f"({min(MAX_ZIP_BYTES, free) / 2**20:,.0f} MB): nothing was unpacked")
    for member in members:
        dest = (target / member.filename).resolve()
        if not dest.is_relative_to(target.resolve()):
            raise CheckpointError(f"{name} has a file outside its folder ({member.filename})")


def from_hub(name: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """A hub model's folder from the local Hugging Face cache, downloaded when absent and the machine is online."""
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:
        raise CheckpointError(f"{name} looks like a Hugging Face hub name, but reading the hub cache needs huggingface_hub: "
                              "pip install -e \".[hf]\" (the tested versions)") from None
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
    patterns = ["*.json", "*.safetensors", "*.bin", "*.spm", "*.model", "*.txt"]
    try:
        return Path(snapshot_download(name, cache_dir=cache_dir, local_files_only=True, allow_patterns=patterns))
    except LocalEntryNotFoundError:
        if offline:
            raise CheckpointError(f"{name} is not in the local Hugging Face cache and HF_HUB_OFFLINE is set: download it "
                                  "once online, or give its folder") from None
    try:
        return Path(snapshot_download(name, cache_dir=cache_dir, allow_patterns=patterns))
    except Exception as err:  # network errors, unknown repositories, gated models...
        first = str(err).strip().splitlines()[0][:160] if str(err).strip() else type(err).__name__
        raise CheckpointError(f"{name} could not be downloaded from the Hugging Face hub ({first}): check the name, "
                              "or give the model's folder") from None

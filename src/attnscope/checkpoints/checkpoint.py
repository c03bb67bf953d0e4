"""One-file checkpoints: weights in safetensors, everything needed to rebuild in its metadata.

Loading never executes code from the file, checks the config against the tensor shapes in
the header before allocating anything, and fails with one sentence naming what is wrong.
"""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import torch
from safetensors import SafetensorError, safe_open
from torch.overrides import TorchFunctionMode

from attnscope.checkpoints.finite import all_finite, first_not_finite, half_overflow
from attnscope.checkpoints.tensor_stream import read_tensors, stored, write_tensors
from attnscope.model import untrusted
from attnscope.model.budget import model_refusal
from attnscope.model.config import ConfigError, ModelConfig
from attnscope.model.parameters import column_major, expected_shapes
from attnscope.model.tokenization import TextCodec, TokenizerError
from attnscope.model.transformer import Transformer

FORMAT = "attnscope-checkpoint"
FORMAT_VERSION = "2"  # 2: the special tokens' ids are config fields (pad_id...); version 1 files hold the defaults
READABLE_VERSIONS = ("1", FORMAT_VERSION)
TASK_PREFIX_KEY = "task_prefix"  # metadata: Bundle.task_prefix (absent: none)


class CheckpointError(ValueError):
    """A file is not a usable attnscope checkpoint; the message says why in one sentence."""


@dataclass(frozen=True)
class Bundle:
    """Everything a checkpoint holds besides the weights."""

    config: ModelConfig
    src_codec: TextCodec
    tgt_codec: TextCodec
    src_lang: str
    tgt_lang: str
    summary: dict[str, Any] = field(default_factory=dict)  # data, steps, epochs, BLEU, date, ...
    task_prefix: str = ""  # text put before every source sentence, as one string with it ("translate English to
    #   German: ": a T5 trained on several tasks reads which one from it); "" for most models and older files

    def metadata(self) -> dict[str, str]:
        meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "config": self.config.to_json(),
                "src_tokenizer": self.src_codec.to_json(), "tgt_tokenizer": self.tgt_codec.to_json(),
                "src_lang": self.src_lang, "tgt_lang": self.tgt_lang,
                "summary": json.dumps(self.summary, sort_keys=True)}
        if self.task_prefix:
            meta[TASK_PREFIX_KEY] = self.task_prefix
        for side, codec in (("src", self.src_codec), ("tgt", self.tgt_codec)):
            if codec.id_map is not None:  # an imported tokenizer's ids on the model's (absent in older files)
                meta[f"{side}_id_map"] = codec.id_map.to_json()
        return meta


def unique_state_params(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """State entries (parameters themselves) with tied ones kept once, under their first name."""
    seen: set[int] = set()
    out = {}
    for name, tensor in model.state_dict(keep_vars=True).items():
        if id(tensor) not in seen:
            seen.add(id(tensor))
            out[name] = tensor
    return out


def unique_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Detached state dict with tied tensors stored once."""
    return {k: v.detach() for k, v in unique_state_params(model).items()}


def atomic_write(path: Path, write: Any) -> None:
    """Write via `write(tmp_path)` to a temp file beside `path`, then rename over it.

    A crash or a full disk mid-way never replaces a good file with a broken one, and the data is on the disk
    (fsync) before the file takes its name, so not even a power cut leaves a checkpoint whose weights were never
    written. The fsync is kept because it costs ~nothing: checkpoints are written with O_DIRECT (direct_io.py), and
    on the test machine the fsync of a 2.3 GB import took 0.01-0.04 s, as it did after the former buffered writes,
    which had spent their 13-16 s waiting for the page cache, not for the fsync.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


FINITE_KEY = "weights_finite"  # metadata: "true" when save() found every stored weight finite, so load() need not scan


def save(model: Transformer, bundle: Bundle, path: str | os.PathLike[str], *, half: bool = False,
         known_finite: bool = False) -> Path:
    """Write the model and its bundle to one `.safetensors` file (fp16 storage if `half`), with whether every
    stored weight is finite (checked here, where a checkpoint enters, so loading need not read them twice; not
    again when `known_finite`: an import has just checked every weight, and fp16 overflow is refused below).
    Weights fp16 would make infinite are refused before anything is written: load() would refuse the file.
    Tensors are converted and written one at a time (tensor_stream), so saving needs no second copy of the model."""
    path = Path(path)
    state = unique_state(model)
    overflow = half_overflow(state) if half else None
    if overflow:
        raise CheckpointError(overflow)
    cast = torch.float16 if half else None
    finite = known_finite or all(all_finite(stored(t, cast)) for t in state.values())
    metadata = bundle.metadata() | {FINITE_KEY: "true" if finite else "false"}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda tmp: write_tensors(tmp, state, metadata, cast))
    except OSError as err:
        raise CheckpointError(f"could not save checkpoint to {path}: {err.strerror or err}") from None
    return path


def read_bundle(path: str | os.PathLike[str]) -> tuple[Bundle, dict[str, tuple[int, ...]]]:
    """The bundle and tensor shapes from the file header, without reading the weights."""
    bundle, shapes, _ = _read_header(path)
    return bundle, shapes


def _read_header(path: str | os.PathLike[str]) -> tuple[Bundle, dict[str, tuple[int, ...]], dict[str, str]]:
    """The bundle, tensor shapes and raw metadata from the file header."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path} does not exist or is not a file")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
            shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    except (SafetensorError, OSError, ValueError) as err:
        raise CheckpointError(f"{path.name} is not a safetensors file ({str(err)[:120]})") from None
    if meta.get("format") != FORMAT:
        if any(k.startswith(("model.encoder.", "encoder.layers.", "lm_head.")) for k in shapes):
            raise CheckpointError(f"{path.name} holds a Hugging Face model's weights, not an attnscope checkpoint: import "
                                  "its whole folder (with config.json and the tokenizer files) or a zip of it, e.g. "
                                  "python -m attnscope import FOLDER --out model.safetensors")
        raise CheckpointError(f"{path.name} is a safetensors file but not an attnscope checkpoint "
                              "(its metadata has no 'format': 'attnscope-checkpoint')")
    if meta.get("format_version") not in READABLE_VERSIONS:
        raise CheckpointError(f"{path.name} has checkpoint format version {meta.get('format_version')!r}; "
                              f"this attnscope reads versions {' and '.join(READABLE_VERSIONS)}")
    return _bundle_from_metadata(meta, path.name), shapes, meta


# Codecs by tokenizer JSON, while anything uses them: a joint vocabulary serves both sides, and the app's
# checkpoint listing and the loaded model read the same file; each codec holds ~3 MB.
_CODECS: weakref.WeakValueDictionary[tuple[str, str | None], TextCodec] = weakref.WeakValueDictionary()


def _codec(text: str, id_map: str | None) -> TextCodec:
    """The codec of a tokenizer JSON (and an imported model's id map), shared while in use."""
    codec = _CODECS.get((text, id_map))
    if codec is None:
        codec = _CODECS[(text, id_map)] = TextCodec.from_json(text, id_map)
    return codec


def _bundle_from_metadata(meta: dict[str, str], name: str) -> Bundle:
    missing = [k for k in ("config", "src_tokenizer", "tgt_tokenizer", "src_lang", "tgt_lang") if k not in meta]
    if missing:
        raise CheckpointError(f"{name} lacks metadata fields: {', '.join(missing)}")
    try:
        config = ModelConfig.from_json(meta["config"])
        src = _codec(meta["src_tokenizer"], meta.get("src_id_map"))
        tgt = _codec(meta["tgt_tokenizer"], meta.get("tgt_id_map"))
        summary = untrusted.loads(meta.get("summary", "{}"))  # a file from anyone: nested JSON within a limit
    except (ConfigError, TokenizerError) as err:
        raise CheckpointError(f"{name}: {err}") from None
    except json.JSONDecodeError:
        raise CheckpointError(f"{name}: its training summary is not valid JSON") from None
    if not isinstance(summary, dict):
        raise CheckpointError(f"{name}: its training summary must be a JSON object")
    for side, codec, size in (("source", src, config.src_vocab_size), ("target", tgt, config.tgt_vocab_size)):
        if codec.vocab_size != size:
            raise CheckpointError(f"{name}: the {side} tokenizer has {codec.vocab_size} tokens "
                                  f"but the model expects {size}")
        wrong = {role: i for role, i in codec.specials.items() if getattr(config, f"{role}_id") != i}
        if wrong:
            raise CheckpointError(f"{name}: the {side} tokenizer has its special tokens at {wrong}, but the model's "
                                  f"config names {({role: getattr(config, f'{role}_id') for role in wrong})}")
    return Bundle(config, src, tgt, meta["src_lang"], meta["tgt_lang"], summary, meta.get(TASK_PREFIX_KEY, ""))


def _and_more(names: list[str]) -> str:
    return f" and {len(names) - 1} more" if len(names) > 1 else ""


def check_shapes(found: dict[str, tuple[int, ...]], expected: dict[str, tuple[int, ...]], name: str) -> None:
    missing = sorted(set(expected) - set(found))
    extra = sorted(set(found) - set(expected))
    if missing:
        raise CheckpointError(f"{name} is missing tensor {missing[0]}{_and_more(missing)}")
    if extra:
        raise CheckpointError(f"{name} has unexpected tensor {extra[0]}{_and_more(extra)}")
    for key, shape in expected.items():
        if found[key] != shape:
            raise CheckpointError(f"{name}: tensor {key} has shape {list(found[key])}, the config needs {list(shape)}")


def load(path: str | os.PathLike[str], device: str | torch.device = "cpu", *,
         check_finite: bool | None = None) -> tuple[Transformer, Bundle]:
    """Rebuild the model (fp32, eval mode) and its bundle from a checkpoint file; a model the machine's available
    memory cannot hold is refused from the header, before anything is read.

    The file's tensors are assigned to the model (`assemble`), not copied into a randomly initialised one.
    Weights are scanned for NaN/infinity only when the file does not record save()'s check, or when
    `check_finite` is True (a file that comes from outside, such as an upload); a file that records
    non-finite weights is refused without reading them.
    """
    path = Path(path)
    bundle, shapes, meta = _read_header(path)
    refused = model_refusal(bundle.config.element_count(), path.name)
    if refused:
        raise CheckpointError(refused)
    check_shapes(shapes, expected_shapes(bundle.config), path.name)
    recorded = meta.get(FINITE_KEY)
    if recorded == "false" and not check_finite:
        raise CheckpointError(f"{path.name}: its weights contain NaN or infinite values (recorded when it was saved)")
    try:  # each tensor read into its float32 place, one at a time: no second copy of the model, mapped or not
        tensors = read_tensors(path, shapes, torch.float32, column_major(bundle.config))
    except (OSError, ValueError, RuntimeError) as err:
        raise CheckpointError(f"{path.name}: its weights cannot be read ({str(err)[:120]})") from None
    if check_finite or recorded != "true":
        bad = first_not_finite(tensors)
        if bad:
            raise CheckpointError(f"{path.name}: tensor {bad} contains NaN or infinite values")
    return assemble(bundle.config, tensors).to(device).eval(), bundle


# From this many parameters up, a model is built on the meta device: torch's default initialisation (~15 ns a
# parameter on one busy core) would cost more than building it there (0.2 s of CPU for mBART-50's shape).
META_BUILD = 150_000_000


class _Unfilled(TorchFunctionMode):
    """The meta device without normal_: a meta tensor has no numbers to fill, but torch's meta kernel for normal_
    (nn.Embedding's initialisation) imports torch._dynamo first, 1.2-1.5 s of CPU (2.6-4.5 s wall at load 8)."""

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        if func in (torch.nn.init.normal_, torch.Tensor.normal_):
            return args[0] if args else (kwargs or {})["tensor"]
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def _on_meta() -> Iterator[None]:
    with torch.device("meta"), _Unfilled():
        yield


def assemble(config: ModelConfig, tensors: dict[str, torch.Tensor], on_meta: bool | None = None) -> Transformer:
    """The model of `config` holding `tensors` (unique_state's names and shapes), each assigned to its place.

    The model's own initialisation is skipped, and a large model (`on_meta` None: META_BUILD parameters or more)
    is built on the meta device, so no random weights are computed only to be overwritten (~10 s for NLLB-600M).
    """
    if on_meta is None:
        on_meta = sum(t.numel() for t in tensors.values()) >= META_BUILD
    with _on_meta() if on_meta else contextlib.nullcontext():
        model = Transformer(config, initialise=False)
    names = set(unique_state_params(model))  # a tied or shared tensor once, under its first name
    if set(tensors) != names:
        wrong = sorted(names ^ set(tensors))
        raise CheckpointError(f"the tensors do not fit the config: {wrong[0]}{_and_more(wrong)}")
    model.load_state_dict(tensors, strict=False, assign=True)
    if config.tie_embeddings:  # the tied output layer still holds the tensor that assign replaced
        model.generator.weight = model.tgt_embed.weight
    left = [n for n, t in (*model.named_parameters(), *model.named_buffers()) if t.is_meta]
    if left:
        raise CheckpointError(f"the checkpoint has no tensor for {left[0]}{_and_more(left)}")
    return model

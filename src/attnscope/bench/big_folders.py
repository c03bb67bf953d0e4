"""Hugging Face folders of random models of real shapes for the big-models bench (issue 44), built here: nothing is
downloaded.

A shape up to NLLB-200 1.3B's is built with Hugging Face's own class and saved by save_pretrained. A bigger one
(NLLB-200 3.3B's 13.4 GB) would be held whole while save_pretrained writes it, beside whatever else the machine runs;
`sharded_folder` instead builds the model on the meta device (shapes only) and writes random tensors one shard at a
time, as a sharded checkpoint is stored on the hub (model-0000k-of-0000n.safetensors and
model.safetensors.index.json), so at most one shard exists in memory.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import torch
from torch import Tensor

from attnscope.bench.hf_peer import train_sentencepiece
from attnscope.bench.hf_t5_peer import t5_small_folder
from attnscope.checkpoints.tensor_stream import write_tensors
from attnscope.training.data import sample_pairs

SHARD_BYTES = 4 * 2**30  # the largest shard written by sharded_folder (one tensor larger than this takes a shard alone)


def hf_folder(kind: str, shape: dict[str, Any], folder: Path) -> Path:
    """A save_pretrained folder of a random model of `shape` and its tokenizer; </s> is suppressed on both sides so
    that outputs run to their length."""
    if kind == "flan-t5":
        t5_small_folder(folder, shape)
        config = folder / "config.json"  # t5_small_folder writes t5-small's (tied); Flan-T5's says it is not
        config.write_text(json.dumps(json.loads(config.read_text()) | {"tie_word_embeddings": False}, indent=2))
        return folder
    cls, config = _tokenizer_and_config(kind, shape, folder)
    torch.manual_seed(0)
    model = cls(config).eval()
    model.generation_config.bad_words_ids = [[config.eos_token_id]]  # the import reads it as a suppressed token
    model.save_pretrained(str(folder))
    return folder


def sharded_folder(kind: str, shape: dict[str, Any], folder: Path, shard_bytes: int = SHARD_BYTES) -> Path:
    """A folder like hf_folder's (an mBART or NLLB `kind`) with its weights written shard by shard: random tensors
    initialised as Hugging Face initialises that class (linear and embedding weights normal with the config's
    init_std, the padding row zero, biases zero, layer-norm scales one)."""
    cls, config = _tokenizer_and_config(kind, shape, folder)
    with torch.device("meta"):
        model = cls(config)
    model.generation_config.bad_words_ids = [[config.eos_token_id]]
    config.save_pretrained(str(folder))
    model.generation_config.save_pretrained(str(folder))
    generator = torch.Generator().manual_seed(0)
    shards = list(_shards(_stored_shapes(model), shard_bytes))
    weight_map, total = {}, 0
    for k, names in enumerate(shards, 1):
        file = f"model-{k:05d}-of-{len(shards):05d}.safetensors"
        tensors = {name: _random(name, shape_, config, generator) for name, shape_ in names}
        write_tensors(folder / file, tensors, {"format": "pt"})
        total += sum(t.numel() * t.element_size() for t in tensors.values())
        weight_map |= dict.fromkeys(tensors, file)
        del tensors  # before the next shard is made, not after
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    return folder


def _tokenizer_and_config(kind: str, shape: dict[str, Any], folder: Path) -> tuple[type, Any]:
    """The model class and config of an mBART-50 or NLLB `kind`, its SentencePiece tokenizer (trained here on the
    embedded Multi30k sample) saved in `folder`."""
    import transformers

    pairs = sample_pairs("en", "de", "val")
    train_sentencepiece([s for pair in pairs for s in pair], folder / "sentencepiece.bpe.model", 2000)
    if kind == "mbart-50":
        tok = transformers.MBart50Tokenizer.from_pretrained(str(folder), src_lang="en_XX", tgt_lang="de_DE")
        config = transformers.MBartConfig(**shape, decoder_start_token_id=tok.eos_token_id,
                                          forced_bos_token_id=tok.convert_tokens_to_ids("de_DE"))
        cls = transformers.MBartForConditionalGeneration
    else:
        tok = transformers.NllbTokenizer.from_pretrained(str(folder), src_lang="eng_Latn", tgt_lang="deu_Latn",
                                                         additional_special_tokens=["eng_Latn", "deu_Latn"])
        config = transformers.M2M100Config(**shape, decoder_start_token_id=tok.eos_token_id,
                                           forced_bos_token_id=tok.convert_tokens_to_ids("deu_Latn"))
        cls = transformers.M2M100ForConditionalGeneration
    tok.save_pretrained(str(folder))
    return cls, config


def _stored_shapes(model: torch.nn.Module) -> list[tuple[str, tuple[int, ...]]]:
    """The tensors save_pretrained stores: the state dict less non-persistent buffers, a tied tensor under its first
    name only."""
    seen: set[int] = set()
    out = []
    for name, tensor in model.state_dict(keep_vars=True).items():
        if id(tensor) not in seen:
            seen.add(id(tensor))
            out.append((name, tuple(tensor.shape)))
    return out


def _shards(shapes: list[tuple[str, tuple[int, ...]]], limit: int) -> Iterator[list[tuple[str, tuple[int, ...]]]]:
    """The tensors in order, cut into shards of at most `limit` float32 bytes (a bigger tensor alone)."""
    shard: list[tuple[str, tuple[int, ...]]] = []
    size = 0
    for name, shape in shapes:
        nbytes = 4 * torch.Size(shape).numel()
        if shard and size + nbytes > limit:
            yield shard
            shard, size = [], 0
        shard.append((name, shape))
        size += nbytes
    if shard:
        yield shard


def _random(name: str, shape: tuple[int, ...], config: Any, generator: torch.Generator) -> Tensor:
    if name.endswith("bias"):
        return torch.zeros(shape)
    if len(shape) == 1:
        return torch.ones(shape)
    tensor = torch.empty(shape).normal_(0.0, config.init_std, generator=generator)
    if shape[0] == config.vocab_size and config.pad_token_id is not None:
        tensor[config.pad_token_id] = 0.0  # an embedding's padding row, as nn.Embedding(padding_idx=...) keeps it
    return tensor

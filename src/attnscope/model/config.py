"""Frozen, validated configuration dataclasses saved beside the weights."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Literal

Positional = Literal["sinusoidal", "learned"]
Norm = Literal["post", "pre"]
LayerNormKind = Literal["torch", "annotated"]
Activation = Literal["relu", "gelu"]
Framing = Literal["eos", "bos-eos"]

# Refuse configs whose parameter count would exhaust memory before anything is allocated.
MAX_PARAMETERS = 500_000_000


class ConfigError(ValueError):
    """A configuration field is missing, of the wrong type, or out of range."""


@dataclass(frozen=True)
class ModelConfig:
    """Sizes and variants of the encoder-decoder Transformer (Vaswani et al. 2017)."""

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 256
    n_heads: int = 8
    n_encoder_layers: int = 3
    n_decoder_layers: int = 3
    d_ff: int = 1024
    dropout: float = 0.1  # on embeddings, sublayer outputs and the FFN hidden layer
    attention_dropout: float = 0.1  # on attention weights, after the hook point
    max_len: int = 256  # longest sequence the positional encoding covers
    positional: Positional = "sinusoidal"
    norm: Norm = "post"  # "post" is the paper's; "pre" trains more stably when deep
    tie_embeddings: bool = True  # target embedding shares its matrix with the output layer
    share_embeddings: bool = False  # source and target embeddings are one matrix (joint vocabulary)
    final_norm: bool | None = None  # LayerNorm after each stack; None = only with pre-LN (nn.Transformer always has one)
    # Variants met in models trained elsewhere (checkpoints/importing.py); the defaults are attnscope's own.
    layer_norm: LayerNormKind = "torch"  # "annotated": unbiased std with eps added to the std (the Annotated Transformer)
    norm_eps: float = 1e-5  # LayerNorm epsilon (nn.LayerNorm's default; the Annotated Transformer uses 1e-6)
    activation: Activation = "relu"  # of the FFN hidden layer
    embed_scale: bool = True  # token embeddings are multiplied by sqrt(d_model) (section 3.4)
    source_framing: Framing = "eos"  # source ids are `x <eos>`, or `<bos> x <eos>` (the PyTorch tutorial's)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            expected = {"int": int, "float": (int, float), "bool": bool}.get(str(f.type))
            if expected is not None and (not isinstance(value, expected) or
                                         (expected is not bool and isinstance(value, bool))):
                raise ConfigError(f"config field {f.name} must be {f.type}, got {value!r}")
        for name in ("src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "d_ff", "max_len"):
            if getattr(self, name) < 1:
                raise ConfigError(f"config field {name} must be at least 1, got {getattr(self, name)}")
        for name in ("n_encoder_layers", "n_decoder_layers"):
            if not 1 <= getattr(self, name) <= 64:
                raise ConfigError(f"config field {name} must be between 1 and 64, got {getattr(self, name)}")
        if self.d_model % self.n_heads:
            raise ConfigError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        for name in ("dropout", "attention_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"config field {name} must be in [0, 1), got {getattr(self, name)}")
        if self.positional not in ("sinusoidal", "learned"):
            raise ConfigError(f"positional must be 'sinusoidal' or 'learned', got {self.positional!r}")
        if self.norm not in ("post", "pre"):
            raise ConfigError(f"norm must be 'post' or 'pre', got {self.norm!r}")
        for name, allowed in (("layer_norm", ("torch", "annotated")), ("activation", ("relu", "gelu")),
                              ("source_framing", ("eos", "bos-eos"))):
            if getattr(self, name) not in allowed:
                raise ConfigError(f"{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}")
        if not 0.0 < self.norm_eps < 1.0:
            raise ConfigError(f"config field norm_eps must be in (0, 1), got {self.norm_eps}")
        if self.final_norm is not None and not isinstance(self.final_norm, bool):
            raise ConfigError(f"config field final_norm must be true, false or null, got {self.final_norm!r}")
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ConfigError("share_embeddings needs one joint vocabulary, but the sizes are "
                              f"{self.src_vocab_size} and {self.tgt_vocab_size}")
        if self.parameter_count() > MAX_PARAMETERS:
            raise ConfigError(f"this config would have {self.parameter_count():,} parameters, "
                              f"more than the limit of {MAX_PARAMETERS:,}")

    @property
    def has_final_norm(self) -> bool:
        return self.norm == "pre" if self.final_norm is None else self.final_norm

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def parameter_count(self) -> int:
        """Number of parameters the model will have, computed without allocating it."""
        d, f = self.d_model, self.d_ff
        attention = 4 * (d * d + d)
        ffn = d * f + f + f * d + d
        norm = 2 * d
        encoder = self.n_encoder_layers * (attention + ffn + 2 * norm)
        decoder = self.n_decoder_layers * (2 * attention + ffn + 3 * norm)
        finals = 2 * norm if self.has_final_norm else 0
        src_emb = 0 if self.share_embeddings else self.src_vocab_size * d
        tgt_emb = self.tgt_vocab_size * d
        output = self.tgt_vocab_size + (0 if self.tie_embeddings else self.tgt_vocab_size * d)
        positions = self.max_len * d if self.positional == "learned" else 0
        return encoder + decoder + finals + src_emb + tgt_emb + output + positions

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ModelConfig":
        """Build from untrusted data (e.g. a file's metadata) with a clear error."""
        if not isinstance(data, dict):
            raise ConfigError(f"model config must be a JSON object, got {type(data).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ConfigError(f"model config has unknown fields: {', '.join(unknown)}")
        missing = sorted(n for n in ("src_vocab_size", "tgt_vocab_size") if n not in data)
        if missing:
            raise ConfigError(f"model config lacks required fields: {', '.join(missing)}")
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> "ModelConfig":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ConfigError(f"model config is not valid JSON ({err.msg})") from None
        return cls.from_dict(data)


# Ids of the special tokens every attnscope tokenizer reserves, in this order.
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")


# Model sizes offered by the CLI and the Train page; every field can still be overridden.
PRESETS: dict[str, dict[str, Any]] = {
    "toy": dict(d_model=64, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=128, dropout=0.0,
                attention_dropout=0.0, max_len=64),
    "small": dict(d_model=256, n_heads=8, n_encoder_layers=3, n_decoder_layers=3, d_ff=1024),
    "base": dict(d_model=512, n_heads=8, n_encoder_layers=6, n_decoder_layers=6, d_ff=2048),
}

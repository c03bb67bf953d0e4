"""Frozen, validated configuration dataclasses saved beside the weights."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Literal

from attnscope.model import untrusted

Positional = Literal["sinusoidal", "learned", "relative"]
Norm = Literal["post", "pre"]
LayerNormKind = Literal["torch", "annotated", "rms"]
Activation = Literal["relu", "gelu", "silu", "gelu_tanh"]
FeedForwardKind = Literal["dense", "gated"]
Framing = Literal["eos", "bos-eos", "none"]
Sinusoid = Literal["interleaved", "halves", "fairseq"]

# No fixed limit on the parameters: whether a model fits is decided from the machine's available memory before it
# is allocated (model/budget.model_refusal, by its element_count(), which counts the sinusoid table too).
MAX_LEN = 65_536  # positions a table may cover (the longest any imported family uses is 4,096)
# Ids of the special tokens attnscope's own tokenizers reserve, in this order: the defaults of the config's ids.
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
SPECIAL_IDS = ("pad_id", "bos_id", "eos_id", "unk_id")  # config fields naming the special tokens, in that order
IDS = ("decoder_start", "forced_first", "suppressed", "source_prefix", "source_suffix", *SPECIAL_IDS)  # fields of token ids
SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")


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
    # Variants met in models trained elsewhere (checkpoints/importers/state_dict.py); the defaults are attnscope's own.
    layer_norm: LayerNormKind = "torch"  # "annotated": unbiased std with eps added to the std (the Annotated Transformer);
    #   "rms": root mean square, no mean and no bias (T5's)
    norm_eps: float = 1e-5  # LayerNorm epsilon (nn.LayerNorm's default; the Annotated Transformer uses 1e-6)
    activation: Activation = "relu"  # of the FFN hidden layer ("silu" is Marian's "swish"; "gelu_tanh" T5 v1.1's "gelu_new")
    embed_scale: bool = True  # token embeddings are multiplied by sqrt(d_model) (section 3.4)
    source_framing: Framing = "eos"  # source ids are `x <eos>`, `<bos> x <eos>` (the PyTorch tutorial's) or `x` (OpenNMT-py)
    # Variants of Hugging Face's Marian, BART, mBART, M2M100/NLLB, fairseq and OpenNMT-py (checkpoints/importers/).
    sinusoid: Sinusoid = "interleaved"  # sin/cos pairs side by side (the paper), or [sin | cos] halves with the
    #   paper's frequencies (Marian, OpenNMT-py) or with 10000^(-i/(d/2-1)) (fairseq, M2M100, NLLB)
    position_offset: int = 0  # position i reads table row i + offset (BART's learned tables, fairseq's padding_idx + 1)
    separate_positions: bool = False  # the decoder has its own learned table (BART, mBART)
    embed_norm: bool = False  # LayerNorm on the embedded input of each stack (BART's layernorm_embedding)
    qkv_bias: bool = True  # the q/k/v projections have biases (the output projection always has one, maybe zero)
    decoder_start: int | None = None  # token whose embedding the first decoder position reads; None: bos_id
    forced_first: int | None = None  # the first output is always this token (a language code: NLLB, M2M100, mBART-50)
    suppressed: tuple[int, ...] = ()  # tokens never output (logit -inf): rows the original lacks, or it bans
    source_prefix: tuple[int, ...] = ()  # ids before the sentence (after <bos>): a language code
    source_suffix: tuple[int, ...] = ()  # ids after the final <eos>: mBART's source language code
    # T5 (Raffel et al. 2020) and its v1.1, Flan-T5, mT5 and ByT5. Positional "relative" adds nothing to the embeddings
    # but a learned bias to every self-attention score, one per head and bucket of the offset key - query (section 2.1),
    #   from a table each stack keeps in its first layer and shares with the others (positions.RelativePositionBias):
    relative_buckets: int = 32  # buckets of offsets: half exact, half logarithmically wider (the encoder splits them by sign)
    relative_max_distance: int = 128  # offsets this far or farther share the last bucket
    d_head: int | None = None  # size of each head's q, k, v; None: d_model / n_heads. T5's d_kv, whose heads need not
    #   add up to d_model (Flan-T5-small, mT5-small, ByT5-small: 6 heads of 64 in 512)
    ffn: FeedForwardKind = "dense"  # "gated": down(act(x W_gate) * x W_up), a GLU variant (Shazeer 2020; T5 v1.1, mT5)
    ffn_bias: bool = True  # the feed-forward layers have biases (T5 has none)
    out_bias: bool = True  # the attention output projection has a bias (T5 has none)
    scale_scores: bool = True  # attention scores are divided by √d_k (section 3.2.1); T5 folds that into its initialisation
    scale_output: bool = False  # the output layer's input is multiplied by d_model^-0.5 (T5 v1.0, whose output layer is
    #   its embedding)
    # The special tokens' ids, the same on both sides (files without them were written with these defaults).
    pad_id: int = PAD_ID
    bos_id: int = BOS_ID
    eos_id: int = EOS_ID
    unk_id: int = UNK_ID

    def __post_init__(self) -> None:
        for name in ("suppressed", "source_prefix", "source_suffix"):  # JSON gives lists
            value = getattr(self, name)
            if not isinstance(value, (list, tuple)) or not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
                raise ConfigError(f"config field {name} must be a list of token ids, got {value!r}")
            object.__setattr__(self, name, tuple(value))
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            expected = {"int": int, "float": (int, float), "bool": bool}.get(str(f.type))
            if expected is not None and (not isinstance(value, expected) or
                                         (expected is not bool and isinstance(value, bool))):
                raise ConfigError(f"config field {f.name} must be {f.type}, got {value!r}")
        for name in ("src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "d_ff", "max_len"):
            if getattr(self, name) < 1:
                raise ConfigError(f"config field {name} must be at least 1, got {getattr(self, name)}")
        if self.max_len > MAX_LEN:
            raise ConfigError(f"config field max_len is {self.max_len:,}, more than the {MAX_LEN:,} positions attnscope "
                              "builds tables for")
        for name in ("n_encoder_layers", "n_decoder_layers"):
            if not 1 <= getattr(self, name) <= 64:
                raise ConfigError(f"config field {name} must be between 1 and 64, got {getattr(self, name)}")
        if self.d_head is not None and (isinstance(self.d_head, bool) or not isinstance(self.d_head, int) or self.d_head < 1):
            raise ConfigError(f"config field d_head must be a positive integer or null, got {self.d_head!r}")
        if self.d_head is None and self.d_model % self.n_heads:
            raise ConfigError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        for name in ("dropout", "attention_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"config field {name} must be in [0, 1), got {getattr(self, name)}")
        if self.positional not in ("sinusoidal", "learned", "relative"):
            raise ConfigError(f"positional must be 'sinusoidal', 'learned' or 'relative', got {self.positional!r}")
        if self.norm not in ("post", "pre"):
            raise ConfigError(f"norm must be 'post' or 'pre', got {self.norm!r}")
        for name, allowed in (("layer_norm", ("torch", "annotated", "rms")), ("ffn", ("dense", "gated")),
                              ("activation", ("relu", "gelu", "silu", "gelu_tanh")),
                              ("source_framing", ("eos", "bos-eos", "none")), ("sinusoid", ("interleaved", "halves", "fairseq"))):
            if getattr(self, name) not in allowed:
                raise ConfigError(f"{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}")
        if not 0.0 < self.norm_eps < 1.0:
            raise ConfigError(f"config field norm_eps must be in (0, 1), got {self.norm_eps}")
        if self.final_norm is not None and not isinstance(self.final_norm, bool):
            raise ConfigError(f"config field final_norm must be true, false or null, got {self.final_norm!r}")
        self._check_positions_and_ids()
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ConfigError("share_embeddings needs one joint vocabulary, but the sizes are "
                              f"{self.src_vocab_size} and {self.tgt_vocab_size}")

    def _check_positions_and_ids(self) -> None:
        if not 0 <= self.position_offset <= 4096:
            raise ConfigError(f"config field position_offset must be between 0 and 4096, got {self.position_offset}")
        if self.separate_positions and self.positional != "learned":
            raise ConfigError("separate_positions needs learned positions: sinusoidal tables are the same on both sides")
        if not 4 <= self.relative_buckets <= 1024:
            raise ConfigError(f"config field relative_buckets must be between 4 and 1024, got {self.relative_buckets}")
        if not self.relative_buckets // 2 < self.relative_max_distance <= MAX_LEN:
            raise ConfigError(f"config field relative_max_distance must be more than the {self.relative_buckets // 2} exact "
                              f"offsets of relative_buckets {self.relative_buckets} and at most {MAX_LEN:,}, "
                              f"got {self.relative_max_distance}")
        specials = {name: getattr(self, name) for name in SPECIAL_IDS}
        apart = [self.pad_id, self.eos_id, self.unk_id]  # <bos> may be <pad>: Marian's decoder starts on its <pad>
        if len(set(apart)) < 3 or self.bos_id in (self.eos_id, self.unk_id):
            raise ConfigError(f"the special tokens' ids {specials} are not distinct")
        for name in IDS:
            value = getattr(self, name)
            size = (self.src_vocab_size if name.startswith("source") else
                    min(self.src_vocab_size, self.tgt_vocab_size) if name in SPECIAL_IDS else self.tgt_vocab_size)
            for token in value if isinstance(value, tuple) else () if value is None else (value,):
                if isinstance(token, bool) or not isinstance(token, int) or not 0 <= token < size:
                    raise ConfigError(f"config field {name} holds {token!r}, not a token id below {size}")

    def frame_source(self, ids: list[int]) -> list[int]:
        """Source ids as the model was trained to read them: [<bos>] prefix x [<eos>] suffix."""
        start = [self.bos_id] if self.source_framing == "bos-eos" else []
        end = [] if self.source_framing == "none" else [self.eos_id]
        return [*start, *self.source_prefix, *ids, *end, *self.source_suffix]

    @property
    def source_overhead(self) -> int:
        """Positions the framing adds around a sentence's own tokens."""
        return len(self.frame_source([]))

    @property
    def has_final_norm(self) -> bool:
        return self.norm == "pre" if self.final_norm is None else self.final_norm

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads if self.d_head is None else self.d_head

    def parameter_count(self) -> int:
        """Number of parameters the model will have, computed without allocating it."""
        d, f, inner = self.d_model, self.d_ff, self.n_heads * self.head_dim
        attention = 4 * d * inner + (3 * inner if self.qkv_bias else 0) + (d if self.out_bias else 0)
        ffn = (3 if self.ffn == "gated" else 2) * d * f + ((2 if self.ffn == "gated" else 1) * f + d if self.ffn_bias else 0)
        norm = d if self.layer_norm == "rms" else 2 * d
        encoder = self.n_encoder_layers * (attention + ffn + 2 * norm)
        decoder = self.n_decoder_layers * (2 * attention + ffn + 3 * norm)
        finals = 2 * norm if self.has_final_norm else 0
        src_emb = 0 if self.share_embeddings else self.src_vocab_size * d
        tgt_emb = self.tgt_vocab_size * d
        output = self.tgt_vocab_size + (0 if self.tie_embeddings else self.tgt_vocab_size * d)
        tables = 2 if self.separate_positions else 1
        positions = tables * (self.max_len + self.position_offset) * d if self.positional == "learned" else 0
        embed_norms = 2 * norm if self.embed_norm else 0
        relative = 2 * self.relative_buckets * self.n_heads if self.positional == "relative" else 0  # a table per stack
        return encoder + decoder + finals + src_emb + tgt_emb + output + positions + embed_norms + relative

    def element_count(self) -> int:
        """Numbers the built model holds: its parameters and the fixed sinusoid table (a buffer)."""
        table = (self.max_len + self.position_offset) * self.d_model if self.positional == "sinusoidal" else 0
        return self.parameter_count() + table

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
            data = untrusted.loads(text)
        except json.JSONDecodeError as err:
            raise ConfigError(f"model config is not valid JSON ({err.msg})") from None
        return cls.from_dict(data)


# Model sizes offered by the CLI and the Train page; every field can still be overridden.
PRESETS: dict[str, dict[str, Any]] = {
    "toy": dict(d_model=64, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=128, dropout=0.0,
                attention_dropout=0.0, max_len=64),
    "small": dict(d_model=256, n_heads=8, n_encoder_layers=3, n_decoder_layers=3, d_ff=1024),
    "base": dict(d_model=512, n_heads=8, n_encoder_layers=6, n_decoder_layers=6, d_ff=2048),
}

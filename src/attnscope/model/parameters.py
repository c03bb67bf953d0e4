"""attnscope's parameter names in one table, and the shapes a config gives them.

Transformer (transformer.py) is the structure these names walk; everything else that names a parameter
reads it here: checkpoints check a file's tensors against `expected_shapes`, and every importer maps its
framework's names onto `part(side, layer, role)` and the names around the stacks. tests/model compares
the table with a built model, and tests/test_architecture.py keeps the names out of every other module.
Plain data and arithmetic: no torch, so checking a file's header costs no torch import.
"""
from __future__ import annotations

from attnscope.model.config import ModelConfig

SIDES = ("encoder", "decoder")
SRC_EMBED = "src_embed.weight"
TGT_EMBED = "tgt_embed.weight"
OUTPUT = "generator.weight"
OUTPUT_BIAS = "generator.bias"
POSITIONS = "positions.table.weight"  # learned positions (both sides, or the encoder's with separate_positions)
DECODER_POSITIONS = "positions.decoder_table.weight"
FINAL_NORMS = {"encoder": "encoder_norm", "decoder": "decoder_norm"}  # LayerNorm after each stack
EMBED_NORMS = {"encoder": "src_embed_norm", "decoder": "tgt_embed_norm"}  # LayerNorm on each stack's embedded input
VOCABULARY = (SRC_EMBED, TGT_EMBED, OUTPUT, OUTPUT_BIAS)  # tensors with one row per token
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")  # of each attention module, in this order
ATTENTIONS = ("self_attn", "cross_attn")
FFN_GATE = "ffn.gate"  # a layer's third feed-forward matrix with config.ffn "gated" (T5 v1.1's wi_0)
RELATIVE_BIAS = "relative_bias.table.weight"  # in each stack's first layer with relative positions: T5's bias table
# A layer's parts by role: what importers name when they map another framework's layer onto ours.
LAYER_PARTS = {
    "encoder": {"self_attn": "self_attn", "self_norm": "attn_block.norm", "ffn_up": "ffn.up", "ffn_down": "ffn.down",
                "ffn_norm": "ffn_block.norm"},
    "decoder": {"self_attn": "self_attn", "self_norm": "self_block.norm", "cross_attn": "cross_attn",
                "cross_norm": "cross_block.norm", "ffn_up": "ffn.up", "ffn_down": "ffn.down", "ffn_norm": "ffn_block.norm"},
}


def part(side: str, layer: int, role: str) -> str:
    """The module name of one part of a layer, e.g. part("decoder", 2, "cross_norm") -> "decoder.2.cross_block.norm"."""
    return f"{side}.{layer}.{LAYER_PARTS[side][role]}"


def gate(side: str, layer: int) -> str:
    """The module name of a layer's third feed-forward matrix (config.ffn "gated"), e.g. "encoder.0.ffn.gate"."""
    return f"{side}.{layer}.{FFN_GATE}"


def relative_bias(side: str) -> str:
    """The name of a stack's relative position bias table (positional "relative"), kept in its first layer."""
    return f"{side}.0.{RELATIVE_BIAS}"


def expected_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Shapes of the tensors a checkpoint of `config` holds (tied tensors once), by arithmetic on the config."""
    d, f, inner = config.d_model, config.d_ff, config.n_heads * config.head_dim

    def linear(name: str, n_out: int, n_in: int, bias: bool = True) -> dict[str, tuple[int, ...]]:
        return {f"{name}.weight": (n_out, n_in), **({f"{name}.bias": (n_out,)} if bias else {})}

    def norm(name: str) -> dict[str, tuple[int, ...]]:
        return {f"{name}.weight": (d,), **({} if config.layer_norm == "rms" else {f"{name}.bias": (d,)})}

    def attention(name: str) -> dict[str, tuple[int, ...]]:
        out: dict[str, tuple[int, ...]] = {}
        for proj in PROJECTIONS[:3]:
            out |= linear(f"{name}.{proj}", inner, d, bias=config.qkv_bias)
        return out | linear(f"{name}.{PROJECTIONS[3]}", d, inner, bias=config.out_bias)

    def feed_forward(name: str, role: str) -> dict[str, tuple[int, ...]]:
        if role == "ffn_down":
            return linear(name, d, f, bias=config.ffn_bias)
        side, layer = name.split(".")[:2]
        third = linear(gate(side, int(layer)), f, d, bias=config.ffn_bias) if config.ffn == "gated" else {}
        return third | linear(name, f, d, bias=config.ffn_bias)

    shapes: dict[str, tuple[int, ...]] = {TGT_EMBED: (config.tgt_vocab_size, d)}
    if not config.share_embeddings:
        shapes[SRC_EMBED] = (config.src_vocab_size, d)
    if config.positional == "learned":
        shapes[POSITIONS] = (config.max_len + config.position_offset, d)
        if config.separate_positions:
            shapes[DECODER_POSITIONS] = (config.max_len + config.position_offset, d)
    for side, count in zip(SIDES, (config.n_encoder_layers, config.n_decoder_layers)):
        if config.embed_norm:
            shapes |= norm(EMBED_NORMS[side])
        for i in range(count):
            for role in LAYER_PARTS[side]:
                name = part(side, i, role)
                if role.endswith("attn"):
                    shapes |= attention(name)
                elif role.endswith("norm"):
                    shapes |= norm(name)
                else:
                    shapes |= feed_forward(name, role)
        if config.positional == "relative" and count:
            shapes[relative_bias(side)] = (config.relative_buckets, config.n_heads)
        if config.has_final_norm:
            shapes |= norm(FINAL_NORMS[side])
    if not config.tie_embeddings:
        shapes[OUTPUT] = (config.tgt_vocab_size, d)
    shapes[OUTPUT_BIAS] = (config.tgt_vocab_size,)
    return shapes


COLUMNS_LIMIT = 1 << 26  # output-layer weights up to which a loaded model holds them column-major (column_major)


def column_major(config: ModelConfig) -> set[str]:
    """The state names of the tensors a checkpoint's load lays out column-major: the output layer's weight (V, D),
    the target embedding's when they are tied, up to COLUMNS_LIMIT weights. One core multiplies a decoding step's
    query by a weight stored (D, V) ~18% faster than by one stored (V, D) (58101 x 512: 8.4 ms instead of 10.2),
    ~8% of a long decode on opus-mt's shape (BENCHMARKS.md, "Long outputs, decoding speed"). The transposition at
    load costs ~1 s a GB on one core: past ~256 MB (mBART-50's and NLLB's 1 GB output layers), more than a
    sentence's decode saves."""
    if config.tgt_vocab_size * config.d_model > COLUMNS_LIMIT:
        return set()
    return {TGT_EMBED if config.tie_embeddings else OUTPUT}

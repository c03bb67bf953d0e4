"""Tiny models in the conventions of three public tutorials, written for the tests (not their code).

- M1: the PyTorch tutorial "Language Translation with nn.Transformer": Seq2SeqTransformer with
  TokenEmbedding (x sqrt(d)), a sinusoidal PositionalEncoding buffer [max_len, 1, d], nn.Transformer
  with sequence-first tensors and a generator; torchtext specials <unk> <pad> <bos> <eos> at 0-3;
  sources framed <bos> x <eos>; greedy decoding that re-runs the decoder on the whole prefix.
- M2: the Annotated Transformer: EncoderDecoder, MultiHeadedAttention with linears[0..3] that keeps
  the last weights on self.attn, LayerNorm with a_2/b_2 (unbiased std, eps added to the std),
  specials <s> </s> <blank> <unk> at 0-3.
- M3: a hand-written encoder-decoder on nn.MultiheadAttention(batch_first=True) with separate
  Q/K/V projections in front of each attention and need_weights=False in the encoder.
"""
from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

WORDS = ["Zwei", "Hunde", "laufen", "durch", "den", "Schnee", "ein", "Mann", "fährt", "Rad", "die", "Katze",
         "schläft", ".", ",", "auf", "dem", "Sofa"]


# --- M1 ------------------------------------------------------------------------------

M1_SPECIALS = ["<unk>", "<pad>", "<bos>", "<eos>"]
UNK_IDX, PAD_IDX, BOS_IDX, EOS_IDX = 0, 1, 2, 3


class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size: int, emb_size: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_size)
        self.emb_size = emb_size

    def forward(self, tokens: Tensor) -> Tensor:
        return self.embedding(tokens.long()) * math.sqrt(self.emb_size)


class PositionalEncoding(nn.Module):
    def __init__(self, emb_size: int, dropout: float, maxlen: int = 500) -> None:
        super().__init__()
        rate = torch.exp(-torch.arange(0, emb_size, 2) * math.log(10000) / emb_size)
        where = torch.arange(0, maxlen).reshape(maxlen, 1)
        table = torch.zeros((maxlen, emb_size))
        table[:, 0::2] = torch.sin(where * rate)
        table[:, 1::2] = torch.cos(where * rate)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pos_embedding", table.unsqueeze(-2))  # (maxlen, 1, emb)

    def forward(self, token_embedding: Tensor) -> Tensor:
        return self.dropout(token_embedding + self.pos_embedding[: token_embedding.size(0), :])


class Seq2SeqTransformer(nn.Module):
    def __init__(self, num_encoder_layers: int, num_decoder_layers: int, emb_size: int, nhead: int,
                 src_vocab_size: int, tgt_vocab_size: int, dim_feedforward: int = 64, dropout: float = 0.1,
                 norm_first: bool = False) -> None:
        super().__init__()
        self.transformer = nn.Transformer(d_model=emb_size, nhead=nhead, num_encoder_layers=num_encoder_layers,
                                          num_decoder_layers=num_decoder_layers, dim_feedforward=dim_feedforward,
                                          dropout=dropout, norm_first=norm_first)
        self.generator = nn.Linear(emb_size, tgt_vocab_size)
        self.src_tok_emb = TokenEmbedding(src_vocab_size, emb_size)
        self.tgt_tok_emb = TokenEmbedding(tgt_vocab_size, emb_size)
        self.positional_encoding = PositionalEncoding(emb_size, dropout=dropout)

    def forward(self, src: Tensor, trg: Tensor, src_mask: Tensor, tgt_mask: Tensor, src_padding_mask: Tensor,
                tgt_padding_mask: Tensor, memory_key_padding_mask: Tensor) -> Tensor:
        src_emb = self.positional_encoding(self.src_tok_emb(src))
        tgt_emb = self.positional_encoding(self.tgt_tok_emb(trg))
        outs = self.transformer(src_emb, tgt_emb, src_mask, tgt_mask, None, src_padding_mask, tgt_padding_mask,
                                memory_key_padding_mask)
        return self.generator(outs)

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        return self.transformer.encoder(self.positional_encoding(self.src_tok_emb(src)), src_mask)

    def decode(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor) -> Tensor:
        return self.transformer.decoder(self.positional_encoding(self.tgt_tok_emb(tgt)), memory, tgt_mask)


def square_subsequent_mask(sz: int) -> Tensor:
    mask = (torch.triu(torch.ones((sz, sz))) == 1).transpose(0, 1)
    return mask.float().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, 0.0)


def m1_logits(model: Seq2SeqTransformer, src: Tensor, tgt: Tensor) -> Tensor:
    """Logits [T, V] for one sequence-first source [S, 1] and decoder input [T, 1], as the tutorial's training does."""
    s, t = src.shape[0], tgt.shape[0]
    src_mask = torch.zeros((s, s)).type(torch.bool)

    def pad(x: torch.Tensor) -> torch.Tensor:
        return (x == PAD_IDX).transpose(0, 1)

    return model(src, tgt, src_mask, square_subsequent_mask(t), pad(src), pad(tgt), pad(src))[:, 0]


@torch.no_grad()
def m1_greedy_decode(model: Seq2SeqTransformer, src: Tensor, max_len: int) -> list[int]:
    """The tutorial's greedy_decode: re-run the decoder on the whole prefix each step; ids with <bos> ... <eos>."""
    src_mask = torch.zeros((src.shape[0], src.shape[0])).type(torch.bool)
    memory = model.encode(src, src_mask)
    ys = torch.ones(1, 1).fill_(BOS_IDX).type(torch.long)
    for _ in range(max_len - 1):
        tgt_mask = square_subsequent_mask(ys.size(0)).type(torch.bool)
        out = model.decode(ys, memory, tgt_mask).transpose(0, 1)
        next_word = int(torch.max(model.generator(out[:, -1]), dim=1)[1].item())
        ys = torch.cat([ys, torch.ones(1, 1).type_as(src.data).fill_(next_word)], dim=0)
        if next_word == EOS_IDX:
            break
    return ys.flatten().tolist()


def m1_vocab(words: list[str]) -> list[str]:
    """What torchtext's build_vocab_from_iterator(specials=[...], special_first=True).get_itos() gives."""
    return M1_SPECIALS + words


def m1_source(itos: list[str], sentence: str) -> Tensor:
    """<bos> x <eos> as the tutorial's text_transform builds it, sequence-first [S, 1]."""
    ids = [itos.index(w) if w in itos else UNK_IDX for w in sentence.split()]
    return torch.tensor([BOS_IDX, *ids, EOS_IDX]).unsqueeze(1)


# --- M2 ------------------------------------------------------------------------------

def clones(module: nn.Module, n: int) -> nn.ModuleList:
    return nn.ModuleList([copy.deepcopy(module) for _ in range(n)])


class LayerNorm(nn.Module):
    """Its own LayerNorm: unbiased std, eps added to the std."""

    def __init__(self, features: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.a_2, self.b_2, self.eps = nn.Parameter(torch.ones(features)), nn.Parameter(torch.zeros(features)), eps

    def forward(self, x: Tensor) -> Tensor:
        mean, std = x.mean(-1, keepdim=True), x.std(-1, keepdim=True)
        return self.a_2 * (x - mean) / (std + self.eps) + self.b_2


class SublayerConnection(nn.Module):
    def __init__(self, size: int, dropout: float) -> None:
        super().__init__()
        self.norm, self.dropout = LayerNorm(size), nn.Dropout(dropout)

    def forward(self, x: Tensor, sublayer) -> Tensor:  # noqa: ANN001
        return x + self.dropout(sublayer(self.norm(x)))


def attention(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None,
              dropout: nn.Module | None = None) -> tuple[Tensor, Tensor]:
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(query.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn


class MultiHeadedAttention(nn.Module):
    def __init__(self, h: int, d_model: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.d_k, self.h = d_model // h, h
        self.linears = clones(nn.Linear(d_model, d_model), 4)
        self.attn: Tensor | None = None
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None) -> Tensor:
        if mask is not None:
            mask = mask.unsqueeze(1)
        nbatches = query.size(0)
        query, key, value = [lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
                             for lin, x in zip(self.linears, (query, key, value))]
        x, self.attn = attention(query, key, value, mask=mask, dropout=self.dropout)
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        return self.linears[-1](x)


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.w_1, self.w_2, self.dropout = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model), nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(self.dropout(self.w_1(x).relu()))


class EncoderLayer(nn.Module):
    def __init__(self, size: int, self_attn: nn.Module, feed_forward: nn.Module, dropout: float) -> None:
        super().__init__()
        self.self_attn, self.feed_forward = self_attn, feed_forward
        self.sublayer, self.size = clones(SublayerConnection(size, dropout), 2), size

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, mask))
        return self.sublayer[1](x, self.feed_forward)


class Encoder(nn.Module):
    def __init__(self, layer: nn.Module, n: int) -> None:
        super().__init__()
        self.layers, self.norm = clones(layer, n), LayerNorm(layer.size)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)


class DecoderLayer(nn.Module):
    def __init__(self, size: int, self_attn: nn.Module, src_attn: nn.Module, feed_forward: nn.Module,
                 dropout: float) -> None:
        super().__init__()
        self.size, self.self_attn, self.src_attn, self.feed_forward = size, self_attn, src_attn, feed_forward
        self.sublayer = clones(SublayerConnection(size, dropout), 3)

    def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor, tgt_mask: Tensor) -> Tensor:
        m = memory
        x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, tgt_mask))
        x = self.sublayer[1](x, lambda x: self.src_attn(x, m, m, src_mask))
        return self.sublayer[2](x, self.feed_forward)


class Decoder(nn.Module):
    def __init__(self, layer: nn.Module, n: int) -> None:
        super().__init__()
        self.layers, self.norm = clones(layer, n), LayerNorm(layer.size)

    def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor, tgt_mask: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x, memory, src_mask, tgt_mask)
        return self.norm(x)


class Embeddings(nn.Module):
    def __init__(self, d_model: int, vocab: int) -> None:
        super().__init__()
        self.lut, self.d_model = nn.Embedding(vocab, d_model), d_model

    def forward(self, x: Tensor) -> Tensor:
        return self.lut(x) * math.sqrt(self.d_model)


class AnnotatedPositionalEncoding(nn.Module):
    def __init__(self, d_model: int, dropout: float, max_len: int = 500) -> None:
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0))

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(x + self.pe[:, : x.size(1)].requires_grad_(False))


class Generator(nn.Module):
    def __init__(self, d_model: int, vocab: int) -> None:
        super().__init__()
        self.proj = nn.Linear(d_model, vocab)

    def forward(self, x: Tensor) -> Tensor:
        return F.log_softmax(self.proj(x), dim=-1)


class EncoderDecoder(nn.Module):
    def __init__(self, encoder: nn.Module, decoder: nn.Module, src_embed: nn.Module, tgt_embed: nn.Module,
                 generator: nn.Module) -> None:
        super().__init__()
        self.encoder, self.decoder, self.src_embed, self.tgt_embed = encoder, decoder, src_embed, tgt_embed
        self.generator = generator

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor, tgt_mask: Tensor) -> Tensor:
        return self.decode(self.encode(src, src_mask), src_mask, tgt, tgt_mask)

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        return self.encoder(self.src_embed(src), src_mask)

    def decode(self, memory: Tensor, src_mask: Tensor, tgt: Tensor, tgt_mask: Tensor) -> Tensor:
        return self.decoder(self.tgt_embed(tgt), memory, src_mask, tgt_mask)


def make_model(src_vocab: int, tgt_vocab: int, n: int = 2, d_model: int = 32, d_ff: int = 64, h: int = 4,
               dropout: float = 0.1) -> EncoderDecoder:
    c = copy.deepcopy
    attn, ff = MultiHeadedAttention(h, d_model), PositionwiseFeedForward(d_model, d_ff, dropout)
    position = AnnotatedPositionalEncoding(d_model, dropout)
    model = EncoderDecoder(Encoder(EncoderLayer(d_model, c(attn), c(ff), dropout), n),
                           Decoder(DecoderLayer(d_model, c(attn), c(attn), c(ff), dropout), n),
                           nn.Sequential(Embeddings(d_model, src_vocab), c(position)),
                           nn.Sequential(Embeddings(d_model, tgt_vocab), c(position)), Generator(d_model, tgt_vocab))
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    return model


def subsequent_mask(size: int) -> Tensor:
    return torch.triu(torch.ones((1, size, size)), diagonal=1).type(torch.uint8) == 0


M2_SPECIALS = ["<s>", "</s>", "<blank>", "<unk>"]  # the Annotated Transformer's order


@torch.no_grad()
def m2_greedy_decode(model: EncoderDecoder, src: Tensor, max_len: int, start_symbol: int = 0) -> list[int]:
    """Its greedy_decode: the whole prefix re-run each step; ids start with <s>."""
    src_mask = (src != 2).unsqueeze(-2)
    memory = model.encode(src, src_mask)
    ys = torch.zeros(1, 1).fill_(start_symbol).type_as(src.data)
    for _ in range(max_len - 1):
        out = model.decode(memory, src_mask, ys, subsequent_mask(ys.size(1)).type_as(src.data))
        next_word = int(torch.max(model.generator(out[:, -1]), dim=1)[1])
        ys = torch.cat([ys, torch.zeros(1, 1).type_as(src.data).fill_(next_word)], dim=1)
        if next_word == 1:
            break
    return ys.flatten().tolist()


# --- M3 ------------------------------------------------------------------------------

class ProjectedAttention(nn.Module):
    """Separate Q/K/V projections in front of nn.MultiheadAttention (as the seed posts write it)."""

    def __init__(self, d: int, heads: int, need_weights: bool) -> None:
        super().__init__()
        self.w_q, self.w_k, self.w_v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.mhsa = nn.MultiheadAttention(d, heads, batch_first=True)
        self.need_weights = need_weights

    def forward(self, q: Tensor, kv: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        return self.mhsa(self.w_q(q), self.w_k(kv), self.w_v(kv), attn_mask=mask, need_weights=self.need_weights)


class M3Block(nn.Module):
    def __init__(self, d: int, heads: int, cross: bool, need_weights: bool) -> None:
        super().__init__()
        self.self_attn = ProjectedAttention(d, heads, need_weights)
        self.cross_attn = ProjectedAttention(d, heads, True) if cross else None
        self.ffn = nn.Sequential(nn.Linear(d, 2 * d), nn.ReLU(), nn.Linear(2 * d, d))
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(3 if cross else 2))

    def forward(self, x: Tensor, memory: Tensor | None = None, mask: Tensor | None = None) -> Tensor:
        x = self.norms[0](x + self.self_attn(x, x, mask)[0])
        if self.cross_attn is not None:
            x = self.norms[1](x + self.cross_attn(x, memory)[0])
        return self.norms[-1](x + self.ffn(x))


class M3Seq2Seq(nn.Module):
    def __init__(self, v_src: int, v_tgt: int, d: int = 16, heads: int = 2, layers: int = 2) -> None:
        super().__init__()
        self.src_emb, self.tgt_emb = nn.Embedding(v_src, d), nn.Embedding(v_tgt, d)
        self.pos = nn.Embedding(64, d)
        self.encoder = nn.ModuleList(M3Block(d, heads, False, need_weights=False) for _ in range(layers))
        self.decoder = nn.ModuleList(M3Block(d, heads, True, need_weights=True) for _ in range(layers))
        self.out = nn.Linear(d, v_tgt)

    def encode(self, src: Tensor) -> Tensor:
        x = self.src_emb(src) + self.pos.weight[: src.shape[1]]
        for block in self.encoder:
            x = block(x)
        return x

    def decode(self, tgt: Tensor, memory: Tensor) -> Tensor:
        n = tgt.shape[1]
        causal = torch.ones(n, n, dtype=torch.bool).triu(1)
        x = self.tgt_emb(tgt) + self.pos.weight[:n]
        for block in self.decoder:
            x = block(x, memory, causal)
        return self.out(x)


@torch.no_grad()
def m3_greedy(model: M3Seq2Seq, src: Tensor, bos: int, eos: int, max_len: int) -> list[int]:
    """Greedy decoding that re-runs the decoder on the whole prefix; ids after <bos>."""
    memory = model.encode(src)
    ys = [bos]
    for _ in range(max_len):
        ys.append(int(model.decode(torch.tensor([ys]), memory)[0, -1].argmax()))
        if ys[-1] == eos:
            break
    return ys[1:]


def m1_train(model: Seq2SeqTransformer, src_itos: list[str], tgt_itos: list[str], steps: int, seed: int = 0) -> None:
    """A few steps of the tutorial's training loop on a word-for-word task (word i -> target word i), so that
    greedy decoding ends with <eos> like a trained model's."""
    gen = torch.Generator().manual_seed(seed)
    n_words = min(len(src_itos), len(tgt_itos)) - 4
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98), eps=1e-9)
    loss_fn = nn.CrossEntropyLoss(ignore_index=PAD_IDX)
    model.train()
    for _ in range(steps):
        words = [torch.randint(4, 4 + n_words, (int(torch.randint(2, 7, (1,), generator=gen)),), generator=gen)
                 for _ in range(16)]
        src = nn.utils.rnn.pad_sequence([torch.cat([torch.tensor([BOS_IDX]), w, torch.tensor([EOS_IDX])])
                                         for w in words], padding_value=PAD_IDX)  # (S, B)
        tgt = src.clone()
        tgt_input = tgt[:-1, :]
        s, t = src.shape[0], tgt_input.shape[0]
        src_mask = torch.zeros((s, s)).type(torch.bool)
        logits = model(src, tgt_input, src_mask, square_subsequent_mask(t), (src == PAD_IDX).transpose(0, 1),
                       (tgt_input == PAD_IDX).transpose(0, 1), (src == PAD_IDX).transpose(0, 1))
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt[1:, :].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()

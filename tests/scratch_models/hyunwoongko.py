"""The Transformer of hyunwoongko/transformer at 6328654 (2025-07-15), re-typed module for module from
models/layers (scale_dot_product_attention.py, multi_head_attention.py, layer_norm.py,
position_wise_feed_forward.py), models/embedding, models/blocks and models/model: the same classes,
attribute names and operations in the same order. Comments and the training code are left out.

Attention runs in a `ScaleDotProductAttention` module that returns `(v, score)`, but `MultiHeadAttention`
throws the weights away; the decoder layer calls cross-attention `enc_dec_attention`. The repository
has no decoding loop and no cache: `Transformer.forward(src, trg)` runs encoder and decoder together,
so `greedy` (the loop its users write) re-runs both on the whole prefix at every step.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

# --- models/layers


class ScaleDotProductAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, e: float = 1e-12) -> tuple[Tensor, Tensor]:
        batch_size, head, length, d_tensor = k.size()
        k_t = k.transpose(2, 3)
        score = (q @ k_t) / math.sqrt(d_tensor)
        if mask is not None:
            score = score.masked_fill(mask == 0, -10000)
        score = self.softmax(score)
        v = score @ v
        return v, score


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_head: int) -> None:
        super().__init__()
        self.n_head = n_head
        self.attention = ScaleDotProductAttention()
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_concat = nn.Linear(d_model, d_model)

    def forward(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> Tensor:
        q, k, v = self.w_q(q), self.w_k(k), self.w_v(v)
        q, k, v = self.split(q), self.split(k), self.split(v)
        out, attention = self.attention(q, k, v, mask=mask)
        out = self.concat(out)
        out = self.w_concat(out)
        return out

    def split(self, tensor: Tensor) -> Tensor:
        batch_size, length, d_model = tensor.size()
        d_tensor = d_model // self.n_head
        tensor = tensor.view(batch_size, length, self.n_head, d_tensor).transpose(1, 2)
        return tensor

    def concat(self, tensor: Tensor) -> Tensor:
        batch_size, head, length, d_tensor = tensor.size()
        d_model = head * d_tensor
        tensor = tensor.transpose(1, 2).contiguous().view(batch_size, length, d_model)
        return tensor


class LayerNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-12) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(d_model))
        self.beta = nn.Parameter(torch.zeros(d_model))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        mean = x.mean(-1, keepdim=True)
        var = x.var(-1, unbiased=False, keepdim=True)
        out = (x - mean) / torch.sqrt(var + self.eps)
        out = self.gamma * out + self.beta
        return out


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model: int, hidden: int, drop_prob: float = 0.1) -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, hidden)
        self.linear2 = nn.Linear(hidden, d_model)
        self.relu = nn.ReLU()
        self.dropout = nn.Dropout(p=drop_prob)

    def forward(self, x: Tensor) -> Tensor:
        x = self.linear1(x)
        x = self.relu(x)
        x = self.dropout(x)
        x = self.linear2(x)
        return x


# --- models/embedding


class PositionalEncoding(nn.Module):
    def __init__(self, d_model: int, max_len: int, device: torch.device) -> None:
        super().__init__()
        self.encoding = torch.zeros(max_len, d_model, device=device)
        self.encoding.requires_grad = False
        pos = torch.arange(0, max_len, device=device)
        pos = pos.float().unsqueeze(dim=1)
        _2i = torch.arange(0, d_model, step=2, device=device).float()
        self.encoding[:, 0::2] = torch.sin(pos / (10000 ** (_2i / d_model)))
        self.encoding[:, 1::2] = torch.cos(pos / (10000 ** (_2i / d_model)))

    def forward(self, x: Tensor) -> Tensor:
        batch_size, seq_len = x.size()
        return self.encoding[:seq_len, :]


class TokenEmbedding(nn.Embedding):
    def __init__(self, vocab_size: int, d_model: int) -> None:
        super().__init__(vocab_size, d_model, padding_idx=1)


class TransformerEmbedding(nn.Module):
    def __init__(self, vocab_size: int, d_model: int, max_len: int, drop_prob: float, device: torch.device) -> None:
        super().__init__()
        self.tok_emb = TokenEmbedding(vocab_size, d_model)
        self.pos_emb = PositionalEncoding(d_model, max_len, device)
        self.drop_out = nn.Dropout(p=drop_prob)

    def forward(self, x: Tensor) -> Tensor:
        tok_emb = self.tok_emb(x)
        pos_emb = self.pos_emb(x)
        return self.drop_out(tok_emb + pos_emb)


# --- models/blocks


class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, ffn_hidden: int, n_head: int, drop_prob: float) -> None:
        super().__init__()
        self.attention = MultiHeadAttention(d_model=d_model, n_head=n_head)
        self.norm1 = LayerNorm(d_model=d_model)
        self.dropout1 = nn.Dropout(p=drop_prob)
        self.ffn = PositionwiseFeedForward(d_model=d_model, hidden=ffn_hidden, drop_prob=drop_prob)
        self.norm2 = LayerNorm(d_model=d_model)
        self.dropout2 = nn.Dropout(p=drop_prob)

    def forward(self, x: Tensor, src_mask: Tensor) -> Tensor:
        _x = x
        x = self.attention(q=x, k=x, v=x, mask=src_mask)
        x = self.dropout1(x)
        x = self.norm1(x + _x)
        _x = x
        x = self.ffn(x)
        x = self.dropout2(x)
        x = self.norm2(x + _x)
        return x


class DecoderLayer(nn.Module):
    def __init__(self, d_model: int, ffn_hidden: int, n_head: int, drop_prob: float) -> None:
        super().__init__()
        self.self_attention = MultiHeadAttention(d_model=d_model, n_head=n_head)
        self.norm1 = LayerNorm(d_model=d_model)
        self.dropout1 = nn.Dropout(p=drop_prob)
        self.enc_dec_attention = MultiHeadAttention(d_model=d_model, n_head=n_head)
        self.norm2 = LayerNorm(d_model=d_model)
        self.dropout2 = nn.Dropout(p=drop_prob)
        self.ffn = PositionwiseFeedForward(d_model=d_model, hidden=ffn_hidden, drop_prob=drop_prob)
        self.norm3 = LayerNorm(d_model=d_model)
        self.dropout3 = nn.Dropout(p=drop_prob)

    def forward(self, dec: Tensor, enc: Tensor | None, trg_mask: Tensor, src_mask: Tensor) -> Tensor:
        _x = dec
        x = self.self_attention(q=dec, k=dec, v=dec, mask=trg_mask)
        x = self.dropout1(x)
        x = self.norm1(x + _x)
        if enc is not None:
            _x = x
            x = self.enc_dec_attention(q=x, k=enc, v=enc, mask=src_mask)
            x = self.dropout2(x)
            x = self.norm2(x + _x)
        _x = x
        x = self.ffn(x)
        x = self.dropout3(x)
        x = self.norm3(x + _x)
        return x


# --- models/model


class Encoder(nn.Module):
    def __init__(self, enc_voc_size: int, max_len: int, d_model: int, ffn_hidden: int, n_head: int, n_layers: int,
                 drop_prob: float, device: torch.device) -> None:
        super().__init__()
        self.emb = TransformerEmbedding(d_model=d_model, max_len=max_len, vocab_size=enc_voc_size, drop_prob=drop_prob,
                                        device=device)
        self.layers = nn.ModuleList([EncoderLayer(d_model=d_model, ffn_hidden=ffn_hidden, n_head=n_head,
                                                  drop_prob=drop_prob) for _ in range(n_layers)])

    def forward(self, x: Tensor, src_mask: Tensor) -> Tensor:
        x = self.emb(x)
        for layer in self.layers:
            x = layer(x, src_mask)
        return x


class Decoder(nn.Module):
    def __init__(self, dec_voc_size: int, max_len: int, d_model: int, ffn_hidden: int, n_head: int, n_layers: int,
                 drop_prob: float, device: torch.device) -> None:
        super().__init__()
        self.emb = TransformerEmbedding(d_model=d_model, drop_prob=drop_prob, max_len=max_len, vocab_size=dec_voc_size,
                                        device=device)
        self.layers = nn.ModuleList([DecoderLayer(d_model=d_model, ffn_hidden=ffn_hidden, n_head=n_head,
                                                  drop_prob=drop_prob) for _ in range(n_layers)])
        self.linear = nn.Linear(d_model, dec_voc_size)

    def forward(self, trg: Tensor, enc_src: Tensor, trg_mask: Tensor, src_mask: Tensor) -> Tensor:
        trg = self.emb(trg)
        for layer in self.layers:
            trg = layer(trg, enc_src, trg_mask, src_mask)
        output = self.linear(trg)
        return output


class Transformer(nn.Module):
    def __init__(self, src_pad_idx: int, trg_pad_idx: int, trg_sos_idx: int, enc_voc_size: int, dec_voc_size: int,
                 d_model: int, n_head: int, max_len: int, ffn_hidden: int, n_layers: int, drop_prob: float,
                 device: torch.device) -> None:
        super().__init__()
        self.src_pad_idx = src_pad_idx
        self.trg_pad_idx = trg_pad_idx
        self.trg_sos_idx = trg_sos_idx
        self.device = device
        self.encoder = Encoder(d_model=d_model, n_head=n_head, max_len=max_len, ffn_hidden=ffn_hidden,
                               enc_voc_size=enc_voc_size, drop_prob=drop_prob, n_layers=n_layers, device=device)
        self.decoder = Decoder(d_model=d_model, n_head=n_head, max_len=max_len, ffn_hidden=ffn_hidden,
                               dec_voc_size=dec_voc_size, drop_prob=drop_prob, n_layers=n_layers, device=device)

    def forward(self, src: Tensor, trg: Tensor) -> Tensor:
        src_mask = self.make_src_mask(src)
        trg_mask = self.make_trg_mask(trg)
        enc_src = self.encoder(src, src_mask)
        output = self.decoder(trg, enc_src, trg_mask, src_mask)
        return output

    def make_src_mask(self, src: Tensor) -> Tensor:
        src_mask = (src != self.src_pad_idx).unsqueeze(1).unsqueeze(2)
        return src_mask

    def make_trg_mask(self, trg: Tensor) -> Tensor:
        trg_pad_mask = (trg != self.trg_pad_idx).unsqueeze(1).unsqueeze(3)
        trg_len = trg.shape[1]
        trg_sub_mask = torch.tril(torch.ones(trg_len, trg_len)).type(torch.ByteTensor).to(self.device)
        trg_mask = trg_pad_mask & trg_sub_mask
        return trg_mask


def build(n_vocab: int, seed: int, pad_idx: int = 1, sos_idx: int = 2, d_model: int = 16, n_head: int = 2,
          n_layers: int = 2, ffn_hidden: int = 32, max_len: int = 32) -> Transformer:
    """The repository's Transformer with tiny sizes (its conf.py: 512 / 8 / 6 / 2048), random weights."""
    torch.manual_seed(seed)
    return Transformer(pad_idx, pad_idx, sos_idx, n_vocab, n_vocab, d_model, n_head, max_len, ffn_hidden, n_layers,
                       drop_prob=0.1, device=torch.device("cpu")).eval()


@torch.no_grad()
def greedy(model: Transformer, src: Tensor, sos: int, eos: int, max_len: int) -> list[list[int]]:
    """Greedy decoding as the repository's users write it (it has no cache): the whole model on the whole
    prefix at every step; a batch keeps going until every sentence has produced <eos>. Ids after <sos>."""
    trg = torch.full((src.shape[0], 1), sos, dtype=torch.long)
    for _ in range(max_len):
        next_tokens = model(src, trg)[:, -1].argmax(-1)
        trg = torch.cat([trg, next_tokens.unsqueeze(1)], dim=1)
        if bool((trg[:, 1:] == eos).any(1).all()):
            break
    out = []
    for row in trg[:, 1:].tolist():
        out.append(row[: row.index(eos) + 1] if eos in row else row)
    return out

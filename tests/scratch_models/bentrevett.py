"""The Transformer of bentrevett/pytorch-seq2seq, notebook "6 - Attention is All You Need.ipynb"
(legacy/ since commit 325a9d2, 2024-01-20; identical cells at 7faa64a), re-typed module for module: the
same classes, attribute names and operations in the same order, so attnscope meets the code its
users run. Only the notebook's comments, torchtext fields and training loop are left out.

Its attention layer returns its weights (`MultiHeadAttentionLayer.forward -> (x, attention)`); the
decoder layer calls cross-attention `encoder_attention`; `translate_sentence` re-runs the decoder on
the whole prefix at every step, and returns the last layer's cross-attention.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn


class Encoder(nn.Module):
    def __init__(self, input_dim: int, hid_dim: int, n_layers: int, n_heads: int, pf_dim: int, dropout: float,
                 device: torch.device, max_length: int = 100) -> None:
        super().__init__()
        self.device = device
        self.tok_embedding = nn.Embedding(input_dim, hid_dim)
        self.pos_embedding = nn.Embedding(max_length, hid_dim)
        self.layers = nn.ModuleList([EncoderLayer(hid_dim, n_heads, pf_dim, dropout, device) for _ in range(n_layers)])
        self.dropout = nn.Dropout(dropout)
        self.scale = torch.sqrt(torch.FloatTensor([hid_dim])).to(device)

    def forward(self, src: Tensor, src_mask: Tensor) -> Tensor:
        batch_size = src.shape[0]
        src_len = src.shape[1]
        pos = torch.arange(0, src_len).unsqueeze(0).repeat(batch_size, 1).to(self.device)
        src = self.dropout((self.tok_embedding(src) * self.scale) + self.pos_embedding(pos))
        for layer in self.layers:
            src = layer(src, src_mask)
        return src


class EncoderLayer(nn.Module):
    def __init__(self, hid_dim: int, n_heads: int, pf_dim: int, dropout: float, device: torch.device) -> None:
        super().__init__()
        self.self_attn_layer_norm = nn.LayerNorm(hid_dim)
        self.ff_layer_norm = nn.LayerNorm(hid_dim)
        self.self_attention = MultiHeadAttentionLayer(hid_dim, n_heads, dropout, device)
        self.positionwise_feedforward = PositionwiseFeedforwardLayer(hid_dim, pf_dim, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, src: Tensor, src_mask: Tensor) -> Tensor:
        _src, _ = self.self_attention(src, src, src, src_mask)
        src = self.self_attn_layer_norm(src + self.dropout(_src))
        _src = self.positionwise_feedforward(src)
        src = self.ff_layer_norm(src + self.dropout(_src))
        return src


class MultiHeadAttentionLayer(nn.Module):
    def __init__(self, hid_dim: int, n_heads: int, dropout: float, device: torch.device) -> None:
        super().__init__()
        assert hid_dim % n_heads == 0
        self.hid_dim = hid_dim
        self.n_heads = n_heads
        self.head_dim = hid_dim // n_heads
        self.fc_q = nn.Linear(hid_dim, hid_dim)
        self.fc_k = nn.Linear(hid_dim, hid_dim)
        self.fc_v = nn.Linear(hid_dim, hid_dim)
        self.fc_o = nn.Linear(hid_dim, hid_dim)
        self.dropout = nn.Dropout(dropout)
        self.scale = torch.sqrt(torch.FloatTensor([self.head_dim])).to(device)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        batch_size = query.shape[0]
        Q = self.fc_q(query)
        K = self.fc_k(key)
        V = self.fc_v(value)
        Q = Q.view(batch_size, -1, self.n_heads, self.head_dim).permute(0, 2, 1, 3)
        K = K.view(batch_size, -1, self.n_heads, self.head_dim).permute(0, 2, 1, 3)
        V = V.view(batch_size, -1, self.n_heads, self.head_dim).permute(0, 2, 1, 3)
        energy = torch.matmul(Q, K.permute(0, 1, 3, 2)) / self.scale
        if mask is not None:
            energy = energy.masked_fill(mask == 0, -1e10)
        attention = torch.softmax(energy, dim=-1)
        x = torch.matmul(self.dropout(attention), V)
        x = x.permute(0, 2, 1, 3).contiguous()
        x = x.view(batch_size, -1, self.hid_dim)
        x = self.fc_o(x)
        return x, attention


class PositionwiseFeedforwardLayer(nn.Module):
    def __init__(self, hid_dim: int, pf_dim: int, dropout: float) -> None:
        super().__init__()
        self.fc_1 = nn.Linear(hid_dim, pf_dim)
        self.fc_2 = nn.Linear(pf_dim, hid_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        x = self.dropout(torch.relu(self.fc_1(x)))
        x = self.fc_2(x)
        return x


class Decoder(nn.Module):
    def __init__(self, output_dim: int, hid_dim: int, n_layers: int, n_heads: int, pf_dim: int, dropout: float,
                 device: torch.device, max_length: int = 100) -> None:
        super().__init__()
        self.device = device
        self.tok_embedding = nn.Embedding(output_dim, hid_dim)
        self.pos_embedding = nn.Embedding(max_length, hid_dim)
        self.layers = nn.ModuleList([DecoderLayer(hid_dim, n_heads, pf_dim, dropout, device) for _ in range(n_layers)])
        self.fc_out = nn.Linear(hid_dim, output_dim)
        self.dropout = nn.Dropout(dropout)
        self.scale = torch.sqrt(torch.FloatTensor([hid_dim])).to(device)

    def forward(self, trg: Tensor, enc_src: Tensor, trg_mask: Tensor, src_mask: Tensor) -> tuple[Tensor, Tensor]:
        batch_size = trg.shape[0]
        trg_len = trg.shape[1]
        pos = torch.arange(0, trg_len).unsqueeze(0).repeat(batch_size, 1).to(self.device)
        trg = self.dropout((self.tok_embedding(trg) * self.scale) + self.pos_embedding(pos))
        for layer in self.layers:
            trg, attention = layer(trg, enc_src, trg_mask, src_mask)
        output = self.fc_out(trg)
        return output, attention


class DecoderLayer(nn.Module):
    def __init__(self, hid_dim: int, n_heads: int, pf_dim: int, dropout: float, device: torch.device) -> None:
        super().__init__()
        self.self_attn_layer_norm = nn.LayerNorm(hid_dim)
        self.enc_attn_layer_norm = nn.LayerNorm(hid_dim)
        self.ff_layer_norm = nn.LayerNorm(hid_dim)
        self.self_attention = MultiHeadAttentionLayer(hid_dim, n_heads, dropout, device)
        self.encoder_attention = MultiHeadAttentionLayer(hid_dim, n_heads, dropout, device)
        self.positionwise_feedforward = PositionwiseFeedforwardLayer(hid_dim, pf_dim, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, trg: Tensor, enc_src: Tensor, trg_mask: Tensor, src_mask: Tensor) -> tuple[Tensor, Tensor]:
        _trg, _ = self.self_attention(trg, trg, trg, trg_mask)
        trg = self.self_attn_layer_norm(trg + self.dropout(_trg))
        _trg, attention = self.encoder_attention(trg, enc_src, enc_src, src_mask)
        trg = self.enc_attn_layer_norm(trg + self.dropout(_trg))
        _trg = self.positionwise_feedforward(trg)
        trg = self.ff_layer_norm(trg + self.dropout(_trg))
        return trg, attention


class Seq2Seq(nn.Module):
    def __init__(self, encoder: Encoder, decoder: Decoder, src_pad_idx: int, trg_pad_idx: int,
                 device: torch.device) -> None:
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.src_pad_idx = src_pad_idx
        self.trg_pad_idx = trg_pad_idx
        self.device = device

    def make_src_mask(self, src: Tensor) -> Tensor:
        src_mask = (src != self.src_pad_idx).unsqueeze(1).unsqueeze(2)
        return src_mask

    def make_trg_mask(self, trg: Tensor) -> Tensor:
        trg_pad_mask = (trg != self.trg_pad_idx).unsqueeze(1).unsqueeze(2)
        trg_len = trg.shape[1]
        trg_sub_mask = torch.tril(torch.ones((trg_len, trg_len), device=self.device)).bool()
        trg_mask = trg_pad_mask & trg_sub_mask
        return trg_mask

    def forward(self, src: Tensor, trg: Tensor) -> tuple[Tensor, Tensor]:
        src_mask = self.make_src_mask(src)
        trg_mask = self.make_trg_mask(trg)
        enc_src = self.encoder(src, src_mask)
        output, attention = self.decoder(trg, enc_src, trg_mask, src_mask)
        return output, attention


def initialize_weights(m: nn.Module) -> None:
    if hasattr(m, "weight") and m.weight.dim() > 1:
        nn.init.xavier_uniform_(m.weight.data)


def build(input_dim: int, output_dim: int, seed: int, hid_dim: int = 16, n_layers: int = 2, n_heads: int = 4,
          pf_dim: int = 32, dropout: float = 0.1, src_pad_idx: int = 1, trg_pad_idx: int = 1) -> Seq2Seq:
    """The notebook's model with tiny sizes (it uses 256 / 3 / 8 / 512), initialised as it does."""
    torch.manual_seed(seed)
    device = torch.device("cpu")
    enc = Encoder(input_dim, hid_dim, n_layers, n_heads, pf_dim, dropout, device)
    dec = Decoder(output_dim, hid_dim, n_layers, n_heads, pf_dim, dropout, device)
    model = Seq2Seq(enc, dec, src_pad_idx, trg_pad_idx, device).to(device)
    model.apply(initialize_weights)
    return model


def translate_sentence(src_indexes: list[int], sos: int, eos: int, model: Seq2Seq, device: torch.device,
                       max_len: int = 50) -> tuple[list[int], Tensor]:
    """The notebook's translate_sentence from the token ids on (its spaCy/torchtext front end is left out):
    the decoder re-runs on the whole prefix each step; returns the ids after <sos> and the last cross-attention."""
    model.eval()
    src_tensor = torch.LongTensor(src_indexes).unsqueeze(0).to(device)
    src_mask = model.make_src_mask(src_tensor)
    with torch.no_grad():
        enc_src = model.encoder(src_tensor, src_mask)
    trg_indexes = [sos]
    for _ in range(max_len):
        trg_tensor = torch.LongTensor(trg_indexes).unsqueeze(0).to(device)
        trg_mask = model.make_trg_mask(trg_tensor)
        with torch.no_grad():
            output, attention = model.decoder(trg_tensor, enc_src, trg_mask, src_mask)
        pred_token = output.argmax(2)[:, -1].item()
        trg_indexes.append(pred_token)
        if pred_token == eos:
            break
    return trg_indexes[1:], attention


def translate_sentence_vectorized(src_tensor: Tensor, sos: int, eos: int, model: Seq2Seq, device: torch.device,
                                  max_len: int = 50) -> tuple[list[list[int]], Tensor]:
    """The notebook's translate_sentence_vectorized: a padded batch decoded together; finished sentences keep
    being fed until all are done. Returns each sentence's ids after <sos> (up to and with <eos>)."""
    model.eval()
    src_mask = model.make_src_mask(src_tensor)
    with torch.no_grad():
        enc_src = model.encoder(src_tensor, src_mask)
    trg_indexes = [[sos] for _ in range(len(src_tensor))]
    translations_done = [0] * len(src_tensor)
    for _ in range(max_len):
        trg_tensor = torch.LongTensor(trg_indexes).to(device)
        trg_mask = model.make_trg_mask(trg_tensor)
        with torch.no_grad():
            output, attention = model.decoder(trg_tensor, enc_src, trg_mask, src_mask)
        pred_tokens = output.argmax(2)[:, -1]
        for i, pred_token_i in enumerate(pred_tokens):
            trg_indexes[i].append(pred_token_i)
            if pred_token_i == eos:
                translations_done[i] = 1
        if all(translations_done):
            break
    out = []
    for sentence in trg_indexes:
        ids = [int(i) for i in sentence[1:]]
        out.append(ids[: ids.index(eos) + 1] if eos in ids else ids)
    return out, attention

"""Importing a batch-first nn.Transformer seq2seq model (learned or sinusoidal positions, post- or pre-LN) is exact."""
from __future__ import annotations

import io
import math
import pickle
from pathlib import Path

import pytest
import torch
from torch import nn

from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.importers.state_dict import import_weights
from attnscope.checkpoints.importers.torch_files import is_torch_file, read_state_dict
from attnscope.engine.recording.capture import record_attention
from attnscope.model.positions import sinusoidal_table


class TutorialSeq2Seq(nn.Module):
    """Token embeddings * sqrt(d), a positional encoding, nn.Transformer, a linear generator."""

    def __init__(self, v_src: int, v_tgt: int, d: int = 16, heads: int = 4, learned: bool = False,
                 norm_first: bool = False) -> None:
        super().__init__()
        self.d = d
        self.transformer = nn.Transformer(d, heads, 2, 2, 32, dropout=0.0, batch_first=True, norm_first=norm_first)
        self.src_tok_emb = nn.Embedding(v_src, d)
        self.tgt_tok_emb = nn.Embedding(v_tgt, d)
        self.generator = nn.Linear(d, v_tgt)
        if learned:
            self.pos_embedding = nn.Embedding(40, d)
        else:
            self.register_buffer("pos_embedding", sinusoidal_table(40, d).unsqueeze(1))

    def positions(self, n: int) -> torch.Tensor:
        table = self.pos_embedding.weight if isinstance(self.pos_embedding, nn.Embedding) else self.pos_embedding[:, 0]
        return table[:n]

    def _embed(self, table: nn.Embedding, x: torch.Tensor) -> torch.Tensor:
        return table(x) * math.sqrt(self.d) + self.positions(x.shape[1])

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        causal = torch.ones(tgt.shape[1], tgt.shape[1], dtype=torch.bool).triu(1)
        h = self.transformer(self._embed(self.src_tok_emb, src), self._embed(self.tgt_tok_emb, tgt), tgt_mask=causal)
        return self.generator(h)


def vocabularies(n_src: int, n_tgt: int) -> tuple[list[str], list[str]]:
    """Token lists with attnscope's own special order (so ids need no remapping in these tests)."""
    specials = ["<pad>", "<bos>", "<eos>", "<unk>"]
    return specials + [f"s{i}" for i in range(n_src - 4)], specials + [f"t{i}" for i in range(n_tgt - 4)]


@pytest.mark.parametrize("learned,norm_first", [(False, False), (True, False), (False, True)])
def test_imported_model_matches_the_original(learned: bool, norm_first: bool) -> None:
    torch.manual_seed(0)
    original = TutorialSeq2Seq(20, 24, learned=learned, norm_first=norm_first).eval()
    buffer = io.BytesIO()
    torch.save(original.state_dict(), buffer)
    state = read_state_dict(buffer.getvalue(), "model.pt")
    imported = import_weights(state, *vocabularies(20, 24), n_heads=4, norm_first=norm_first, source_framing="eos")
    model, bundle = imported.model, imported.bundle
    src, tgt = torch.randint(4, 20, (2, 7)), torch.randint(4, 24, (2, 5))
    with torch.no_grad():
        expected = original(src, tgt)
        got = model(src, tgt)
    assert torch.allclose(got, expected, atol=1e-5)
    assert bundle.config.positional == ("learned" if learned else "sinusoidal")
    with torch.no_grad(), record_attention(original) as theirs, record_attention(model) as ours:
        original(src, tgt)
        model(src, tgt)
    assert torch.allclose(theirs.module("transformer.decoder.layers.1.multihead_attn").weights,
                          ours.module("decoder.1.cross_attn").weights, atol=1e-5)


def test_a_pickle_that_would_run_code_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (Path.touch, (marker,))

    with pytest.raises(CheckpointError, match="cannot be loaded safely|can be loaded safely"):
        read_state_dict(pickle.dumps({"w": Evil()}), "evil.pt")
    assert not marker.exists()


def test_files_without_a_transformer_are_refused() -> None:
    buffer = io.BytesIO()
    torch.save({"linear.weight": torch.zeros(2, 2)}, buffer)
    state = read_state_dict(buffer.getvalue(), "x.pt")
    with pytest.raises(CheckpointError, match="looks like 1 tensors such as linear.weight; attnscope imports nn.Transformer"):
        import_weights(state, *vocabularies(10, 10), n_heads=2)
    with pytest.raises(CheckpointError, match="x.pt is not a PyTorch checkpoint .*torch.save"):
        read_state_dict(b"garbage", "x.pt")
    with pytest.raises(CheckpointError, match="x.pt is not a PyTorch weights file that can be loaded safely"):
        read_state_dict(b"PK\x03\x04 a cut zip archive", "x.pt")


def test_what_torch_save_writes_is_recognised_and_nothing_else() -> None:
    for zipped in (True, False):  # the zip archive of torch >= 1.6 and the legacy pickle stream
        buffer = io.BytesIO()
        torch.save({"w": torch.zeros(1)}, buffer, _use_new_zipfile_serialization=zipped)
        assert is_torch_file(buffer.getvalue())
    assert not is_torch_file(b"") and not is_torch_file(bytes(range(256)))
    assert not is_torch_file(b"\x00\x01 not a checkpoint at all")


def test_wrong_head_count_is_explained() -> None:
    state = TutorialSeq2Seq(20, 24).state_dict()
    with pytest.raises(CheckpointError, match="not divisible"):
        import_weights(state, *vocabularies(20, 24), n_heads=5)

"""One-file checkpoints: exact round trips and one clear sentence for every malformed file."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from attnscope.checkpoints import checkpoint
from attnscope.checkpoints.checkpoint import Bundle, CheckpointError, atomic_write
from attnscope.engine.decoding.decode import greedy
from attnscope.model.config import ModelConfig
from attnscope.model.tokenization import TextCodec, train_word_level
from attnscope.model.transformer import Transformer
from tests.support import tensors_and_meta


@pytest.fixture
def saved(tmp_path: Path) -> tuple[Path, Transformer, Bundle]:
    codec = TextCodec(train_word_level(["a b c d e f g"]))
    config = ModelConfig(src_vocab_size=codec.vocab_size, tgt_vocab_size=codec.vocab_size, d_model=16, n_heads=4,
                         d_ff=32, n_encoder_layers=1, n_decoder_layers=2, share_embeddings=True, max_len=20)
    torch.manual_seed(0)
    model = Transformer(config).eval()
    bundle = Bundle(config, codec, codec, "en", "de", {"steps": 3})
    return checkpoint.save(model, bundle, tmp_path / "m.safetensors"), model, bundle


def test_round_trip_is_exact_and_keeps_ties(saved) -> None:
    path, model, bundle = saved
    loaded, b = checkpoint.load(path)
    for (k, v), (k2, v2) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert k == k2 and torch.equal(v, v2)
    assert loaded.generator.weight is loaded.tgt_embed.weight is loaded.src_embed.weight
    assert b.config == bundle.config and b.summary == {"steps": 3} and b.src_lang == "en"


@pytest.mark.parametrize("tied", [True, False])
def test_the_output_layer_loads_column_major_and_decodes_as_the_saved_model(tied: bool, tmp_path: Path) -> None:
    """The output layer's weight (the shared embedding's, when tied) comes back column-major with the same values
    and ties, decodes the saved model's tokens with its attention (the products summed in another order: close),
    and is saved back as the same bytes."""
    codec = TextCodec(train_word_level(["a b c d e f g"]))
    config = ModelConfig(src_vocab_size=codec.vocab_size, tgt_vocab_size=codec.vocab_size, d_model=16, n_heads=4,
                         d_ff=32, n_encoder_layers=1, n_decoder_layers=2, share_embeddings=tied, tie_embeddings=tied,
                         max_len=20)
    torch.manual_seed(0)
    model = Transformer(config).eval()
    path = checkpoint.save(model, Bundle(config, codec, codec, "en", "de"), tmp_path / "m.safetensors")
    loaded, _ = checkpoint.load(path)
    weight = loaded.generator.weight
    assert weight.stride() == (1, codec.vocab_size) and torch.equal(weight, model.generator.weight)
    assert (weight is loaded.tgt_embed.weight is loaded.src_embed.weight) == tied
    ours, theirs = (greedy(m, [4, 5, 6, 7, 3], max_len=12) for m in (loaded, model))
    assert ours.ids == theirs.ids and torch.allclose(ours.cross, theirs.cross, atol=1e-6)
    assert [s.log_prob for s in ours.steps] == pytest.approx([s.log_prob for s in theirs.steps], abs=1e-5)
    again = checkpoint.save(loaded, Bundle(config, codec, codec, "en", "de"), tmp_path / "again.safetensors")
    assert again.read_bytes() == path.read_bytes()


def test_one_codec_serves_both_sides_and_every_reader_of_a_file(saved, tmp_path: Path) -> None:
    """A joint vocabulary is parsed once (~3 MB a codec in the app), while another vocabulary stays its own."""
    path, model, bundle = saved
    _, loaded = checkpoint.load(path)
    listed, _ = checkpoint.read_bundle(path)
    assert loaded.src_codec is loaded.tgt_codec is listed.src_codec is listed.tgt_codec
    assert loaded.tgt_codec.encode("c a b") == bundle.tgt_codec.encode("c a b")
    other = TextCodec(train_word_level(["h i j k l m n"]))  # as many tokens, other words
    two = checkpoint.save(model, Bundle(bundle.config, bundle.src_codec, other, "en", "de"), tmp_path / "two.safetensors")
    _, b = checkpoint.load(two)
    assert b.src_codec is not b.tgt_codec and b.tgt_codec.to_json() == other.to_json()


def test_half_precision_is_close(saved, tmp_path: Path) -> None:
    _, model, bundle = saved
    path = checkpoint.save(model, bundle, tmp_path / "half.safetensors", half=True)
    loaded, _ = checkpoint.load(path)
    assert torch.allclose(loaded.tgt_embed.weight, model.tgt_embed.weight, atol=1e-2)
    assert next(iter(tensors_and_meta(path)[0].values())).dtype == torch.float16


def rewrite(path: Path, tensors=None, meta=None) -> Path:
    t, m = tensors_and_meta(path)
    save_file(tensors if tensors is not None else t, str(path), metadata=meta if meta is not None else m)
    return path


def with_config(path: Path, **config) -> Path:
    """The file with its config replaced by `config` (JSON)."""
    return rewrite(path, meta=tensors_and_meta(path)[1] | {"config": json.dumps(config)})


def with_tensors(path: Path, change) -> Path:
    """The file with its tensors passed through `change`."""
    return rewrite(path, tensors=change(tensors_and_meta(path)[0]))


def unrecorded(path: Path) -> Path:
    """The file as attnscope wrote it before save() recorded whether its weights are finite."""
    return rewrite(path, meta={k: v for k, v in tensors_and_meta(path)[1].items() if k != checkpoint.FINITE_KEY})


def nan_bias(path: Path) -> Path:
    return with_tensors(path, lambda t: t | {"generator.bias": torch.full_like(t["generator.bias"], float("nan"))})


def test_save_records_the_finite_check_and_load_trusts_only_what_it_may(saved, monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    path, model, bundle = saved
    assert tensors_and_meta(path)[1][checkpoint.FINITE_KEY] == "true"
    scanned = []
    real = checkpoint.first_not_finite
    monkeypatch.setattr(checkpoint, "first_not_finite", lambda t: scanned.append(1) or real(t))
    checkpoint.load(path)
    assert not scanned  # recorded at save: loading reads each weight once, and does not scan it again
    checkpoint.load(unrecorded(path))
    assert scanned  # a file saved before the record is scanned
    with pytest.raises(CheckpointError, match="tensor generator.bias contains NaN"):
        checkpoint.load(nan_bias(path), check_finite=True)  # a file from outside (an upload) is scanned whatever it says
    with torch.no_grad():
        model.generator.bias[0] = float("inf")
    broken = checkpoint.save(model, bundle, tmp_path / "inf.safetensors")
    assert tensors_and_meta(broken)[1][checkpoint.FINITE_KEY] == "false"
    with pytest.raises(CheckpointError, match="NaN or infinite values .recorded when it was saved"):
        checkpoint.load(broken)


@pytest.mark.parametrize("on_meta", [False, True])
@pytest.mark.parametrize("variant", [
    {}, {"tie_embeddings": False, "final_norm": True}, {"positional": "learned", "separate_positions": True},
    {"sinusoid": "halves", "suppressed": (1,)}, {"sinusoid": "fairseq", "position_offset": 2, "d_model": 18, "n_heads": 2},
    {"positional": "relative", "relative_buckets": 8, "relative_max_distance": 16, "layer_norm": "rms", "norm": "pre",
     "ffn": "gated", "activation": "gelu_tanh", "d_head": 12, "qkv_bias": False, "out_bias": False, "ffn_bias": False,
     "scale_scores": False, "tie_embeddings": False},  # T5 v1.1: a file of it loads, as every other config's
])
def test_assembled_models_equal_models_filled_in_place(on_meta: bool, variant: dict) -> None:
    """Assigning a file's tensors (on the meta device or not) builds the model copying them into a built one did."""
    config = ModelConfig(**{"src_vocab_size": 40, "tgt_vocab_size": 40, "d_model": 16, "n_heads": 2, "d_ff": 24,
                            "n_encoder_layers": 1, "n_decoder_layers": 2, "share_embeddings": True, **variant})
    torch.manual_seed(0)
    reference = Transformer(config).eval()
    tensors = {k: v.clone() for k, v in checkpoint.unique_state(reference).items()}
    built = checkpoint.assemble(config, tensors, on_meta=on_meta).eval()
    assert list(built.state_dict()) == list(reference.state_dict())
    for (_, a), (_, b) in zip(reference.state_dict().items(), built.state_dict().items()):
        assert torch.equal(a, b) and b.device.type == "cpu"
    for (_, a), (_, b) in zip(reference.named_buffers(), built.named_buffers()):
        assert torch.equal(a, b)
    assert (built.generator.weight is built.tgt_embed.weight) == config.tie_embeddings
    assert all(p.requires_grad for p in built.parameters())
    src, tgt = torch.tensor([[5, 6, 7, 2]]), torch.tensor([[1, 8, 9]])
    with torch.no_grad():
        assert torch.equal(reference(src, tgt), built(src, tgt))


@pytest.mark.parametrize("damage,message", [
    (lambda p: p.unlink(), "does not exist"),
    (lambda p: p.write_text("hello"), "is not a safetensors file"),
    (lambda p: p.write_bytes(p.read_bytes()[:-500]), "safetensors file|cannot be read"),
    (lambda p: rewrite(p, meta={}), "not an attnscope checkpoint"),
    (lambda p: rewrite(p, meta=tensors_and_meta(p)[1] | {"format_version": "99"}), "format version '99'"),
    (lambda p: with_tensors(p, lambda t: {k: v for k, v in t.items() if k != "generator.bias"}),
     "missing tensor generator.bias"),
    (lambda p: with_tensors(p, lambda t: t | {"extra": torch.zeros(1)}), "unexpected tensor extra"),
    (lambda p: with_tensors(p, lambda t: t | {"generator.bias": torch.zeros(3)}), "generator.bias has shape"),
    (lambda p: rewrite(p, meta=tensors_and_meta(p)[1] | {"config": "{"}), "not valid JSON"),
    (lambda p: with_config(p, src_vocab_size="x", tgt_vocab_size=1), "must be int"),
    (lambda p: rewrite(p, meta=tensors_and_meta(p)[1] | {"src_tokenizer": "{bad"}), "does not parse"),
    (lambda p: with_config(p, src_vocab_size=5000, tgt_vocab_size=5000, share_embeddings=True),
     "tokens but the model expects"),
    (lambda p: with_config(p, src_vocab_size=11, tgt_vocab_size=11, d_model=10**6), "GB of memory as float32"),
    (lambda p: unrecorded(nan_bias(p)), "NaN"),
])
def test_malformed_files_give_one_clear_error(saved, damage, message: str) -> None:
    path = saved[0]
    damage(path)
    with pytest.raises(CheckpointError, match=message):
        checkpoint.load(path)


def test_interrupted_write_keeps_the_old_file(saved) -> None:
    path = saved[0]
    before = path.read_bytes()

    def crash(tmp: str) -> None:
        Path(tmp).write_bytes(b"half a file")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        atomic_write(path, crash)
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == ["m.safetensors"]


def test_save_failure_is_a_clear_message(saved, tmp_path: Path) -> None:
    _, model, bundle = saved
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(CheckpointError, match="could not save checkpoint"):
        checkpoint.save(model, bundle, blocker / "sub" / "m.safetensors")


def test_loading_does_not_pull_in_the_compiler_stack(saved) -> None:
    """The shape check is arithmetic: loading must not import torch._dynamo (about 1.2 s, 65 MB)."""
    import subprocess
    import sys
    code = ("import sys; from attnscope.checkpoints import checkpoint; "
            f"checkpoint.load({str(saved[0])!r}); print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr


def test_fp16_storage_that_would_make_weights_infinite_writes_nothing(saved, tmp_path: Path) -> None:
    """Every route that stores fp16 (import --half, average --half, a run with half) is refused at the writing, not
    when the written file is loaded."""
    _, model, bundle = saved
    with torch.no_grad():
        model.generator.bias[:2] = 1e5  # finite in fp32, infinite in fp16
    out = tmp_path / "half.safetensors"
    with pytest.raises(CheckpointError, match=r"fp16 storage would make 2 weights infinite \(beyond ±65,504, first in "
                                              r"generator.bias\)"):
        checkpoint.save(model, bundle, out, half=True)
    assert not out.exists() and not list(tmp_path.glob("*.tmp"))
    assert checkpoint.load(checkpoint.save(model, bundle, out))[0] is not None  # fp32 keeps them

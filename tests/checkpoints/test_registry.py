"""Where checkpoints live: safe names, validated uploads, read-only shipped files."""
from __future__ import annotations

from pathlib import Path

import pytest

from attnscope.checkpoints import registry
from attnscope.checkpoints.checkpoint import CheckpointError
from tests.engine_fixtures import tiny_checkpoint  # noqa: F401 (fixture)


@pytest.fixture
def shipped(tmp_path: Path, tiny_checkpoint: Path, monkeypatch: pytest.MonkeyPatch) -> Path:  # noqa: F811
    """A shipped folder holding one checkpoint, 'default'."""
    folder = tmp_path / "shipped"
    folder.mkdir()
    (folder / "default.safetensors").write_bytes(tiny_checkpoint.read_bytes())
    monkeypatch.setenv("ATTNSCOPE_CHECKPOINTS", str(folder))
    return folder


@pytest.mark.parametrize("filename,stem", [
    ("model.safetensors", "model"),
    ("../../etc/passwd.safetensors", "passwd"),
    ("/abs/path/x.safetensors", "x"),
    ("..\\..\\windows\\y.safetensors", "y"),
    ("My Model (v2)!.safetensors", "My-Model-v2"),
    ("ünïcode.safetensors", "n-code"),
    ("weights.pt", "weights"),
    ("a" * 300 + ".safetensors", "a" * 80),
])
def test_safe_name_keeps_only_a_harmless_stem(filename: str, stem: str) -> None:
    assert registry.safe_name(filename) == stem


@pytest.mark.parametrize("filename", ["...safetensors", "!!!.safetensors", "../", ""])
def test_a_name_without_usable_characters_is_refused(filename: str) -> None:
    with pytest.raises(CheckpointError, match="no usable characters"):
        registry.safe_name(filename)


def test_upload_is_validated_then_stored_under_a_safe_name(shipped: Path, tmp_path: Path) -> None:
    data = (shipped / "default.safetensors").read_bytes()
    tmp = registry.validate_upload(data, "../mine.safetensors")
    target = registry.store(tmp, "../mine.safetensors", tmp_path / "user", taken=set())
    assert target == (tmp_path / "user" / "mine.safetensors").resolve()
    assert target.read_bytes() == data and not tmp.exists()
    entries, problems = registry.scan(tmp_path / "user", "user")
    assert [e.name for e in entries] == ["mine"] and not problems


@pytest.mark.parametrize("name", ["default.safetensors", "../shipped/default.safetensors", "taken.safetensors"])
def test_shipped_or_taken_names_are_never_overwritten(shipped: Path, tmp_path: Path, name: str) -> None:
    before = (shipped / "default.safetensors").read_bytes()
    tmp = registry.validate_upload(before, "x.safetensors")
    with pytest.raises(CheckpointError, match="already exists"):
        registry.store(tmp, name, shipped, taken={"taken"})
    assert (shipped / "default.safetensors").read_bytes() == before


def test_a_rejected_upload_leaves_no_temporary_file(shipped: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    with pytest.raises(CheckpointError, match="bad.safetensors is not a safetensors file"):
        registry.validate_upload(b"garbage" * 10, "bad.safetensors")
    assert not list(tmp_path.glob("*.safetensors"))


def test_size_limit_is_checked_before_anything_is_written(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "MAX_UPLOAD_BYTES", 10)
    with pytest.raises(CheckpointError, match="the limit is"):
        registry.validate_upload(b"x" * 11, "big.safetensors")


def test_shipped_checkpoints_cannot_be_deleted_but_user_ones_can(shipped: Path, tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="read-only|cannot be deleted"):
        registry.delete(shipped / "default.safetensors")
    assert (shipped / "default.safetensors").exists()
    mine = tmp_path / "mine.safetensors"
    mine.write_bytes((shipped / "default.safetensors").read_bytes())
    registry.delete(mine)
    assert not mine.exists()


def test_scan_lists_valid_files_and_explains_the_others(shipped: Path) -> None:
    (shipped / "broken.safetensors").write_bytes(b"nope")
    entries, problems = registry.scan(shipped, "shipped")
    assert [e.name for e in entries] == ["default"] and entries[0].parameters > 0
    assert len(entries[0].sha256()) == 64
    assert len(problems) == 1 and "broken.safetensors is not a safetensors file" in problems[0]

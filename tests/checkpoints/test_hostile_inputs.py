"""Malformed and hostile inputs through every import route: each is refused in one sentence that names the
user's input, allocates nothing it cannot afford, reads nothing outside its folder and leaves nothing behind."""
from __future__ import annotations

import tempfile
import zipfile
from pathlib import Path

import pytest

import attnscope
from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.importers.uploads import import_uploaded
from tests.checkpoints import hf_fixtures


@pytest.fixture(scope="module")
def marian(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return hf_fixtures.marian(tmp_path_factory.mktemp("opus-mt-en-de"))


@pytest.fixture
def temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary folder of this test's own, so that what an import leaves there can be counted."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def _zip(folder: Path, archive: Path, inner: str = "opus-mt-en-de/") -> Path:
    with zipfile.ZipFile(archive, "w") as z:
        for file in folder.iterdir():
            z.write(file, f"{inner}{file.name}")
    return archive


def test_zip_imports_and_uploads_leave_nothing_in_the_temp_folder(marian: Path, tmp_path: Path, temp_root: Path) -> None:
    archive = _zip(marian, tmp_path / "opus.zip")
    tr = attnscope.import_model(archive)
    import_uploaded([("opus.zip", archive.read_bytes())])
    import_uploaded([(f.name, f.read_bytes()) for f in marian.iterdir()])
    broken = _zip(marian, tmp_path / "broken.zip")
    with zipfile.ZipFile(broken, "a") as z:
        z.writestr("opus-mt-en-de/config.json", "{not json")
    for route in (lambda: attnscope.import_model(broken), lambda: import_uploaded([("broken.zip", broken.read_bytes())]),
                  lambda: import_uploaded([("config.json", b"{}"), ("vocab.json", b"[]")])):
        with pytest.raises(CheckpointError):
            route()
    assert list(temp_root.iterdir()) == []
    assert tr.translate("A man rides a red bike.", max_len=8).target_tokens  # read in full before its folder went


def test_empty_and_nested_zips_are_named_by_the_users_file(tmp_path: Path, marian: Path, temp_root: Path) -> None:
    empty = tmp_path / "empty.zip"
    zipfile.ZipFile(empty, "w").close()
    nested = tmp_path / "nested.zip"
    with zipfile.ZipFile(nested, "w") as z:
        z.writestr("inner.zip", _zip(marian, tmp_path / "inner.zip").read_bytes())
    for archive in (empty, nested):
        with pytest.raises(CheckpointError, match=archive.name) as err:
            attnscope.import_model(archive)
        assert "attnscope-import" not in str(err.value)


def test_files_zipped_without_their_folder_take_the_zips_name(marian: Path, tmp_path: Path, temp_root: Path) -> None:
    tr = attnscope.import_model(_zip(marian, tmp_path / "opus-flat.zip", inner=""))
    assert tr.bundle.summary["name"] == "opus-flat"


def test_an_archive_is_refused_before_unpacking_when_it_unpacks_to_more_than_the_disk_holds(
        tmp_path: Path, temp_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from collections import namedtuple

    import attnscope.checkpoints.importers.hf_files as hf_files
    archive = tmp_path / "bomb.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("m/model.safetensors", b"\0" * 2**22)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(hf_files.shutil, "disk_usage", lambda _: usage(2**30, 2**30, 2**20))
    with pytest.raises(CheckpointError, match=r"bomb.zip unpacks to 4 MB, more than the free space in the temporary "
                       r"folder \(1 MB\)"):
        attnscope.import_model(archive)
    assert list(temp_root.iterdir()) == []

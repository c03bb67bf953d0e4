"""The thread policy: one intra-op thread unless ATTNSCOPE_THREADS says otherwise, applied where work starts."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

import attnscope
from attnscope.__main__ import main
from attnscope.model.device import THREADS_VARIABLE, apply_thread_policy, policy_threads


@pytest.fixture
def two_threads() -> Iterator[None]:
    """Start each test from torch's two threads and leave the process as it found it."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize(("value", "expected"), [(None, 1), ("", 1), ("1", 1), ("3", 3), ("0", None), (" 2 ", 2)])
def test_policy_reads_the_variable(value: str | None, expected: int | None) -> None:
    assert policy_threads({} if value is None else {THREADS_VARIABLE: value}) == expected


def test_a_bad_value_warns_and_keeps_one_thread() -> None:
    with pytest.warns(UserWarning, match="not a whole number"):
        assert policy_threads({THREADS_VARIABLE: "many"}) == 1


def test_apply_sets_and_zero_leaves_torch_alone(two_threads: None) -> None:
    assert apply_thread_policy({THREADS_VARIABLE: "0"}) == 2
    assert apply_thread_policy({}) == 1


def test_load_decodes_with_one_thread(two_threads: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(THREADS_VARIABLE, raising=False)
    attnscope.load()
    assert torch.get_num_threads() == 1


def test_the_variable_reaches_load(two_threads: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(THREADS_VARIABLE, "0")
    attnscope.load()
    assert torch.get_num_threads() == 2


def test_cli_translate_uses_the_policy(two_threads: None, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(THREADS_VARIABLE, raising=False)
    assert main(["translate", "A dog runs."]) == 0
    assert capsys.readouterr().out.strip()
    assert torch.get_num_threads() == 1

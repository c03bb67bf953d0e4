"""ruff over the whole repository, with the configuration in pyproject.toml."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support import CEILING, ROOT


def ruff(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=CEILING)


def test_the_repository_is_ruff_clean() -> None:
    result = ruff(".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_reports_a_broken_rule(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "bad.py").write_text("import os\n")  # F401: imported but unused
    result = ruff(".", cwd=tmp_path)
    assert result.returncode == 1 and "F401" in result.stdout, result.stdout + result.stderr


def test_ruff_reports_a_lambda_assignment(tmp_path: Path) -> None:
    """E731 is enforced: a function gets a name with def (the traceback and the type hints say what it is)."""
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "bad.py").write_text("square = lambda x: x * x\n")
    result = ruff(".", cwd=tmp_path)
    assert result.returncode == 1 and "E731" in result.stdout, result.stdout + result.stderr

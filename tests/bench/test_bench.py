"""The benchmark runs end to end in its tiny mode (numbers are not checked: benchmarks are not tests)."""
from __future__ import annotations

import json
from pathlib import Path

from attnscope.cli.bench import SECTIONS, main


def test_bench_tiny_mode_writes_a_full_report(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("ATTNSCOPE_DATA", str(tmp_path / "no-data"))
    out = tmp_path / "report.json"
    main(["--tiny", "--out", str(out), "--skip", "memory", "--skip", "app", "--skip", "app-memory"])
    report = json.loads(out.read_text())
    assert set(SECTIONS) - {"memory", "app", "app-memory"} <= set(report), "every section --only accepts runs"
    assert all(row["identical output"] for row in report["decoding"])
    assert report["training"][0]["ratio"] > 0
    assert "missing corpus file" in report["quality"][0]["error"]
    peer = report["peer"]  # a Marian model of Hugging Face's own classes, beside its generate()
    assert all(row["tokens identical"] for row in peer[1:]) and len(peer) == 5

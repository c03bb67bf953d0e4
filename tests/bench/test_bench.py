"""The benchmark runs end to end in its tiny mode (numbers are not checked: benchmarks are not tests)."""
from __future__ import annotations

import json
from pathlib import Path

from attnscope.cli.bench import SECTIONS, main


def test_bench_tiny_mode_writes_a_full_report(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("ATTNSCOPE_DATA", str(tmp_path / "no-data"))
    out = tmp_path / "report.json"
    main(["--tiny", "--out", str(out), "--skip", "memory", "--skip", "app", "--skip", "app-memory", "--skip", "peer-t5",
          "--skip", "explorer"])
    report = json.loads(out.read_text())
    assert set(SECTIONS) - {"memory", "app", "app-memory", "peer-t5", "explorer"} <= set(report), "every section runs"
    assert all(row["identical output"] for row in report["decoding"])
    assert report["big"][0]["tokens identical"]  # the imported mBART's output ids are generate's
    assert report["training"][0]["ratio"] > 0
    assert "missing corpus file" in report["quality"][0]["error"]
    peer = report["peer"]  # a Marian model of Hugging Face's own classes, beside its generate()
    assert all(row["tokens identical"] for row in peer[1:]) and len(peer) == 5


def test_bench_t5_beside_generate_gives_identical_tokens(tmp_path: Path) -> None:
    """Section peer-t5 (tiny): a T5 of Hugging Face's own classes with a T5 tokenizer, imported with its en -> de task,
    beside generate(): the same task prefix read on both sides, outputs run to their length, tokens identical."""
    out = tmp_path / "report.json"
    main(["--tiny", "--out", str(out), "--only", "peer-t5"])
    rows = json.loads(out.read_text())["peer-t5"]
    assert rows[0]["task prefix (ours, HF)"] == ["translate English to German: "] * 2 and len(rows) == 5
    assert all(row["tokens identical"] and row["output tokens"] == int(row["what"].split(", ")[1].split()[0])
               for row in rows[1:])

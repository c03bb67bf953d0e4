"""`python -m attnscope evaluate`: one JSON line per split and beam, and the same figures as a Markdown table."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from attnscope.cli.evaluate import main
from tests.support import TOY_CHECKPOINT


def test_every_split_and_beam_is_scored_and_tabled(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for split, lines in (("val", ["a b c", "d e f g"]), ("test_2016_flickr", ["h i j"])):
        with gzip.open(tmp_path / f"{split}.en.gz", "wt", encoding="utf-8") as f:  # the toy model reverses en -> en
            f.write("\n".join(lines) + "\n")
    main(["--checkpoint", str(TOY_CHECKPOINT), "--data-dir", str(tmp_path), "--split", "val",
          "--split", "test_2016_flickr", "--beam", "1", "--beam", "2", "--markdown", "--device", "cpu"])
    out = capsys.readouterr().out.splitlines()
    results = [json.loads(line) for line in out if line.startswith("{")]
    assert [(r["split"], r["beam"], r["sentences"]) for r in results] == [
        ("val", 1, 2), ("val", 2, 2), ("test_2016_flickr", 1, 1), ("test_2016_flickr", 2, 1)]
    table = [line for line in out if line.startswith("|")]
    assert len(table) == 2 + len(results)
    for r, row in zip(results, table[2:]):
        assert row.split(" | ")[:5] == [f"| {r['split']}", str(r["beam"]), f"{r['bleu']:.2f}", f"{r['bleu_lc']:.2f}",
                                        f"{r['chrf']:.2f}"]

"""`python -m attnscope`: translate prints the translation, writes JSON and NPZ, fails in one line; every command
answers --help, and translating imports no training code."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import attnscope
from attnscope.__main__ import main
from attnscope.engine.recording.record_files import produced_tokens, record_meta
from attnscope.records.attention import AttentionRecord
from tests.engine_fixtures import tiny_checkpoint  # noqa: F401 (fixture)
from tests.support import CEILING


def test_translate_prints_and_writes_json_and_npz(tiny_checkpoint: Path, tmp_path: Path,  # noqa: F811 (fixture)
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out_json, out_npz = tmp_path / "out.json", tmp_path / "out.npz"
    code = main(["translate", "a b c d", "--checkpoint", str(tiny_checkpoint), "--json", str(out_json),
                 "--npz", str(out_npz)])
    printed = capsys.readouterr()
    assert code == 0
    expected = attnscope.load(tiny_checkpoint).translate("a b c d")
    assert printed.out == expected.text + "\n"
    assert printed.err == ""

    payload = json.loads(out_json.read_text())
    assert payload["translation"] == expected.text
    assert payload["source_tokens"] == list(expected.source_tokens)
    assert payload["target_tokens"] == list(expected.target_tokens)
    assert payload["source_tokens"][-1] == "<eos>" and payload["target_tokens"][0] == "<bos>"
    assert payload["meta"] == {"checkpoint": "tiny", "sentence": "a b c d", "beam": 1, "max_len": None, "rules": "attnscope"}
    assert [s["token"] for s in payload["steps"]] == list(expected.output_tokens)
    assert [s["step"] for s in payload["steps"]] == list(range(len(expected.steps)))
    for step, want in zip(payload["steps"], expected.steps):
        assert step["token_id"] == want.token_id
        assert step["prob"] == pytest.approx(want.prob, abs=1e-6)
        assert step["top_k"][0][0] == want.top_k[0][0]
    for kind in ("encoder", "decoder", "cross"):
        np.testing.assert_allclose(np.asarray(payload[kind]), expected.attention.array(kind), atol=1e-6)

    record = AttentionRecord.from_npz(out_npz.read_bytes())
    assert record.source_tokens == expected.source_tokens and record.target_tokens == expected.target_tokens
    for kind in ("encoder", "decoder", "cross"):
        np.testing.assert_array_equal(record.array(kind), expected.attention.array(kind))
    meta = record_meta(out_npz.read_bytes())  # what an opened record labels its cross rows by, as the live page
    assert produced_tokens(record, meta) == expected.output_tokens == produced_tokens(record, record_meta(out_json.read_bytes()))


def test_rules_option_picks_the_models_or_attnscopes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from attnscope.checkpoints.decoding_rules import KEY, opennmt_defaults
    from tests.engine_fixtures import tiny_translator

    tr = tiny_translator(0)
    with torch.no_grad():
        tr.model.generator.bias[tr.model.config.eos_id] -= 1e4  # never ends: the length rule decides
    tr.bundle.summary[KEY] = opennmt_defaults().to_dict()
    path, out_json = tr.save(tmp_path / "onmt.safetensors"), tmp_path / "out.json"
    n = len(tr.source("a b c")[0])
    assert main(["translate", "a b c", "--checkpoint", str(path), "--json", str(out_json)]) == 0
    assert capsys.readouterr().err.startswith("note: Decoding follows OpenNMT-py defaults: at most 1.25 x the source + 5")
    payload = json.loads(out_json.read_text())
    assert len(payload["steps"]) == int(min(250, 1.25 * n + 5)) and payload["meta"]["rules"] == "OpenNMT-py defaults"
    assert main(["translate", "a b c", "--checkpoint", str(path), "--rules", "attnscope", "--json", str(out_json)]) == 0
    assert capsys.readouterr().err == "" and len(json.loads(out_json.read_text())["steps"]) == 2 * n + 10
    with pytest.raises(SystemExit) as refused:  # argparse names the choices in one line
        main(["translate", "a b c", "--checkpoint", str(path), "--rules", "fairseq"])
    assert refused.value.code == 2 and "invalid choice: 'fairseq'" in capsys.readouterr().err


def test_beam_and_max_len_options(tiny_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811 (fixture)
    out_json = tmp_path / "beam.json"
    assert main(["translate", "l k j", "--checkpoint", str(tiny_checkpoint), "--beam", "3", "--max-len", "6",
                 "--json", str(out_json)]) == 0
    expected = attnscope.load(tiny_checkpoint).translate("l k j", beam_size=3, max_len=6)
    assert capsys.readouterr().out == expected.text + "\n"
    payload = json.loads(out_json.read_text())
    assert payload["meta"]["beam"] == 3 and payload["meta"]["max_len"] == 6
    assert len(payload["steps"]) == len(expected.target_ids) <= 6


def test_notes_go_to_stderr(tiny_checkpoint: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811 (fixture)
    assert main(["translate", "a zz", "--checkpoint", str(tiny_checkpoint)]) == 0
    printed = capsys.readouterr()
    assert printed.err.startswith("note: The tokenizer does not know 'zz'")
    assert "note:" not in printed.out


def test_a_bad_checkpoint_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"not a checkpoint at all")
    out_json = tmp_path / "out.json"
    assert main(["translate", "a b", "--checkpoint", str(bad), "--json", str(out_json)]) == 2
    printed = capsys.readouterr()
    assert printed.out == ""
    lines = printed.err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: bad.safetensors is not a safetensors file")
    assert "Traceback" not in printed.err
    assert not out_json.exists()
    assert main(["translate", "a b", "--checkpoint", str(tmp_path / "missing.safetensors")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_empty_text_exits_2(tiny_checkpoint: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811 (fixture)
    assert main(["translate", "   ", "--checkpoint", str(tiny_checkpoint)]) == 2
    assert capsys.readouterr().err == "error: Type a sentence to translate: the text is empty.\n"
    assert main(["translate", "a", "--checkpoint", str(tiny_checkpoint), "--beam", "0"]) == 2
    assert "Beam size must be between 1" in capsys.readouterr().err


def test_python_dash_m_entry_point(tmp_path: Path) -> None:
    """The module runs as a program and its exit code reaches the shell."""
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"garbage")
    done = subprocess.run([sys.executable, "-m", "attnscope", "translate", "a b", "--checkpoint", str(bad)],
                          capture_output=True, text=True, timeout=CEILING)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip().startswith("error: bad.safetensors") and done.stderr.count("\n") == 1


def test_translate_imports_no_training_code(tmp_path: Path) -> None:
    """Each command imports its library code when it runs, so translating pays for no training (or bench) imports."""
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"garbage")
    code = ("import sys\nfrom attnscope.__main__ import main\n"
            f"code = main(['translate', 'a b', '--checkpoint', {str(bad)!r}])\n"
            "print(code, sorted(m for m in sys.modules if m.startswith(('attnscope.training', 'attnscope.bench'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=CEILING)
    assert done.stdout.strip() == "2 []", done.stdout + done.stderr


@pytest.mark.parametrize("command", ["translate", "train", "evaluate", "average", "data", "import", "bench"])
def test_every_command_has_its_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: python -m attnscope{' ' if command != 'bench' else '.'}")


def test_no_command_lists_them_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([])
    assert exit_.value.code == 2 and "COMMAND" in capsys.readouterr().err


def test_python_dash_m_attnscope_bench_still_runs() -> None:
    done = subprocess.run([sys.executable, "-m", "attnscope.bench", "--help"], capture_output=True, text=True,
                          timeout=CEILING)
    assert done.returncode == 0 and done.stdout.startswith("usage: python -m attnscope.bench")

"""The documents a reader opens (README.md, BENCHMARKS.md, docs/*.md) keep lines of at most 120 characters, and every
relative link in them leads to a file of the checkout (and, into a Markdown file, to one of its headings).

The one exception is the README's set-up contract: its first two commands, which `.ci/run` reads verbatim (the second
line of its ```bash blocks) and a reader pastes as one line each.
"""
from __future__ import annotations

import re
from pathlib import Path

from tests.support import ROOT

WIDTH = 120
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```(\w*)$")


def documents(root: Path = ROOT) -> list[Path]:
    """README.md, BENCHMARKS.md and every Markdown file in docs/."""
    return [root / "README.md", root / "BENCHMARKS.md", *sorted((root / "docs").glob("*.md"))]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    kept, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            kept.append((number, line))
    return kept


def setup_commands(readme: str) -> list[str]:
    """The README's first two command lines in ```bash blocks: what `.ci/run` extracts (sed's line 2: command 2)."""
    lines, fenced = [], False
    for line in readme.splitlines():
        fence = FENCE.match(line)
        if fence:
            fenced = not fenced and fence[1] == "bash"
        elif fenced:
            lines.append(line)
    return lines[:2]


def long_lines(path: Path) -> list[str]:
    """Lines over WIDTH characters, as 'file:line: length'; the README's set-up commands are exempt."""
    text = path.read_text(encoding="utf-8")
    exempt = set(setup_commands(text)) if path.name == "README.md" else set()
    return [f"{path.name}:{number}: {len(line)}" for number, line in enumerate(text.splitlines(), 1)
            if len(line) > WIDTH and line not in exempt]


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped (letters, digits, _ and - kept), spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file's headings (a repeated heading gets -1, -2, ... as on GitHub)."""
    seen: dict[str, int] = {}
    found = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        if line.startswith("#"):
            base = anchor(line.lstrip("#"))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(path: Path) -> list[str]:
    """Relative links (outside code blocks) whose file does not exist, or whose #anchor names no heading there."""
    broken = []
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto: ...
            file, _, fragment = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            if not linked.exists():
                broken.append(f"{path.name}:{number}: {target} (no such file)")
            elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
                broken.append(f"{path.name}:{number}: {target} (no such heading)")
    return broken


def test_every_document_line_is_at_most_120_characters() -> None:
    assert len(documents()) > 2 and all(p.is_file() for p in documents())
    assert [line for path in documents() for line in long_lines(path)] == []


def test_every_relative_link_resolves() -> None:
    assert [link for path in documents() for link in broken_links(path)] == []


def test_the_exemption_is_the_two_commands_ci_runs() -> None:
    """Exactly two lines are exempt, and the second is the one `.ci/run` runs (it installs and runs the tests)."""
    commands = setup_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(commands) == 2 and "streamlit run app.py" in commands[0] and "python -m pytest" in commands[1]
    assert "sed -n 2p" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_the_checks_report_a_long_line_and_broken_links(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A title, here\n\nok\n")
    readme = tmp_path / "README.md"
    readme.write_text("```bash\nx\n```\n```bash\n" + "y" * 130 + "\n```\n\n" + "z" * 121 + "\n\n"
                      "[fine](docs/a.md#a-title-here) [web](https://example.org/none) [gone](docs/b.md)\n"
                      "[no heading](docs/a.md#elsewhere)\n\n```python\nrows[0](docs/c.md)\n```\n")
    (tmp_path / "BENCHMARKS.md").write_text("[back](README.md)\n")
    assert [p.name for p in documents(tmp_path)] == ["README.md", "BENCHMARKS.md", "a.md"]
    assert long_lines(readme) == ["README.md:8: 121"]  # the second set-up command (line 5) is exempt
    assert broken_links(readme) == ["README.md:10: docs/b.md (no such file)",
                                    "README.md:11: docs/a.md#elsewhere (no such heading)"]
    assert broken_links(tmp_path / "BENCHMARKS.md") == []

"""The command lines the docs teach, as text: where they are and how they are read.

Shared by tests/cli/test_cli_docs.py (each names an existing verb and settings) and
tests/cli/test_cli_docs_run.py (each runs as written). A command is every `fixedcode <verb> ...`,
`python -m fixedcode_study <verb> ...`, `python -m fixedcode_study.run ...` and `python -m analysis ...`
in README.md, docs/*.md, docs/reports/README.md, sweeps/README.md (code blocks and inline code) and the
command modules' docstrings (their manuals).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "docs" / "reports" / "README.md",
        ROOT / "sweeps" / "README.md"]
MANUALS = sorted((ROOT / "fixedcode_study" / "cli").glob("*.py"))
# where a command starts, and the verb it runs when the spelling names none
STARTS = re.compile(r"(fixedcode(?= |$)|python -m fixedcode_study(?:\.[a-z_<>]+)?|python -m analysis)")
FIXED_VERB = {"python -m fixedcode_study.run": "run", "python -m analysis": "analyze"}


def _commands_in_line(line: str) -> list[str]:
    """The commands of one code line or inline code span: each part of it (between `&&`, `;`, `||`)
    that starts with one of our spellings."""
    parts = (part.strip().removeprefix("$ ") for part in re.split(r"&&|;|\|\|", line))
    return [part for part in parts if STARTS.match(part)]


def doc_commands(path: Path) -> list[tuple[int, str]]:
    """(line number, command) for every command in a markdown file's code blocks and inline code
    (a release note, which names the spellings that went, is not a command)."""
    text = path.read_text()
    if path.name == "commands.md":
        text = text.split("## Release notes")[0]
    out, fenced, pending = [], False, ""
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            line = pending + line.lstrip("$ ")
            if line.rstrip().endswith("\\"):
                pending = line.rstrip()[:-1] + " "
                continue
            pending = ""
            out += [(number, c) for c in _commands_in_line(line)]
        else:
            out += [(number, c) for span in re.findall(r"`([^`]+)`", line) for c in _commands_in_line(span)]
    return out


def manual_commands(path: Path) -> list[tuple[int, str]]:
    doc = importlib.import_module(f"fixedcode_study.cli.{path.stem}").__doc__ or ""
    out, pending = [], ""
    for number, line in enumerate(doc.splitlines(), 1):
        line = pending + line.strip()
        if line.endswith("\\"):  # a command continued on the next line
            pending = line[:-1]
            continue
        pending = ""
        for span in re.findall(r"`([^`]+)`", line) or [line]:
            out += [(number, c) for c in _commands_in_line(span.strip())]
    return out

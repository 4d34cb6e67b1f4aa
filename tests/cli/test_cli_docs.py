"""The command lines the docs teach use only existing verbs and settings.

A cheap check, without running them: every `fixedcode <verb> ...`, `python -m fixedcode_study <verb>
...`, `python -m fixedcode_study.run ...` and `python -m analysis ...` line of README.md, docs/*.md,
docs/reports/README.md, sweeps/README.md and the command modules' docstrings (their manuals) names a
verb of the COMMANDS table; its settings are keys of the verb's options dataclass; a Hydra override
names a key or group of the project config; no `--flag` spelling and no removed alias is left. Doc
placeholders (`DIR`, `<study>`, `[...]`, `...`, `a|b`) pass: what they stand for is checked where it
is spelled out.
"""

from __future__ import annotations

import importlib
import re
import shlex
from pathlib import Path

import pytest

from fixedcode_study.cli.__main__ import COMMANDS
from fixedcode_study.cli.run_line import HYDRA_FLAGS
from fixedcode_study.config import CONFIG_DIR, compose
from helpers.docs import DOCS, FIXED_VERB, MANUALS, ROOT, doc_commands, manual_commands

RUN_FLAGS = set(HYDRA_FLAGS) | {"-v", "--verbose"}
PLACEHOLDER = "<placeholder>"


def _words(command: str) -> list[str]:
    """The command's words, with a trailing `# comment` and the doc's placeholders dropped."""
    command = re.sub(r"<[^<>]*>", PLACEHOLDER, command)  # <study>, <job or study>: one placeholder word
    try:
        words = shlex.split(command, comments=True)
    except ValueError:  # an unbalanced quote in prose: read it as it is written
        words = command.split("#")[0].split()
    kept, depth = [], 0
    for word in words:
        if word.startswith("[") and not depth:
            depth = 1
        if depth:
            depth = 0 if word.endswith("]") else depth
            continue
        if word in ("...", "|", PLACEHOLDER):
            continue
        kept.append(word)
    return kept


CONFIG_KEYS: set[str] = set()


def config_names() -> set[str]:
    """The project config's top-level keys and its groups (conf/<group>/), which an override may name."""
    if not CONFIG_KEYS:
        CONFIG_KEYS.update(compose([]).keys())
        CONFIG_KEYS.update(p.name for p in Path(CONFIG_DIR).iterdir() if p.is_dir())
        CONFIG_KEYS.add("hydra")
    return CONFIG_KEYS


def _override_problem(word: str) -> str | None:
    name = word.split("=", 1)[0].lstrip("+~")
    if name == PLACEHOLDER:
        return None
    top = re.split(r"[./]", name, maxsplit=1)[0]
    return None if top in config_names() else f"{name}: no key or group of the project config"


def check(command: str) -> str | None:
    """None when the command line names an existing verb with settings it has; else what is wrong."""
    words = _words(command)
    spelled = next(s for s in ("python -m fixedcode_study.run", "python -m analysis", "python -m fixedcode_study",
                               "fixedcode") if command.startswith(s))
    if re.match(r"python -m fixedcode_study\.(?!run\b)", command):
        return f"{command.split()[2]}: a removed alias; use fixedcode <verb>"
    rest = words[len(spelled.split()):]
    if spelled in FIXED_VERB:
        verb = FIXED_VERB[spelled]
    elif not rest or rest[0] in ("--help", "-h", "help"):
        return None
    else:
        verb, rest = rest[0], rest[1:]
        if verb in (PLACEHOLDER, "..."):
            return None
        if verb not in COMMANDS:
            return f"{verb}: not a fixedcode verb"
    if verb == "lm-eval":
        return None  # lm-eval's own command line
    if verb == "run":
        for word in rest:
            if word.startswith("-") and word.split("=")[0] not in RUN_FLAGS:
                return f"{word}: not an option of run"
            if "=" in word and not word.startswith("-") and (problem := _override_problem(word)):
                return problem
        return None
    command_def = importlib.import_module(COMMANDS[verb][0]).COMMAND
    keys = {k.name: k for k in command_def.keys}
    positional = [k for k in command_def.keys if k.positional]
    for word in rest:
        name, eq, _ = word.partition("=")
        if word in ("--help", "-h"):
            continue
        if word.startswith("-"):
            return f"{word}: a --flag; settings of {verb} are key=value"
        if eq and name in keys:
            continue
        if eq and positional and not name.isidentifier():
            continue  # a run directory such as outputs/multirun/main/input=gf2,seed=1
        if eq and command_def.overrides:
            if problem := _override_problem(word):
                return problem
            continue
        if eq:
            return f"{name}: not a setting of {verb}"
        if not positional:
            return f"{word}: {verb} takes no bare words"
    return None


def _bad(commands: list[tuple[int, str]]) -> list[str]:
    return [f"line {n}: {c!r}: {problem}" for n, c in commands if (problem := check(c))]


@pytest.mark.parametrize("path", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_the_docs_command_lines_use_existing_verbs_and_settings(path):
    commands = doc_commands(path)
    assert not _bad(commands), "\n".join(_bad(commands))


@pytest.mark.parametrize("path", MANUALS, ids=[p.name for p in MANUALS])
def test_the_command_manuals_use_existing_verbs_and_settings(path):
    commands = manual_commands(path)
    assert not _bad(commands), "\n".join(_bad(commands))


def test_the_check_finds_what_it_is_for():
    """Each kind of stale command line is caught; the spellings the docs use pass."""
    assert check("fixedcode sweep main --dry-run") == "--dry-run: a --flag; settings of sweep are key=value"
    assert check("fixedcode sweep main dryrun=true") == "dryrun: no key or group of the project config"
    assert check("fixedcode export checkpoint=DIR outdir=X") == "outdir: not a setting of export"
    assert check("fixedcode trian seed=1") == "trian: not a fixedcode verb"
    assert check("python -m fixedcode_study.sweep main") == "fixedcode_study.sweep: a removed alias; use fixedcode <verb>"
    assert check("python -m fixedcode_study.run -m input=learned,gf2 sede=1") == "sede: no key or group of the project config"
    assert check("fixedcode export checkpoint=DIR out=DIR stray") == "stray: export takes no bare words"
    for fine in ("python -m fixedcode_study.run -m input=learned,binary16,gf2 seed=1,2,3",
                 "fixedcode sweep <study> [dry_run=true] [scale=paper]",
                 "fixedcode analyze outputs/multirun/main/input=gf2,seed=1 out=r pairs=a:b",
                 "python -m analysis RUN_DIR... out=REPORT_DIR  # a comment --not-a-flag",
                 "fixedcode pretokenize data=text_files 'data.paths=[corpus/*.txt]' workers=8 out=DIR",
                 "fixedcode lm-eval --model fixedcode --model_args checkpoint=DIR --tasks hellaswag",
                 "fixedcode <verb> --help", "python -m fixedcode_study describe +model.mlp=gelu"):
        assert check(fine) is None, fine
    readme = [command for _, command in doc_commands(ROOT / "README.md")]
    assert "python -m fixedcode_study.run -m input=learned,binary16,gf2 seed=1,2,3" in readme  # the guide's first command

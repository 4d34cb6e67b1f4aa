"""The front door: `fixedcode <verb>` for every command, and the shared argument convention (cli/args.py).

Each command is called in-process through the dispatcher (`fixedcode_study.cli.__main__.main`), as
the `fixedcode` script calls it; one subprocess test each covers the installed `fixedcode` script
and a `python -m fixedcode_study.<verb>` alias, the two places where the exit status must reach the
shell.
"""

from __future__ import annotations

import ast
import importlib
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import fixedcode_study
from fixedcode_study.cli import args as cliargs
from fixedcode_study.cli.__main__ import COMMANDS, main
from fixedcode_study.cli.args import REQUIRED, Command, Key, help_text, parse, run_command
from fixedcode_study.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def fixedcode(argv: list[str], capfd) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `fixedcode *argv`, in this process.

    Hydra's app (`run`) exits through SystemExit itself; that exit code is what the shell sees."""
    from hydra.core.global_hydra import GlobalHydra

    try:
        code = main(argv)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    finally:
        GlobalHydra.instance().clear()
    out, err = capfd.readouterr()
    return code or 0, out, err


def _first_doc_line(verb: str) -> str:
    return importlib.import_module(COMMANDS[verb][0]).__doc__.strip().splitlines()[0]


# --- the dispatcher ----------------------------------------------------------------------------------

def test_fixedcode_help_lists_every_command(capfd):
    for argv in ([], ["--help"], ["-h"], ["help"]):
        code, out, _ = fixedcode(argv, capfd)
        assert code == 0
        listed = [line.split()[0] for line in out.splitlines() if line.startswith("  ")]
        assert listed == list(COMMANDS), argv


def test_an_unknown_command_is_one_line_and_exit_2(capfd):
    code, out, err = fixedcode(["trian", "seed=1"], capfd)
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith("error: command: 'trian' is not a fixedcode command") and "run" in line


def test_every_command_has_its_script_its_alias_and_a_line_in_the_package_docstring():
    """`fixedcode-<verb>` points where the dispatcher does; `python -m fixedcode_study.<module>` exists
    and passes the exit code on; the package docstring names every command."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["fixedcode"] == "fixedcode_study.cli.__main__:main"
    for verb, (module, function, _) in COMMANDS.items():
        assert scripts[f"fixedcode-{verb}"] == f"{module}:{function}", verb
        assert verb in fixedcode_study.__doc__, verb
        if module.startswith("fixedcode_study.cli."):
            alias = ROOT / "fixedcode_study" / f"{module.rsplit('.', 1)[1]}.py"
            guarded = [n for n in ast.parse(alias.read_text()).body if isinstance(n, ast.If)]  # __main__ guard
            calls = {c.func.id for n in guarded for c in ast.walk(n)
                     if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
            assert "exit_with" in calls, f"{alias.name}: `exit_with({function}())` passes the exit code on"
    assert (ROOT / "analysis" / "__main__.py").exists()  # `python -m analysis` in a checkout


# --- every command: --help, and one bad argument -------------------------------------------------

@pytest.mark.parametrize("verb", list(COMMANDS))
def test_every_command_prints_its_help(verb, capfd):
    code, out, err = fixedcode([verb, "--help"], capfd)
    assert code == 0, err[-2000:]
    if verb == "lm-eval":  # lm-eval's own help
        assert "usage: lm-eval" in out
    else:  # the convention: the help is the command module's docstring
        assert _first_doc_line(verb) in out, out[:2000]


# One bad argument per command; each must be one line on stderr naming it, and exit 2. The
# unknown --option comes first on purpose: nothing is composed, read or built before it is refused.
BAD = [(verb, ["--no-such-option"], "--no-such-option") for verb in COMMANDS if verb != "analyze"] + [
    ("analyze", ["RUN", "--out", "OUT", "--no-such-option"], "--no-such-option"),
    ("analyze", ["RUN", "--out", "OUT", "--ema-alpha", "much"], "--ema-alpha"),
    ("run", ["no_such_key=1"], "no_such_key"),
    ("describe", ["no_such_key=1"], "no_such_key"),
    ("sweep", ["main", "--dry-run", "no_such_key=1"], "no_such_key"),
    ("pretokenize", ["no_such_key=1", "--no-progress"], "no_such_key"),
    ("pretokenize", ["--workers", "all"], "workers"),
    ("export", ["checkpoint=CKPT", "out=OUT", "colour=red"], "colour"),
    ("generate", ["checkpoint=CKPT", "prompt=To be", "colour=red"], "colour"),
    ("generate", ["checkpoint=CKPT", "prompt=To be", "n=zero"], "n"),
    ("eval-tasks", ["OUT", "--tasks", "hellaswag", "--colour", "red"], "--colour"),
    ("bench", ["--steps", "many"], "steps"),
    ("bench-input", ["--repeats", "many"], "repeats"),
    ("bench-output", ["--repeats", "many"], "repeats"),
    ("bench-output", ["--outputs", "untied,bitchian"], "outputs"),
]


@pytest.mark.parametrize("verb, argv, named", BAD, ids=[f"{v}:{' '.join(a)}" for v, a, _ in BAD])
def test_a_bad_argument_is_one_line_and_exit_2(verb, argv, named, capfd, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a command that wrongly went ahead would write here, not in the checkout
    code, _, err = fixedcode([verb, *argv], capfd)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err[-3000:]
    assert lines[0].startswith("error: ") and named in lines[0], lines[0]


# --- the installed script and a python -m alias (real processes) ----------------------------------

@pytest.mark.skipif(shutil.which("fixedcode") is None, reason="the package's scripts are not installed here")
def test_the_fixedcode_script_lists_the_commands_and_exits_2_on_a_bad_one(tmp_path):
    listed = subprocess.run(["fixedcode", "--help"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert listed.returncode == 0 and all(verb in listed.stdout for verb in COMMANDS)
    bad = subprocess.run(["fixedcode", "trian"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_a_python_m_alias_passes_the_exit_code_to_the_shell(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "fixedcode_study.eval_tasks", str(tmp_path / "tasks"),
                           "--tasks", "hellaswag", "--data-dir", str(tmp_path / "no-mirror")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: eval.data_dir: ") and "is not a directory" in line


# --- cli/args.py: parse ---------------------------------------------------------------------------

DEMO = Command("demo", "`fixedcode demo`: a command for these tests.", keys=(
    Key("checkpoint", REQUIRED, "checkpoint folder"),
    Key("steps", 10, "steps", flag="--steps"),
    Key("rate", 0.5, "a rate", flag="--rate"),
    Key("verify", True, "check it"),
    Key("quiet", False, "say less", flag="--quiet"),
    Key("device", "auto", "where", flag="--device", choices=("auto", "cpu", "cuda")),
    Key("json", None, "output file", flag="--json", kind=str),
))
WITH_OVERRIDES = Command("demo", None, overrides=True, keys=(
    Key("out", None, "folder", flag="--out", kind=str),
    Key("workers", None, "processes", flag="--workers", kind=int),
))
POSITIONAL = Command("demo", None, keys=(
    Key("out_dir", REQUIRED, "folder", positional=True),
    Key("runs", [], "run folders", positional=True, many=True),
    Key("margin", [], "METRIC=VALUE", flag="--margin", many=True),
))


def test_parse_key_value_and_flags_take_the_type_of_the_default():
    values, overrides = parse(DEMO, ["checkpoint=ck", "steps=3", "--rate", "0.25", "verify=false", "--quiet",
                                     "--device=cpu", "json=out.json"])
    assert values == {"checkpoint": "ck", "steps": 3, "rate": 0.25, "verify": False, "quiet": True,
                      "device": "cpu", "json": "out.json"}
    assert overrides == []
    # the defaults fill what is not given; a value may itself hold '=' (the first one splits)
    values, _ = parse(DEMO, ["checkpoint=outputs/multirun/main/input=gf2,seed=1"])
    assert values == {"checkpoint": "outputs/multirun/main/input=gf2,seed=1", "steps": 10, "rate": 0.5,
                      "verify": True, "quiet": False, "device": "auto", "json": None}
    # --flag VALUE, --flag=VALUE and key=value are one key
    for spelled in (["--steps", "7"], ["--steps=7"], ["steps=7"]):
        assert parse(DEMO, ["checkpoint=ck", *spelled])[0]["steps"] == 7


def test_parse_passes_every_other_key_value_through_as_hydra_overrides():
    given = ["model=test_micro", "--out", "pretok", "+probe=default", "~logger", "hydra/launcher=basic",
             "data.paths=[a/*,b/*]", "--workers=2", "train.lr=1e-3"]
    values, overrides = parse(WITH_OVERRIDES, given)
    assert values == {"out": "pretok", "workers": 2}
    assert overrides == ["model=test_micro", "+probe=default", "~logger", "hydra/launcher=basic",
                         "data.paths=[a/*,b/*]", "train.lr=1e-3"]


def test_parse_positional_and_many():
    values, _ = parse(POSITIONAL, ["report", "runs/a", "--margin", "val_loss=0.05", "runs/b",
                                   "--margin=val_ppl=2%"])
    assert values == {"out_dir": "report", "runs": ["runs/a", "runs/b"], "margin": ["val_loss=0.05", "val_ppl=2%"]}
    assert parse(POSITIONAL, ["out_dir=report"])[0] == {"out_dir": "report", "runs": [], "margin": []}


@pytest.mark.parametrize("command, argv, message", [
    (DEMO, ["checkpoint=a", "checkpoint=b"], "checkpoint: given twice; pass it once"),
    (DEMO, ["checkpoint=a", "--steps", "1", "steps=2"], "steps: given twice; pass it once"),
    (DEMO, ["steps=3"], "checkpoint: missing; pass checkpoint=<checkpoint folder>; see fixedcode demo --help"),
    (DEMO, ["checkpoint=a", "steps=three"], "steps: 'three' is not an integer; pass steps=<int>"),
    (DEMO, ["checkpoint=a", "--rate", "fast"], "rate: 'fast' is not a number; pass rate=<float>"),
    (DEMO, ["checkpoint=a", "verify=perhaps"],
     "verify: 'perhaps' is not true or false; pass verify=true or verify=false"),
    (DEMO, ["checkpoint=a", "--device", "tpu"],
     "device: 'tpu' is not one of auto, cpu, cuda; pass device=<one of them>"),
    (DEMO, ["checkpoint=a", "colour=red"],
     "colour: is not a setting of `fixedcode demo`; see fixedcode demo --help"),
    (DEMO, ["checkpoint=a", "--colour", "red"],
     "--colour: is not an option of `fixedcode demo`; see fixedcode demo --help"),
    (DEMO, ["checkpoint=a", "stray"], "stray: is not key=value; see fixedcode demo --help"),
    (DEMO, ["checkpoint=a", "--steps"], "--steps: needs a value; see fixedcode demo --help"),
    (DEMO, ["checkpoint=a", "--json", "--quiet"], "--json: needs a value; see fixedcode demo --help"),
    (WITH_OVERRIDES, ["--workers", "-"], "workers: '-' is not an integer; pass workers=<int>"),
    (POSITIONAL, ["--margin"], "--margin: needs a value; see fixedcode demo --help"),
    (POSITIONAL, [], "out_dir: missing; pass out_dir=<folder>; see fixedcode demo --help"),
])
def test_parse_errors_are_one_line_naming_the_key(command, argv, message):
    with pytest.raises(ConfigError) as err:
        parse(command, argv)
    assert str(err.value) == message


def test_help_text_is_the_docstring_and_the_key_table():
    text = help_text(DEMO)
    assert text.startswith("`fixedcode demo`: a command for these tests.")
    table = {line.split()[0]: line for line in text.splitlines() if line.startswith("  ")}
    assert list(table) == [k.name + "=..." for k in DEMO.keys]
    assert "(required)" in table["checkpoint=..."]
    assert "--steps" in table["steps=..."] and "(default 10)" in table["steps=..."]
    assert "Hydra override" in help_text(WITH_OVERRIDES) and "Hydra override" not in text


def test_run_command_help_errors_and_exit_codes(capsys):
    seen = []

    def body(values, overrides):
        seen.append((values, overrides))
        if values["steps"] == 0:
            raise ConfigError("steps", "0 is too few", "pass steps>=1")
        if values["steps"] == 1:
            from fixedcode_study.config import compose

            compose(["no_such_key=1"])  # Hydra's own error, deep below the command
        return None if values["steps"] == 10 else 3

    assert run_command(DEMO, ["--help"], body) == 0 and not seen
    assert capsys.readouterr().out.startswith("`fixedcode demo`")
    assert run_command(DEMO, ["checkpoint=a"], body) == 0  # None is success
    assert run_command(DEMO, ["checkpoint=a", "steps=5"], body) == 3  # the body's own code passes through
    for argv, line in ((["checkpoint=a", "steps=0"], "error: steps: 0 is too few; pass steps>=1"),
                       (["steps=x"], "error: steps: 'x' is not an integer; pass steps=<int>"),
                       (["checkpoint=a", "steps=1"], "error: overrides: Could not override 'no_such_key'.")):
        capsys.readouterr()
        assert run_command(DEMO, argv, body) == 2
        (printed,) = capsys.readouterr().err.strip().splitlines()
        assert printed.startswith(line), printed
    with pytest.raises(SystemExit) as stop:
        cliargs.exit_with(2)
    assert stop.value.code == 2
    assert cliargs.exit_with(0) is None and cliargs.exit_with(None) is None  # success: no SystemExit (runpy)

"""The front door: `fixedcode <verb>` for every command, and the one argument convention (cli/args.py).

Every verb of the COMMANDS table gets the same checks, so a new verb is covered by being listed:
`--help` (exit 0, every setting of its options dataclass listed), a bad key, a bad value and a
`--flag` spelling (each one line on stderr naming it, exit 2, nothing written). Commands are called
in-process through the dispatcher (helpers.cli.fixedcode: the exit code and the terminal a process
would give); a few subprocess tests cover what only a process shows: the `fixedcode` script, the
`python -m` spellings and their exit status reaching the shell.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import shutil
import subprocess
import sys
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from fixedcode_study.cli import args as cliargs
from fixedcode_study.cli.__main__ import COMMANDS
from fixedcode_study.cli.args import POSITIONAL, Command, help_text, parse, run_command
from fixedcode_study.errors import ConfigError
from helpers.cli import fixedcode

ROOT = Path(__file__).resolve().parents[2]
OWN_COMMAND_LINE = ("run", "lm-eval")  # Hydra's and lm-eval's own command lines: no options dataclass


def command_of(verb: str) -> Command | None:
    return getattr(importlib.import_module(COMMANDS[verb][0]), "COMMAND", None)


def one_error_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, (result.returncode, result.stderr[-3000:])
    assert lines[0].startswith("error: "), lines[0]
    assert "Traceback" not in result.stderr
    return lines[0]


# --- the dispatcher ----------------------------------------------------------------------------------

def test_fixedcode_help_lists_every_command():
    for argv in ([], ["--help"], ["-h"], ["help"]):
        result = fixedcode(argv)
        assert result.returncode == 0
        listed = [line.split()[0] for line in result.stdout.splitlines() if line.startswith("  ")]
        assert listed == list(COMMANDS), argv


def test_an_unknown_command_is_one_line_and_exit_2():
    line = one_error_line(fixedcode(["trian", "seed=1"]))
    assert line.startswith("error: command: 'trian' is not a fixedcode command") and "run" in line


def test_every_verb_is_one_module_with_main_and_options_unless_its_command_line_is_a_librarys():
    for verb, (module, _) in COMMANDS.items():
        command = importlib.import_module(module)
        assert callable(command.main), verb
        if verb in OWN_COMMAND_LINE:
            assert getattr(command, "COMMAND", None) is None, verb
        else:
            assert command.COMMAND.name == verb and dataclasses.is_dataclass(command.COMMAND.options), verb


# --- every command: --help, a bad key, a bad value, a --flag -------------------------------------

@pytest.mark.parametrize("verb", list(COMMANDS))
def test_every_command_prints_its_help_listing_its_settings(verb, tmp_path):
    result = fixedcode([verb, "--help"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    doc = importlib.import_module(COMMANDS[verb][0]).__doc__.strip().splitlines()[0]
    if verb == "lm-eval":  # lm-eval's own help
        assert "usage: lm-eval" in result.stdout
        return
    assert doc in result.stdout, result.stdout[:2000]
    if verb == "run":  # then Hydra's: the config groups
        assert "== Configuration groups ==" in result.stdout and "input: " in result.stdout
        return
    shown = [line.split()[0] for line in result.stdout.split("settings (key=value):")[1].splitlines()
             if line.startswith("  ") and not line.startswith("   ")]
    keys = command_of(verb).keys
    assert [s.split("=")[0].lower() for s in shown] == [k.name for k in keys]
    assert all(k.help for k in keys), [k.name for k in keys if not k.help]  # every setting says what it is


def required_argv(verb: str) -> list[str]:
    """A command line that gets past the options' own checks: every required setting, plus what an
    either/or of the options needs (a model to read, a study to run)."""
    extra = {"evaluate": ["checkpoint=CKPT"], "probe": ["checkpoint=CKPT"], "generate": ["checkpoint=CKPT"],
             "sweep": ["main"], "analyze": ["RUN_DIR"], "compose": ["a=A", "b=B"],
             "adapt": ["checkpoint=CKPT"]}.get(verb, [])
    given = {a.split("=")[0] for a in extra}
    filled = [("PLACEHOLDER" if k.positional else f"{k.name}=PLACEHOLDER")
              for k in command_of(verb).keys if k.required and k.name not in given]
    return [*extra, *filled]


def bad_key_argv(verb: str) -> tuple[list[str], str]:
    if verb == "lm-eval":
        return ["--no_such_key", "1"], "--no_such_key"
    return [*([] if verb == "run" else required_argv(verb)), "no_such_key=1"], "no_such_key"


# A bad value for the verbs whose options hold no typed setting to give a wrong type (or whose
# command line is a library's); every other verb gets one derived from its options.
BAD_VALUES = {
    "run": (["model=test_micro", "seed=abc"], "seed"),
    "lm-eval": (["--model", "fixedcode", "--num_fewshot", "many"], "--num_fewshot"),
    "probe": (["checkpoint=CKPT", "probe.method=nope"], "probe.method"),
    "eval-tasks": (["OUT", "tasks=hellaswag", "data_dir=no-such-mirror"], "data_dir"),
}


def bad_value_argv(verb: str) -> tuple[list[str], str]:
    if verb in BAD_VALUES:
        return BAD_VALUES[verb]
    typed = [k for k in command_of(verb).keys if not k.positional and
             (cliargs.choices(k) is not None or cliargs._element(k.hint) in (bool, int, float))]
    assert typed, f"{verb}: no typed setting to give a bad value; add one to BAD_VALUES"
    return [*required_argv(verb), f"{typed[0].name}=not-a-value"], typed[0].name


def flag_argv(verb: str) -> tuple[list[str], str]:
    key = next(k for k in command_of(verb).keys if not k.positional)
    return [*required_argv(verb), f"--{key.name.replace('_', '-')}", "1"], f"pass {key.name}="


CASES = [(verb, "bad key", *bad_key_argv(verb)) for verb in COMMANDS] + \
        [(verb, "bad value", *bad_value_argv(verb)) for verb in COMMANDS] + \
        [(verb, "--flag", *flag_argv(verb)) for verb in COMMANDS if verb not in OWN_COMMAND_LINE]


@pytest.mark.parametrize("verb, what, argv, named", CASES, ids=[f"{v}:{w}" for v, w, _, _ in CASES])
def test_a_bad_argument_is_one_line_naming_it_and_exit_2(verb, what, argv, named, tmp_path):
    result = fixedcode([verb, *argv, *([f"out_root={tmp_path}"] if verb == "run" else [])], cwd=tmp_path)
    line = one_error_line(result)
    assert named in line, line
    assert not list(tmp_path.rglob("results.json")), "the command went ahead"


# --- the python -m spellings and the installed script (real processes) -----------------------------

def _python_m(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, cwd=cwd, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.skipif(shutil.which("fixedcode") is None, reason="the package's script is not installed here")
def test_the_fixedcode_script_lists_the_commands_and_exits_2_on_a_bad_one(tmp_path):
    listed = subprocess.run(["fixedcode", "--help"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert listed.returncode == 0 and all(verb in listed.stdout for verb in COMMANDS)
    bad = subprocess.run(["fixedcode", "trian"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_the_python_m_spellings_pass_the_exit_code_to_the_shell(tmp_path):
    """`python -m fixedcode_study <verb>`, `python -m fixedcode_study.run` and a checkout's `python -m
    analysis`: a bad setting is one line and exit 2 in a process of its own."""
    for argv, named in ((["fixedcode_study", "eval-tasks", "OUT", "tasks=hellaswag", "data_dir=no-mirror"],
                         "error: eval.data_dir: "),
                        (["fixedcode_study.run", "--no-such-option"], "error: --no-such-option: "),
                        (["analysis", "RUN", "out=OUT", "ema_alpha=much"], "error: ema_alpha: ")):
        proc = _python_m(*argv, cwd=ROOT if argv[0] == "analysis" else tmp_path)
        assert proc.returncode == 2, (argv, proc.stderr[-2000:])
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith(named), line


# --- cli/args.py: the options dataclass drives the command line ------------------------------------

@dataclass(frozen=True)
class Inner:
    """A library's own options, lent to the command."""

    steps: int = 10
    """timed steps"""
    rate: float = 0.5
    """a rate"""

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ConfigError("steps", f"{self.steps} is too few", "pass steps>=1")


@dataclass(frozen=True, kw_only=True)
class Demo:
    checkpoint: str
    """checkpoint folder"""
    runs: tuple[str, ...] = field(default=(), metadata=POSITIONAL)
    """run folders"""
    inner: Inner = field(default_factory=Inner)
    verify: bool = True
    """check it"""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """where"""
    json: Path | None = None
    """output file"""
    margin: tuple[str, ...] = ()
    """METRIC=VALUE"""
    workers: int | None = field(default=None, metadata={"help": "processes"})


DEMO = Command("demo", "`fixedcode demo`: a command for these tests.", Demo)
WITH_OVERRIDES = Command("demo", None, Demo, overrides=True)


def test_parse_fills_the_dataclass_with_values_of_each_fields_type(tmp_path):
    options, overrides = parse(DEMO, ["checkpoint=ck", "steps=3", "rate=0.25", "verify=false", "device=cpu",
                                      "json=out.json", "margin=val_loss=0.05", "margin=val_ppl=2%", "workers=2"])
    assert options == Demo(checkpoint="ck", inner=Inner(3, 0.25), verify=False, device="cpu", json=Path("out.json"),
                           margin=("val_loss=0.05", "val_ppl=2%"), workers=2)
    assert overrides == []
    # the defaults fill what is not given; a value may itself hold '=' (the first one splits)
    assert parse(DEMO, ["checkpoint=outputs/multirun/main/input=gf2,seed=1"])[0] == \
        Demo(checkpoint="outputs/multirun/main/input=gf2,seed=1")


def test_bare_words_fill_the_positional_field_and_a_path_with_an_equals_sign_is_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "input=gf2,seed=1").mkdir()
    options, _ = parse(DEMO, ["runs/a", "checkpoint=ck", "outputs/multirun/main/input=gf2,seed=1",
                              "input=gf2,seed=1", "./input=learned,seed=2"])
    assert options.runs == ("runs/a", "outputs/multirun/main/input=gf2,seed=1", "input=gf2,seed=1",
                            "./input=learned,seed=2")
    assert parse(DEMO, ["checkpoint=ck", "runs=x"])[0].runs == ("x",)  # by name, too


def test_parse_passes_every_other_key_value_through_as_hydra_overrides():
    given = ["model=test_micro", "+probe=default", "checkpoint=ck", "~logger", "hydra/launcher=basic",
             "data.paths=[a/*,b/*]", "workers=2", "train.lr=1e-3"]
    options, overrides = parse(WITH_OVERRIDES, given)
    assert (options.checkpoint, options.workers) == ("ck", 2)
    assert overrides == ["model=test_micro", "+probe=default", "~logger", "hydra/launcher=basic",
                         "data.paths=[a/*,b/*]", "train.lr=1e-3"]


# (command line, the field the error names first, what its fix spells)
@pytest.mark.parametrize("command, argv, field, fix", [
    (DEMO, ["checkpoint=a", "checkpoint=b"], "checkpoint", "once"),
    (DEMO, ["steps=3"], "checkpoint", "checkpoint="),
    (DEMO, ["checkpoint=a", "steps=three"], "steps", "steps=<int>"),
    (DEMO, ["checkpoint=a", "rate=fast"], "rate", "rate=<float>"),
    (DEMO, ["checkpoint=a", "verify=perhaps"], "verify", "verify=true"),
    (DEMO, ["checkpoint=a", "device=tpu"], "device", "auto, cpu, cuda"),
    (DEMO, ["checkpoint=a", "steps=0"], "steps", "steps>=1"),  # the library's own check
    (DEMO, ["checkpoint=a", "colour=red"], "colour", "./colour=red"),
    (DEMO, ["checkpoint=a", "--steps", "3"], "--steps", "steps="),
    (DEMO, ["checkpoint=a", "--verify"], "--verify", "verify=true"),
    (DEMO, ["checkpoint=a", "--colour=red"], "--colour", "--help"),
    (WITH_OVERRIDES, ["checkpoint=a", "workers=-"], "workers", "workers=<int>"),
])
def test_parse_errors_are_one_line_naming_the_key(command, argv, field, fix):
    with pytest.raises(ConfigError) as err:
        parse(command, argv)
    message = str(err.value)
    assert "\n" not in message and message.split(": ")[0] == field and fix in message, message


def test_help_text_is_the_docstring_and_one_line_per_setting_from_the_fields():
    text = help_text(DEMO)
    assert text.startswith("`fixedcode demo`: a command for these tests.")
    table = {line.split()[0]: line for line in text.splitlines() if line.startswith("  ") and not line.startswith("   ")}
    assert list(table) == ["checkpoint=TEXT", "RUNS", "steps=INT", "rate=NUMBER", "verify=true|false",
                           "device=auto|cpu|cuda", "json=PATH", "margin=TEXT", "workers=INT"]
    assert table["checkpoint=TEXT"].endswith("checkpoint folder (required)")
    assert table["steps=INT"].endswith("timed steps (default 10)")  # the inner dataclass's docstring
    assert table["workers=INT"].endswith("processes")  # metadata["help"]; no default shown for None
    assert "more than once" in text and "Hydra override" not in text
    assert "Hydra override" in help_text(WITH_OVERRIDES)
    hints = typing.get_type_hints(Demo)
    assert {f.name for f in dataclasses.fields(Demo)} == set(hints)


def test_run_command_help_errors_and_exit_codes(capsys):
    seen = []

    def body(options, overrides):
        seen.append((options, overrides))
        if options.inner.steps == 2:
            from fixedcode_study.config import compose

            compose(["no_such_key=1"])  # Hydra's own error, deep below the command
        return None if options.inner.steps == 10 else 3

    assert run_command(DEMO, ["--help"], body) == 0 and not seen
    assert capsys.readouterr().out.startswith("`fixedcode demo`")
    assert run_command(DEMO, ["checkpoint=a"], body) == 0  # None is success
    assert run_command(DEMO, ["checkpoint=a", "steps=5"], body) == 3  # the body's own code passes through
    for argv, line in ((["checkpoint=a", "steps=0"], "error: steps: "), (["steps=x"], "error: steps: "),
                       (["checkpoint=a", "steps=2"], "error: overrides: ")):  # Hydra's error, named as overrides
        capsys.readouterr()
        assert run_command(DEMO, argv, body) == 2
        (printed,) = capsys.readouterr().err.strip().splitlines()
        assert printed.startswith(line) and ("no_such_key" in printed or "overrides" not in line), printed
    with pytest.raises(SystemExit) as stop:
        cliargs.exit_with(2)
    assert stop.value.code == 2
    assert cliargs.exit_with(0) is None and cliargs.exit_with(None) is None  # success: no SystemExit (runpy)


def test_no_setting_is_declared_twice_across_a_command_and_the_library_options_it_takes():
    """A command lends the library's dataclass (hub.sampling.SampleSettings, systems.options.*,
    studies.rates.Rates) whole: none of its fields is declared again by the command."""
    for verb in COMMANDS:
        command = command_of(verb)
        if command is None:
            continue
        names = [k.name for k in command.keys]
        assert len(names) == len(set(names)), verb
        hints = typing.get_type_hints(command.options)
        for f in dataclasses.fields(command.options):
            if dataclasses.is_dataclass(hints[f.name]):
                assert hints[f.name].__module__.split(".")[1] != "cli", (verb, f.name)  # the library's own


@pytest.mark.parametrize("verb", [v for v in COMMANDS if v not in OWN_COMMAND_LINE])
def test_help_and_a_bad_key_load_no_model_stack(verb):
    """`fixedcode <verb> --help` imports the options, not what the command runs (torch, Lightning):
    checked in a fresh interpreter, the only honest place to see what an import pulls in."""
    code = (f"import sys; from fixedcode_study.cli.__main__ import main; main([{verb!r}, '--help']); "
            "print(sorted(m for m in ('torch', 'lightning', 'transformers', 'pandas') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stdout[-500:]


def test_a_mistyped_setting_that_left_one_missing_is_named_as_the_typo():
    """`fixedcode adapt chekpoint=x`: the key went to the overrides (the command takes them), so
    checkpoint= read as missing; the error names the typo and the setting it nearly spells."""
    with pytest.raises(ConfigError) as err:
        parse(WITH_OVERRIDES, ["chekpoint=a", "train.lr=1"])
    assert str(err.value).split(": ")[0] == "chekpoint" and "did you mean checkpoint=?" in str(err.value)
    with pytest.raises(ConfigError, match="^checkpoint: missing"):
        parse(WITH_OVERRIDES, ["train.lr=1", "zzz=2"])  # nothing near: the missing setting, as before
    assert parse(WITH_OVERRIDES, ["checkpoint=a", "stesp=2"])[1] == ["stesp=2"]  # parsed: Hydra decides later


@pytest.mark.parametrize("key, near", [("train.heldout_fractoin", "train.heldout_fraction"),
                                       ("model.n_layre", "model.n_layer"), ("sede", "seed"),
                                       ("checkpoint.every_step", "checkpoint.every_steps"),
                                       ("train.zzz", None), ("no_such_key", None)])
def test_a_conf_key_hydra_could_not_place_names_the_key_it_nearly_spells(key, near):
    from fixedcode_study.cli.args import conf_hint
    from fixedcode_study.config import config_key_near  # loaded, as by every command that composes

    assert config_key_near(key) == near
    hint = conf_hint(f"Could not override '{key}'.")
    assert hint == (f"did you mean {near}=? (see conf/ for the groups and keys)" if near
                    else "see conf/ for the groups and keys")


@pytest.mark.slow
def test_run_with_a_mistyped_train_key_is_one_line_naming_the_key(tmp_path):
    import subprocess

    out = subprocess.run([sys.executable, "-m", "fixedcode_study.run", "train.heldout_fractoin=0.05",
                          f"out_root={tmp_path}"], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 2
    (line,) = out.stderr.strip().splitlines()
    assert "train.heldout_fractoin" in line and "did you mean train.heldout_fraction=?" in line, line
    assert not list(tmp_path.iterdir())  # nothing written

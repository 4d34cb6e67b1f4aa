"""One argument convention: a command's options are one dataclass, and its command line comes from it.

    @dataclass(frozen=True, kw_only=True)
    class ExportOptions:
        checkpoint: str
        \"\"\"job or checkpoint folder, or an export of one\"\"\"
        verify: bool = True
        \"\"\"load the folder back and compare its logits\"\"\"

    COMMAND = Command("export", __doc__, ExportOptions)

    def main(argv=None) -> int:
        return run_command(COMMAND, argv, export)        # export(options: ExportOptions, overrides: list[str])

Every field is one `key=value` setting, named as the field. Its type converts the text (bool, int,
float, str, Path, `Literal[...]` for a fixed set of choices, `X | None`, and `list[X]` / `tuple[X,
...]`, which collect every repeat of the key); its attribute docstring (or `metadata["help"]`) is its
line in `--help`; a field without a default is required. A field whose type is itself a dataclass
(the library's own: hub.generation.SampleSettings, systems.bench.BenchOptions, ...) lends the
command its fields as keys, so no option is declared twice. Fields with `metadata=POSITIONAL` take
the bare words, in order (a list one takes all that are left; a word holding `=` is still a bare
word when what is left of the `=` is a path, not a key: `runs/input=gf2,seed=1`). A command with
`overrides=True` passes every other `key=value` (`model=cpu_tiny`, `+probe=default`, `~logger`) on as
a Hydra override of the project config.

`run_command` prints the help for -h/--help (exit 0) and turns a bad key, a bad value (conversion,
the dataclass's own `__post_init__` checks, which raise errors.ConfigError) or a bad Hydra override
into one line on stderr and exit 2. Nothing here imports more than the dataclass's module, so
`--help` and a bad key answer before the command's library loads. Commands take no `--flag`
spellings (-h/--help aside): a `--steps 3` is one line that says `pass steps=3`.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import inspect
import re
import sys
import textwrap
import types
import typing
from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Sequence, Union

from ..errors import ConfigError

POSITIONAL = {"positional": True}  # field metadata: filled by bare words (a library without cli/ writes it out)
HELP_FLAGS = ("-h", "--help")


@dataclass(frozen=True)
class Key:
    """One setting of a command line: a field of the options dataclass (or of a dataclass inside it)."""

    name: str
    hint: Any                   # the field's resolved type
    default: Any                # MISSING: required
    help: str
    positional: bool = False

    @property
    def many(self) -> bool:
        return _container(self.hint) is not None

    @property
    def required(self) -> bool:
        return self.default is MISSING


@dataclass(frozen=True)
class Command:
    name: str                   # as typed after `fixedcode`
    doc: str | None             # the module docstring: the help text
    options: type               # the options dataclass
    overrides: bool | str = False  # other key=value arguments are Hydra overrides (a str: what --help says of them)

    @property
    def keys(self) -> tuple[Key, ...]:
        return keys_of(self.options)

    def key(self, name: str) -> Key:
        return next(k for k in self.keys if k.name == name)


# --- the keys of a dataclass --------------------------------------------------------------------

def field_docs(cls: type) -> dict[str, str]:
    """Field name -> its attribute docstring (the string right below it), over the class's bases too."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):  # no source (a frozen app): metadata["help"] still works
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, after in zip(body, body[1:]):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                    and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)):
                docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def _optional(hint: Any) -> Any:
    """X for `X | None`, else the hint itself."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        rest = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return hint


def _container(hint: Any) -> type | None:
    """list or tuple for `list[X]` / `tuple[X, ...]`; None for a single value."""
    origin = typing.get_origin(_optional(hint))
    return origin if origin in (list, tuple) else None


def _element(hint: Any) -> Any:
    hint = _optional(hint)
    return typing.get_args(hint)[0] if _container(hint) else hint


def keys_of(cls: type) -> tuple[Key, ...]:
    """The settings of an options dataclass, nested dataclasses flattened, in declaration order."""
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    out: list[Key] = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        hint = hints[f.name]
        if dataclasses.is_dataclass(hint):
            out += keys_of(hint)
            continue
        default = f.default if f.default is not MISSING else (
            f.default_factory() if f.default_factory is not MISSING else MISSING)
        out.append(Key(f.name, hint, default, f.metadata.get("help") or docs.get(f.name, ""),
                       bool(f.metadata.get("positional"))))
    names = [k.name for k in out]
    clash = next((n for n in names if names.count(n) > 1), None)
    assert clash is None, f"{cls.__name__}: two settings named {clash!r}"  # a programming error, not user input
    return tuple(out)


def choices(key: Key) -> tuple[Any, ...] | None:
    element = _element(key.hint)
    return typing.get_args(element) if typing.get_origin(element) is Literal else None


def kind_name(key: Key) -> str:
    """What the help shows after `name=`."""
    options = choices(key)
    if options is not None:
        return "|".join(map(str, options))
    element = _element(key.hint)
    return {bool: "true|false", int: "INT", float: "NUMBER", Path: "PATH"}.get(element, "TEXT")


# --- text -> value ------------------------------------------------------------------------------

def convert(key: Key, text: str) -> Any:
    """`text` as one value of the key's type; a value of the wrong type or outside its choices is one line."""
    element = _element(key.hint)
    options = choices(key)
    if options is not None:
        for option in options:
            if str(option) == text:
                return option
        raise ConfigError(key.name, f"{text!r} is not one of {', '.join(map(str, options))}",
                          f"pass {key.name}=<one of them>")
    if element is bool:
        lowered = text.lower()
        if lowered not in ("true", "1", "yes", "false", "0", "no"):
            raise ConfigError(key.name, f"{text!r} is not true or false", f"pass {key.name}=true or {key.name}=false")
        return lowered in ("true", "1", "yes")
    if element in (int, float):
        try:
            return element(text)
        except ValueError:
            raise ConfigError(key.name, f"{text!r} is not a{'n integer' if element is int else ' number'}",
                              f"pass {key.name}=<{element.__name__}>") from None
    if element is Path:
        return Path(text)
    return text


def _is_flag(arg: str) -> bool:
    """-x / --xyz, not a negative number or a bare '-'."""
    return arg.startswith("-") and len(arg) > 1 and not arg[1].isdigit() and arg[1] != "."


def _flag_error(command: Command, arg: str) -> ConfigError:
    flag, eq, value = arg.partition("=")
    name = flag.lstrip("-").replace("-", "_")
    key = next((k for k in command.keys if k.name == name), None)
    if key is not None:
        value = value or ("true" if _element(key.hint) is bool else "...")
        return ConfigError(flag, f"is not an option of `fixedcode {command.name}`: settings are key=value",
                           f"pass {name}={value}")
    return ConfigError(flag, f"is not an option of `fixedcode {command.name}`",
                       f"settings are key=value; see fixedcode {command.name} --help")


def parse(command: Command, argv: Sequence[str]) -> tuple[Any, list[str]]:
    """(the options dataclass, filled and checked; the Hydra overrides) of one command line."""
    keys = command.keys
    by_name = {k.name: k for k in keys}
    positional = [k for k in keys if k.positional]
    values: dict[str, Any] = {}
    overrides: list[str] = []
    usage = f"see fixedcode {command.name} --help"

    def put(key: Key, text: str) -> None:
        value = convert(key, text)
        if key.many:
            values.setdefault(key.name, []).append(value)
        elif key.name in values:
            raise ConfigError(key.name, "given twice", "pass it once")
        else:
            values[key.name] = value

    def open_slot() -> Key | None:
        return next((k for k in positional if k.many or k.name not in values), None)

    for arg in argv:
        name, eq, text = arg.partition("=")
        if _is_flag(arg):
            raise _flag_error(command, arg)
        if eq and name in by_name:
            put(by_name[name], text)
        elif eq and open_slot() is not None and (Path(arg).exists()
                                                 or (not command.overrides and not name.isidentifier())):
            put(open_slot(), arg)  # a run directory such as runs/input=gf2,seed=1: a path, not a key
        elif command.overrides and (eq or arg.startswith("~")):
            overrides.append(arg)
        elif eq:
            fix = f"{usage} (a folder named like a setting is written ./{arg})" if positional else usage
            raise ConfigError(name, f"is not a setting of `fixedcode {command.name}`", fix)
        elif open_slot() is not None:
            put(open_slot(), arg)
        else:
            raise ConfigError(arg, "is not key=value", usage)
    try:
        for key in keys:
            if key.name not in values and key.required:
                raise ConfigError(key.name, "missing", f"pass {key.name}=<{key.help or 'value'}>; {usage}")
        return build(command.options, values), overrides
    except ConfigError as err:  # `chekpoint=x` went to the overrides, so checkpoint= reads as missing: say so
        raise _misspelled(command, overrides, values) or err


def _misspelled(command: Command, overrides: Sequence[str], given: Mapping[str, Any]) -> ConfigError | None:
    """The first override whose key nearly spells a setting of the command not given, as its error."""
    settings = [k.name for k in command.keys if k.name not in given]
    for arg in overrides:
        name = arg.partition("=")[0]
        close = difflib.get_close_matches(name, settings, n=1, cutoff=0.75) if name.isidentifier() else []
        if close:
            return ConfigError(name, f"is not a setting of `fixedcode {command.name}`",
                               f"did you mean {close[0]}=? (see fixedcode {command.name} --help)")
    return None


def build(cls: type, values: dict[str, Any]) -> Any:
    """The dataclass of these values (defaults for the rest), inner dataclasses first; each checks itself."""
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if dataclasses.is_dataclass(hints[f.name]):
            kwargs[f.name] = build(hints[f.name], values)
        elif f.name in values:
            value = values[f.name]
            kwargs[f.name] = tuple(value) if _container(hints[f.name]) is tuple else value
    return cls(**kwargs)


# --- help and the frame a command runs in -------------------------------------------------------

HELP_WIDTH, SPELLED_WIDTH = 100, 30


def help_text(command: Command) -> str:
    lines = [(command.doc or f"fixedcode {command.name}").rstrip(), "", "settings (key=value):"]
    for key in command.keys:
        spelled = (f"{key.name.upper()}{' ...' if key.many else ''} (or {key.name}=)" if key.positional
                   else f"{key.name}={kind_name(key)}" + (" ..." if key.many else ""))
        shown = _shown(key.default)
        text = key.help + (" (required)" if key.required else "" if shown == "none" else f" (default {shown})")
        wrapped = textwrap.wrap(text, HELP_WIDTH - SPELLED_WIDTH - 3) or [""]
        first = f"  {spelled:<{SPELLED_WIDTH}} {wrapped[0]}" if len(spelled) <= SPELLED_WIDTH else \
            f"  {spelled}\n{' ' * (SPELLED_WIDTH + 3)}{wrapped[0]}"
        lines += [first, *(" " * (SPELLED_WIDTH + 3) + line for line in wrapped[1:])]
    if any(key.many and not key.positional for key in command.keys):
        lines += ["", "a setting shown with ... may be given more than once."]
    if command.overrides:
        lines += ["", command.overrides if isinstance(command.overrides, str)
                  else "every other key=value is a Hydra override of the project config (conf/)."]
    return "\n".join(lines)


def _shown(default: Any) -> str:
    if isinstance(default, bool):
        return str(default).lower()
    if default is None or default in ("", [], ()):
        return "none"
    return ", ".join(map(str, default)) if isinstance(default, (list, tuple)) else str(default)


def one_line(err: BaseException) -> str:
    """A Hydra error as one line (its first line: the rest is a hint list or a traceback)."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def wants_help(args: Sequence[str]) -> bool:
    return any(a in HELP_FLAGS for a in args)


def run_command(command: Command, argv: Sequence[str] | None, body: Callable[[Any, list[str]], int | None]) -> int:
    """Help, parse, call `body(options, overrides)`; a bad setting anywhere below is one line on stderr, exit 2."""
    args = list(sys.argv[1:] if argv is None else argv)
    if wants_help(args):
        print(help_text(command))
        return 0
    try:
        options, overrides = parse(command, args)
        return body(options, overrides) or 0
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # Hydra's own: an unknown preset or a malformed override
        if not _from_hydra(err):
            raise
        line = one_line(err)
        print(f"error: overrides: {line}; {_override_hint(command, line)}", file=sys.stderr)
        return 2


def _override_hint(command: Command, line: str) -> str:
    """What to do about a key Hydra could not place: one that nearly spells a setting of the command
    (`stpes=2`) is that setting mistyped, as a key=value the command did not take is handed to Hydra."""
    unknown = re.search(r"Could not override '([^']+)'", line)
    close = difflib.get_close_matches(unknown[1], [k.name for k in command.keys], n=1) if unknown else []
    if close:
        return f"did you mean {close[0]}=? (a setting of `fixedcode {command.name}`: see --help)"
    return conf_hint(line)


def conf_hint(line: str) -> str:
    """The fix for a Hydra error line: the conf/ key that a key Hydra could not place nearly spells
    (`train.heldout_fractoin` -> train.heldout_fraction), else where the keys are."""
    unknown = re.search(r"Could not override '([^']+)'", line)
    config = sys.modules.get("fixedcode_study.config")  # loaded by whatever composed: no import here (analysis)
    near = config.config_key_near(unknown[1]) if unknown and config else None
    if near:
        return f"did you mean {near}=? (see conf/ for the groups and keys)"
    return "see conf/ for the groups and keys"


def _from_hydra(err: BaseException) -> bool:
    """A Hydra or OmegaConf error, recognised without importing either (a command that never loaded
    them cannot have raised one)."""
    hydra, omegaconf = sys.modules.get("hydra.errors"), sys.modules.get("omegaconf.errors")
    return bool((hydra and isinstance(err, hydra.HydraException))
                or (omegaconf and isinstance(err, omegaconf.OmegaConfBaseException)))


def exit_code(stop: SystemExit) -> int:
    """The status a SystemExit gives the shell; sys.exit("message") prints the message and gives 1, as Python does."""
    if stop.code is None or isinstance(stop.code, int):
        return stop.code or 0
    print(stop.code, file=sys.stderr)
    return 1


def with_argv(prog: str, argv: Sequence[str], entry: Callable[[], int | None]) -> int:
    """`entry()` with sys.argv = [prog, *argv], for a library that reads the command line itself
    (Hydra's app, lm-eval's CLI); its SystemExit becomes the returned code. sys.argv is put back
    after, so an in-process caller (a test, a notebook) gets its own."""
    saved = sys.argv
    sys.argv = [prog, *argv]
    try:
        return entry() or 0
    except SystemExit as stop:
        return exit_code(stop)
    finally:
        sys.argv = saved


def exit_with(code: int | None) -> None:
    """For `if __name__ == "__main__"`: the command's code as the exit status. Success returns
    normally (the interpreter then exits 0), so a caller running the module in-process (runpy, a
    notebook) sees no SystemExit unless the command failed."""
    if code:
        sys.exit(code)

"""One argument convention for every command, and the frame each command runs in.

A command declares its own keys (`Key`: name, default, help); everything else on its command line
is a Hydra-style override of the project config (`model=cpu_tiny`, `train.tokens=65536`,
`+probe=default`, `hydra/launcher=basic`), passed through to the front door that composes it, for
the commands that take overrides. Own keys are written `key=value`; a key may also keep the
`--flag` / `--flag VALUE` spelling it had before this convention (`Key.flag`), so every existing
command line still works. Bare words fill the declared positional keys in order.

    COMMAND = Command("export", __doc__, keys=(Key("checkpoint", REQUIRED, "checkpoint or job folder"),
                                               Key("out", REQUIRED, "new folder"),
                                               Key("verify", True, "load it back and compare logits")))

    def main(argv=None):
        return run_command(COMMAND, argv, body)     # body(values: dict, overrides: list[str])

`run_command` prints the module docstring plus the key table for -h/--help (exit 0), and turns a
bad key or value (errors.ConfigError, or Hydra's own composition and override-grammar errors) into
one line on stderr with exit 2. Values take the type of their default (bool, int, float, str);
`choices` restricts them; a key given twice or a required key left out is one line too. `main`
returns the exit code; a command module (and its `python -m fixedcode_study.<verb>` alias) ends
with `if __name__ == "__main__": exit_with(main())`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..errors import ConfigError

REQUIRED = object()  # a declared key without a default


@dataclass(frozen=True)
class Key:
    name: str
    default: Any = REQUIRED
    help: str = ""
    flag: str | None = None          # the key's --flag spelling, kept from the command's argparse days
    choices: tuple[Any, ...] | None = None
    positional: bool = False         # filled by bare words, in declaration order
    many: bool = False               # a list: every remaining bare word (positional) or each repeat (flag)
    kind: type | None = None         # the value's type when the default (None, REQUIRED) does not say it


@dataclass(frozen=True)
class Command:
    name: str                        # as typed after `fixedcode`
    doc: str | None                  # the module docstring: the help text
    keys: tuple[Key, ...] = ()
    overrides: bool = False          # other key=value arguments are Hydra overrides

    def key(self, name: str) -> Key:
        return next(k for k in self.keys if k.name == name)


def _kind(key: Key) -> type:
    if key.kind is not None:
        return key.kind
    default = key.default
    if isinstance(default, list):
        return str
    return type(default) if isinstance(default, (bool, int, float)) else str


def convert(key: Key, text: str) -> Any:
    """`text` as the key's type; a value outside its choices or of the wrong type is one line."""
    kind = _kind(key)
    if kind is bool:
        lowered = text.lower()
        if lowered not in ("true", "1", "yes", "false", "0", "no"):
            raise ConfigError(key.name, f"{text!r} is not true or false", f"pass {key.name}=true or {key.name}=false")
        value: Any = lowered in ("true", "1", "yes")
    elif kind in (int, float):
        try:
            value = kind(text)
        except ValueError:
            raise ConfigError(key.name, f"{text!r} is not a{'n integer' if kind is int else ' number'}",
                              f"pass {key.name}=<{kind.__name__}>") from None
    else:
        value = text
    if key.choices is not None and value not in key.choices:
        raise ConfigError(key.name, f"{text!r} is not one of {', '.join(map(str, key.choices))}",
                          f"pass {key.name}=<one of them>")
    return value


def _looks_like_override(arg: str) -> bool:
    """Hydra override grammar's left side: key=..., +key=..., ++key=..., ~key, group/option=..."""
    return ("=" in arg and not arg.startswith("-")) or arg.startswith("~")


def parse(command: Command, argv: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """(own values, Hydra overrides) of one command line."""
    by_name = {k.name: k for k in command.keys}
    by_flag = {k.flag: k for k in command.keys if k.flag}
    positional = [k for k in command.keys if k.positional]
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

    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg.startswith("--") or (arg.startswith("-") and len(arg) == 2 and not arg[1].isdigit()):
            flag, eq, inline = arg.partition("=")
            key = by_flag.get(flag)
            if key is None:
                raise ConfigError(flag, f"is not an option of `fixedcode {command.name}`", usage)
            if _kind(key) is bool and not eq:
                put(key, "true")
                continue
            if not eq:
                if i >= len(args) or args[i].startswith("--"):  # `--tasks --out X`: --tasks got no value
                    raise ConfigError(flag, "needs a value", usage)
                inline = args[i]
                i += 1
            put(key, inline)
        elif _looks_like_override(arg):
            name, _, text = arg.partition("=")
            if name in by_name:  # a positional key may be given by name too
                put(by_name[name], text)
            elif command.overrides:
                overrides.append(arg)
            else:
                raise ConfigError(name, f"is not a setting of `fixedcode {command.name}`", usage)
        else:
            open_slots = [k for k in positional if k.many or k.name not in values]
            if not open_slots:
                raise ConfigError(arg, "is not key=value", usage)
            put(open_slots[0], arg)
    for key in command.keys:
        if key.name in values:
            continue
        if key.default is REQUIRED:
            raise ConfigError(key.name, "missing", f"pass {key.name}=<{key.help or 'value'}>; {usage}")
        values[key.name] = list(key.default) if isinstance(key.default, list) else key.default
    return values, overrides


def help_text(command: Command) -> str:
    lines = [(command.doc or f"fixedcode {command.name}").rstrip()]
    if command.keys:
        flags = any(key.flag for key in command.keys)
        lines += ["", "settings of this command (key=value" + ("; the --flag spelling works too):" if flags else "):")]
        for key in command.keys:
            spelled = key.name + ("=..." if not key.positional else "") + (f" | {key.flag}" if key.flag else "")
            default = "required" if key.default is REQUIRED else f"default {key.default!r}"
            lines.append(f"  {spelled:<34} {key.help} ({default})")
    if command.overrides:
        lines += ["", "every other key=value is a Hydra override of the project config (conf/)."]
    return "\n".join(lines)


def one_line(err: BaseException) -> str:
    """A Hydra error as one line (its first line: the rest is a hint list or a traceback)."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def run_command(command: Command, argv: Sequence[str] | None,
                body: Callable[[dict[str, Any], list[str]], int | None]) -> int:
    """Help, parse, call `body`; a bad setting anywhere below is one line on stderr and exit 2."""
    args = list(sys.argv[1:] if argv is None else argv)
    if {"-h", "--help"} & set(args):
        print(help_text(command))
        return 0
    # Imported after --help, which answers without loading Hydra.
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        values, overrides = parse(command, args)
        return body(values, overrides) or 0
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except (HydraException, OmegaConfBaseException) as err:  # an unknown preset or a malformed override
        print(f"error: overrides: {one_line(err)}; see conf/ for the groups and keys", file=sys.stderr)
        return 2


def exit_with(code: int | None) -> None:
    """For `if __name__ == "__main__"`: the command's code as the exit status. Success returns
    normally (the interpreter then exits 0), so a caller running the module in-process (runpy, a
    notebook) sees no SystemExit unless the command failed."""
    if code:
        sys.exit(code)

"""The small commands' command lines (export, generate, evaluate, probe, describe): `run_command`
(help, and a bad setting as one line with exit 2), and `parse` for `key=value` arguments: each key is
declared with its default, a value is converted to the default's type, and anything else is a
one-line error naming the key (errors.ConfigError)."""

from __future__ import annotations

import sys
from typing import Any, Callable

from ..errors import ConfigError

REQUIRED = object()  # a declared key without a default


def _convert(key: str, text: str, default: Any) -> Any:
    if isinstance(default, bool):
        if text.lower() in ("true", "1", "yes"):
            return True
        if text.lower() in ("false", "0", "no"):
            return False
        raise ConfigError(key, f"{text!r} is not true or false", f"pass {key}=true or {key}=false")
    for kind in (int, float):
        if isinstance(default, kind):
            try:
                return kind(text)
            except ValueError:
                raise ConfigError(key, f"{text!r} is not a{'n integer' if kind is int else ' number'}",
                                  f"pass {key}=<{kind.__name__}>") from None
    return text


def take(args: list[str], keys: tuple[str, ...]) -> dict[str, str | None]:
    """The values of `keys` among `args` (None when absent), for commands whose other arguments are
    Hydra overrides (evaluate, probe); a key given twice is an error."""
    found: dict[str, str | None] = {}
    for key in keys:
        values = [a.split("=", 1)[1] for a in args if a.startswith(f"{key}=")]
        if len(values) > 1:
            raise ConfigError(key, "given twice", "pass it once")
        found[key] = values[0] if values else None
    return found


def parse(args: list[str], declared: dict[str, Any], usage: str) -> dict[str, Any]:
    """`declared`: key -> default (REQUIRED for none). Returns every key's value."""
    values: dict[str, Any] = {}
    for arg in args:
        key, sep, text = arg.partition("=")
        if not sep or key not in declared:
            raise ConfigError(key, "is not a setting of this command" if sep else "is not key=value", usage)
        if key in values:
            raise ConfigError(key, "given twice", "pass it once")
        values[key] = _convert(key, text, declared[key])
    for key, default in declared.items():
        if key not in values:
            if default is REQUIRED:
                raise ConfigError(key, "missing", usage)
            values[key] = default
    return values


def run_command(argv: list[str] | None, doc: str | None, body: Callable[[list[str]], None]) -> None:
    """The small commands' shared frame: -h/--help prints the module docstring; a ConfigError
    (a bad setting) prints its one line and exits 2."""
    args = list(sys.argv[1:] if argv is None else argv)
    if {"-h", "--help"} & set(args):
        print(doc)
        return
    try:
        body(args)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)

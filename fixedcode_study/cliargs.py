"""`key=value` command lines for the small commands (export, generate): each key is declared with
its default, a value is converted to the default's type, and anything else is a one-line error
naming the key (errors.ConfigError)."""

from __future__ import annotations

from typing import Any

from .errors import ConfigError

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

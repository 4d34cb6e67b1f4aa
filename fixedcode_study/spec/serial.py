"""A frozen spec as plain JSON data and back: `to_json(spec)` and `from_json(cls, data)`.

The rule is structural, read from each dataclass's field annotations: a nested spec becomes an
object, a tuple a list (and a tuple again on the way back), a mapping a plain dict, a scalar
itself. A class with its own `to_json` / `from_json` (build.ModelSpec, which the record layer reads
below spec/) is asked to do its own part. `from_json(cls, to_json(spec)) == spec` for every spec of
this package (tests/spec/test_spec.py), and the JSON text of both is the same.
"""

from __future__ import annotations

import copy
import dataclasses
import types
import typing
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

__all__ = ["from_json", "to_json"]


def to_json(spec: Any) -> dict[str, Any]:
    """Every field of the dataclass `spec` as plain JSON data."""
    return {f.name: _encode(getattr(spec, f.name)) for f in dataclasses.fields(spec)}


def _encode(value: Any) -> Any:
    if hasattr(value, "to_json") and not isinstance(value, type):
        return value.to_json()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_json(value)
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _encode(v) for k, v in value.items()}
    return value


@lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_json(cls: type, data: Mapping[str, Any]) -> Any:
    """The `cls` instance `to_json` made `data` from (every field present: a missing one is a KeyError)."""
    hints = _hints(cls)
    return cls(**{f.name: _decode(hints[f.name], data[f.name]) for f in dataclasses.fields(cls)})


def _decode(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return _decode(options[0], value)
        return copy.deepcopy(value)  # a union of plain values (bool | str, ...): JSON gives the value itself
    if isinstance(hint, type) and hasattr(hint, "from_json"):
        return hint.from_json(value)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return from_json(hint, value)
    if origin is tuple:
        item = args[0] if args else Any
        return tuple(_decode(item, v) for v in value)
    return copy.deepcopy(value)

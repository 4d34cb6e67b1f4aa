"""A job's variant name, as the analysis writes it and as its W&B run is named.

`variant_label("binary16", {"output": "bitchain"}, ["output"])` is ``binary16 (output=bitchain)``:
the input name plus each labelling column's last dotted part and value. The analysis
(analysis/read/variants.py) decides which columns label a study's variants; the W&B mirror
(training/loggers.py) names each run with the same function, so a run's job type reads as the
report's row. Kept here, below both, so there is one spelling.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["DEFAULT_OUTPUT", "OUTPUT", "format_value", "head_variant", "is_missing", "variant_label"]

OUTPUT = "output"            # results.json "output": the head (conf/output)
DEFAULT_OUTPUT = "untied"    # the paper's head and the default: a plain variant does not name it


def is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def format_value(value: Any) -> str:
    if is_missing(value):
        return "default"  # the prop is absent from this job's record: its input config left it unset
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def variant_label(input_name: str, row: Mapping[str, Any], props: Sequence[str]) -> str:
    """'gf2 (code_width=24, lr=0.001)': the input name plus each labelling column's last dotted part."""
    if not props:
        return input_name
    parts = [f"{p.rpartition('.')[2]}={format_value(row[p])}" for p in props]
    return f"{input_name} ({', '.join(parts)})"


def head_variant(input_name: str, output_name: str, head_chosen: bool) -> str:
    """One job's variant by input and head: ``binary16 (output=fixed)``. The head is named when it is
    not the default or when the job's command line chose it (`output=...`, as every grid of a study
    that varies the head does), which is when the analysis names it too: in a study of several heads
    every variant carries its head, ``learned (output=untied)`` included; elsewhere ``learned``."""
    named = head_chosen or output_name != DEFAULT_OUTPUT
    return variant_label(input_name, {OUTPUT: output_name}, [OUTPUT] if named else [])

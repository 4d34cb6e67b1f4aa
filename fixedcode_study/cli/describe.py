"""`fixedcode describe [overrides]`: parameter accounting and input properties as JSON.

The model is built on the meta device (shapes only, no memory), so `model=paper_1p7b` is instant.
  fixedcode describe model=paper_1p7b input=binary16      # one combination, JSON
  fixedcode describe inputs=true model=cpu_tiny           # every conf/input variant, markdown
  fixedcode describe outputs=true experiment=paper_1p7b   # every conf/output head, markdown
  fixedcode describe ladder=true                          # every conf/model preset, markdown
`ladder=true`, `inputs=true` and `outputs=true` take further overrides applied to every row (e.g.
model.vocab_size=32768).
What is computed: fixedcode_study/spec/description.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..config import available, compose
from ..errors import ConfigError
from .args import Command, exit_with, run_command


@dataclass(frozen=True, kw_only=True)
class DescribeOptions:
    inputs: bool = False
    """every conf/input variant as a markdown table"""
    ladder: bool = False
    """every conf/model preset as a markdown table"""
    outputs: bool = False
    """every conf/output head (with a learned and a binary16 input) as a markdown table"""

    def __post_init__(self) -> None:
        tables = [name for name in ("inputs", "ladder", "outputs") if getattr(self, name)]
        if len(tables) > 1:
            raise ConfigError(tables[1], f"given with {tables[0]}=true", "ask for one table at a time")


COMMAND = Command("describe", __doc__, DescribeOptions, overrides=True)


def described(overrides: list[str]) -> dict[str, Any]:
    """describe() of the composed, resolved config of these overrides."""
    from ..spec import JobSpec
    from ..spec.description import describe

    return describe(JobSpec.from_cfg(compose(overrides)))


def body(options: DescribeOptions, overrides: list[str]) -> int:
    from ..spec.description import (LADDER_INPUTS, OUTPUT_INPUTS, inputs_markdown, ladder_markdown, output_order,
                                    outputs_markdown)

    if options.ladder:
        print(ladder_markdown({model: {role: described([f"model={model}", *overrides, f"input={name}"])
                                       for role, name in LADDER_INPUTS.items()} for model in available("model")}))
    elif options.outputs:
        pairs = [(i, o) for o in output_order(available("output")) for i in OUTPUT_INPUTS if o != "tied" or i == "learned"]
        print(outputs_markdown({(i, o): described([*overrides, f"input={i}", f"output={o}"]) for i, o in pairs}))
    elif options.inputs:
        print(inputs_markdown({name: described([f"input={name}", *overrides]) for name in available("input")}))
    else:
        print(json.dumps(described(overrides), indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(COMMAND, argv, body)


if __name__ == "__main__":
    exit_with(main())

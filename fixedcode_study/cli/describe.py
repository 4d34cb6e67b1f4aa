"""`python -m fixedcode_study.describe [overrides]`: parameter accounting and input properties as JSON.

The model is built on the meta device (shapes only, no memory), so `model=paper_1p7b` is instant.
  python -m fixedcode_study.describe model=paper_1p7b input=binary16      # one combination, JSON
  python -m fixedcode_study.describe --inputs model=cpu_tiny              # every conf/input variant, markdown
  python -m fixedcode_study.describe --outputs experiment=paper_1p7b      # every conf/output head, markdown
  python -m fixedcode_study.describe --ladder                             # every conf/model preset, markdown
`--ladder`, `--inputs` and `--outputs` take further overrides applied to every row (e.g. model.vocab_size=32768).
What is computed: fixedcode_study/spec/description.py.
"""

from __future__ import annotations

import json
from typing import Any

from ..config import available, compose
from ..spec import JobSpec
from ..spec.description import (LADDER_INPUTS, OUTPUT_INPUTS, describe, inputs_markdown, ladder_markdown,
                                output_order, outputs_markdown)
from .args import Command, Key, exit_with, run_command

COMMAND = Command("describe", __doc__, overrides=True, keys=(
    Key("inputs", False, "every conf/input variant as a markdown table", flag="--inputs"),
    Key("ladder", False, "every conf/model preset as a markdown table", flag="--ladder"),
    Key("outputs", False, "every conf/output head (with a learned and a binary16 input) as a markdown table",
        flag="--outputs"),
))


def described(overrides: list[str]) -> dict[str, Any]:
    """describe() of the composed, resolved config of these overrides."""
    return describe(JobSpec.from_cfg(compose(overrides)))


def body(values: dict[str, Any], overrides: list[str]) -> int:
    if values["ladder"]:
        print(ladder_markdown({model: {role: described([f"model={model}", *overrides, f"input={name}"])
                                       for role, name in LADDER_INPUTS.items()} for model in available("model")}))
    elif values["outputs"]:
        pairs = [(i, o) for o in output_order(available("output")) for i in OUTPUT_INPUTS if o != "tied" or i == "learned"]
        print(outputs_markdown({(i, o): described([*overrides, f"input={i}", f"output={o}"]) for i, o in pairs}))
    elif values["inputs"]:
        print(inputs_markdown({name: described([f"input={name}", *overrides]) for name in available("input")}))
    else:
        print(json.dumps(described(overrides), indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(COMMAND, argv, body)


if __name__ == "__main__":
    exit_with(main())

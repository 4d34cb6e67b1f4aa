"""`python -m fixedcode_study.lm_eval_model --model fixedcode --model_args checkpoint=PATH ...`.

lm-eval's own command line (every `lm_eval` flag works unchanged) with our checkpoints registered
as the `fixedcode` model first: lm-eval 0.4 reads no plugin entry points, so the plain `lm_eval`
command cannot find it. The model itself is evaluation/lm.py (FixedCodeLM).
"""

from __future__ import annotations

from ..evaluation import lm as _registers_fixedcode  # noqa: F401  (import registers the model)


def cli() -> None:
    from lm_eval.__main__ import cli_evaluate

    cli_evaluate()


if __name__ == "__main__":
    cli()

"""`python -m fixedcode_study.describe [overrides]`: parameter accounting and input properties as JSON.

The model is built on the meta device (shapes only, no memory), so `model=paper_1p7b` is instant.
Example: python -m fixedcode_study.describe model=paper_1p7b input=binary16
"""

from __future__ import annotations

import json
import sys
from typing import Any

import torch
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

from .build import build_model
from .config import CONFIG_DIR
from .errors import ConfigError
from .model import parameter_groups


def compose_config(overrides: list[str]) -> DictConfig:
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


def describe(cfg: DictConfig) -> dict[str, Any]:
    with torch.device("meta"):
        model = build_model(cfg.model, cfg.input)
    params = parameter_groups(model)
    return {
        "input": cfg.input.name,
        "model": cfg.model.name,
        "model_source": cfg.model.get("source"),
        "architecture": {k: v for k, v in OmegaConf.to_container(cfg.model, resolve=True).items()
                         if k not in ("name", "source")},
        "params": params,
        "input_table_share_of_trainable": params["input_trainable"] / params["trainable"],
        "input_props": model.input.properties(),
    }


def main(argv: list[str] | None = None) -> None:
    overrides = list(sys.argv[1:] if argv is None else argv)
    try:
        cfg = compose_config(overrides)
        print(json.dumps(describe(cfg), indent=2))
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()

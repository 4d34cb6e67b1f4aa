"""`python -m fixedcode_study.probe checkpoint=PATH [probe.*=...]`: representation probes.

    python -m fixedcode_study.probe checkpoint=outputs/multirun/main                # a whole study
    python -m fixedcode_study.probe checkpoint=outputs/multirun/main/input=gf2,seed=1  # one job
    python -m fixedcode_study.probe checkpoint=DIR/checkpoints/final probe.tokens=4096 probe.init=false
    python -m fixedcode_study.probe hf=exports/gf2-s1 study=outputs/multirun/main   # an outside model

PATH is a final checkpoint folder, a job directory or a study directory (every completed job below
it). Each job gets probes.json beside its results.json (its init, its step-*.ckpt snapshots and its
final model); a study also gets probes_cross.json (layer-by-layer CKA between every pair of final
models). Settings: conf/probe/default.yaml; measures: fixedcode_study/probing/__init__.py.
Then `python -m analysis PATH` renders them with the rest of the report.

hf= probes a Hugging Face Llama-family folder or Hub name instead (hub/external.py: its final
weights only, on the default corpus's held-out documents in its own tokenization); its probes.json
goes to <study>/external/<name@revision>/ (study= defaults to ${out_root}/multirun/main).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ..config import compose
from ..errors import ConfigError
from ..probing.linear import METHODS
from ..probing.study import probe_study
from .args import Command, Key, exit_with, run_command

COMMAND = Command("probe", __doc__, overrides=True, keys=(
    Key("checkpoint", None, "a checkpoint folder, a job directory or a study directory", kind=str),
    Key("hf", None, "a Hugging Face folder or Hub name instead", kind=str),
    Key("study", None, "hf= only: the study whose external/ gets probes.json", kind=str),
))


def probe_config(overrides: list[str]) -> DictConfig:
    """The project config with conf/probe/default.yaml and these probe.* overrides."""
    bad = [o for o in overrides if not o.startswith(("probe.", "probe="))]
    if bad:
        raise ConfigError(bad[0].split("=")[0], "is not a probe setting", "pass checkpoint=PATH and probe.<key>=<value>")
    return compose(["+probe=default", *(o.replace("probe=", "+probe=", 1) if o.startswith("probe=") else o
                                        for o in overrides if not o.startswith("probe=default"))])


def probe_settings(cfg: DictConfig) -> dict[str, Any]:
    settings = OmegaConf.to_container(cfg.probe, resolve=True)
    if settings["method"] not in METHODS:  # checked before any model is loaded
        raise ConfigError("probe.method", f"{settings['method']!r} is not a probe", f"use one of {', '.join(METHODS)}")
    return settings


def body(own: dict[str, Any], overrides: list[str]) -> int:
    started = time.perf_counter()
    if (own["checkpoint"] is None) == (own["hf"] is None):
        raise ConfigError("checkpoint", "missing" if own["checkpoint"] is None else "given twice",
                          "pass checkpoint=<a checkpoint folder, a job directory or a study directory> "
                          "or hf=<a Hugging Face folder or Hub name>")
    if own["study"] is not None and own["hf"] is None:
        raise ConfigError("study", "applies to hf= models only", "drop study= or use hf=")
    cfg = probe_config(overrides)
    settings = probe_settings(cfg)
    if own["hf"]:
        from ..hub.external import external_subject

        study = own["study"] or str(Path(cfg.out_root) / "multirun" / "main")
        subject = external_subject(own["hf"], study, OmegaConf.to_container(cfg.data, resolve=True))
        settings.update(init=False, snapshots=False)  # an outside model has no init stream or snapshots here
        records = probe_study(str(subject.out_dir), settings, subjects=[subject])
    else:
        from ..hub.source import checkpoint_folder  # a job, a study, or an export of a job here: one rule

        records = probe_study(str(checkpoint_folder(own["checkpoint"], f"pass hf={own['checkpoint']}")), settings)
    print(f"[probe] {len(records)} job(s) probed in {time.perf_counter() - started:.1f}s")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(COMMAND, argv, body)


if __name__ == "__main__":
    exit_with(main())

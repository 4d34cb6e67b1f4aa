"""`fixedcode probe checkpoint=PATH [probe.*=...]`: representation probes.

    fixedcode probe checkpoint=outputs/multirun/main                     # a whole study
    fixedcode probe checkpoint=outputs/multirun/main/input=gf2,seed=1    # one job
    fixedcode probe checkpoint=DIR/checkpoints/final probe.tokens=4096 probe.init=false
    fixedcode probe hf=exports/gf2-s1 study=outputs/multirun/main        # an outside model

PATH is a final checkpoint folder, a job directory or a study directory (every completed job below
it). Each job gets probes.json beside its results.json (its init, its step-*.ckpt snapshots and its
final model); a study also gets probes_cross.json (layer-by-layer CKA between every pair of final
models). Settings: conf/probe/default.yaml; measures: fixedcode_study/probing/__init__.py.
Then `fixedcode analyze PATH` renders them with the rest of the report.

hf= probes a Hugging Face Llama-family folder or Hub name instead (hub/external.py: its final
weights only, on the default corpus's held-out documents in its own tokenization); its probes.json
goes to <study>/external/<name@revision>/ (study= defaults to ${out_root}/multirun/main).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ..config import compose
from ..errors import ConfigError
from .args import Command, exit_with, run_command


@dataclass(frozen=True, kw_only=True)
class ProbeOptions:
    checkpoint: str | None = None
    """a checkpoint folder, a job directory or a study directory"""
    hf: str | None = None
    """a Hugging Face folder or Hub name instead"""
    study: str | None = None
    """hf= only: the study whose external/ gets probes.json"""

    def __post_init__(self) -> None:
        if (self.checkpoint is None) == (self.hf is None):
            raise ConfigError("checkpoint", "missing" if self.checkpoint is None else "given together with hf=",
                              "pass checkpoint=<a checkpoint folder, a job directory or a study directory> "
                              "or hf=<a Hugging Face folder or Hub name>")
        if self.study is not None and self.hf is None:
            raise ConfigError("study", "applies to hf= models only", "drop study= or use hf=")


COMMAND = Command("probe", __doc__, ProbeOptions,
                  overrides="every other key=value is a probe.<key>=<value> override of conf/probe/default.yaml.")


def probe_config(overrides: list[str]) -> DictConfig:
    """The project config with conf/probe/default.yaml and these probe.* overrides."""
    bad = [o for o in overrides if not o.startswith(("probe.", "probe="))]
    if bad:
        raise ConfigError(bad[0].split("=")[0], "is not a probe setting", "pass checkpoint=PATH and probe.<key>=<value>")
    return compose(["+probe=default", *(o.replace("probe=", "+probe=", 1) if o.startswith("probe=") else o
                                        for o in overrides if not o.startswith("probe=default"))])


def probe_settings(cfg: DictConfig) -> dict[str, Any]:
    from ..probing.linear import METHODS

    settings = OmegaConf.to_container(cfg.probe, resolve=True)
    if settings["method"] not in METHODS:  # checked before any model is loaded
        raise ConfigError("probe.method", f"{settings['method']!r} is not a probe", f"use one of {', '.join(METHODS)}")
    return settings


def body(options: ProbeOptions, overrides: list[str]) -> int:
    from ..probing.study import probe_study

    started = time.perf_counter()
    cfg = probe_config(overrides)
    settings = probe_settings(cfg)
    if options.hf:
        from ..hub.external import external_subject

        study = options.study or str(Path(cfg.out_root) / "multirun" / "main")
        subject = external_subject(options.hf, study, OmegaConf.to_container(cfg.data, resolve=True))
        settings.update(init=False, snapshots=False)  # an outside model has no init stream or snapshots here
        records = probe_study(str(subject.out_dir), settings, subjects=[subject])
    else:
        from ..hub.source import checkpoint_folder  # a job, a study, or an export of a job here: one rule

        records = probe_study(str(checkpoint_folder(options.checkpoint, f"pass hf={options.checkpoint}")), settings)
    print(f"[probe] {len(records)} job(s) probed in {time.perf_counter() - started:.1f}s")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(COMMAND, argv, body)


if __name__ == "__main__":
    exit_with(main())

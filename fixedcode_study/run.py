"""Hydra entry point: `python -m fixedcode_study.run [-m] [overrides]`.

Thin by design: compose the config, skip jobs that already completed, call `train_job`.
In a sweep (-m) a failing job is recorded as failed and the sweep goes on; the process then exits
non-zero and prints which jobs failed. A bad setting stops with one line naming the field.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from .config import CONFIG_DIR
from .errors import ConfigError
from .results import is_completed, read_results
from .train import train_job

FAILED: list[tuple[str, str]] = []
SKIPPED: list[str] = []


@hydra.main(config_path=CONFIG_DIR, config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    hc = HydraConfig.get()
    job_dir = Path(hc.runtime.output_dir)
    multirun = hc.mode == RunMode.MULTIRUN
    if is_completed(job_dir) and not cfg.force:
        print(f"[run] {job_dir} already completed; skipping (force=true re-runs it)")
        SKIPPED.append(str(job_dir))
        return read_results(job_dir)["final"]["val_loss"]
    try:
        record = train_job(cfg, job_dir, list(hc.overrides.task))
    except ConfigError as err:
        if not multirun:
            print(f"error: {err}", file=sys.stderr)
            sys.exit(2)
        FAILED.append((str(job_dir), str(err)))
        print(f"[run] job {job_dir.name} failed: {err}", file=sys.stderr)
        return None
    except Exception as err:  # noqa: BLE001 - a sweep must outlive one broken job
        if not multirun:
            raise
        FAILED.append((str(job_dir), f"{type(err).__name__}: {err}"))
        print(f"[run] job {job_dir.name} failed: {type(err).__name__}: {err}", file=sys.stderr)
        return None
    final = record["final"]
    print(f"[run] {job_dir.name}: val_loss={final['val_loss']:.4f} val_ppl={final['val_ppl']:.2f} "
          f"val_bpb={final['val_bpb']:.4f} ({record['tokens_per_second']:.0f} tokens/s) -> {job_dir}")
    return final["val_loss"]


def cli() -> None:
    main()
    if SKIPPED:
        print(f"[run] {len(SKIPPED)} job(s) were already complete and skipped")
    if FAILED:
        print(f"[run] {len(FAILED)} job(s) failed:", file=sys.stderr)
        for job, why in FAILED:
            print(f"  {job}: {why}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    cli()

"""Where metrics go: a local long-format CSV (the source of truth) and Weights & Biases.

`metrics.csv` has one row per (step, metric): `step,tokens,metric,value`. Long format can be
appended forever (new metrics never force a rewrite, a resumed run never wipes earlier rows)
and is what analysis reads directly. On resume, rows a killed attempt logged *after* the
checkpoint's step are dropped first (resume.trim_metrics), so each (step, metric) appears once.

W&B runs offline automatically when there is no API key or no route to the server; offline runs
can be uploaded later with `wandb sync <job_dir>/wandb/offline-run-*`.
"""

from __future__ import annotations

import csv
import os
import socket
from argparse import Namespace
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlparse

from lightning.pytorch.loggers import Logger
from lightning.pytorch.utilities import rank_zero_only


class LongCSVLogger(Logger):
    """Appends `step,tokens,metric,value` rows to a job's metrics.csv, flushed on every call."""

    def __init__(self, path: str | os.PathLike):
        super().__init__()
        self.path = Path(path)

    @property
    def name(self) -> str:
        return "csv"

    @property
    def version(self) -> str:
        return "0"

    @rank_zero_only
    def log_hyperparams(self, params: dict[str, Any] | Namespace, *args: Any, **kwargs: Any) -> None:
        pass  # the resolved config is written to results.json and config.yaml instead

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        tokens = metrics.get("tokens", "")
        new_file = not self.path.exists()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", newline="") as fh:
            writer = csv.writer(fh)
            if new_file:
                writer.writerow(["step", "tokens", "metric", "value"])
            for key, value in metrics.items():
                if key != "tokens":
                    writer.writerow([step, int(tokens) if tokens != "" else "", key, repr(float(value))])


def _has_wandb_key() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        import netrc

        host = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname
        return netrc.netrc().authenticators(host) is not None
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return False


def _reachable(url: str, timeout: float = 1.5) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname, parsed.port or 443), timeout=timeout):
            return True
    except OSError:
        return False


def resolve_wandb_mode(requested: str) -> str:
    """'auto' -> 'online' with a key and a route to the server, else 'offline'.

    An explicit WANDB_MODE in the environment wins, as wandb users expect.
    """
    env = os.environ.get("WANDB_MODE")
    if env:
        return env
    if requested != "auto":
        return requested
    if _has_wandb_key() and _reachable(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")):
        return "online"
    return "offline"


def make_wandb_logger(cfg: Mapping[str, Any], job_dir: Path, run_name: str, group: str, job_type: str,
                      tags: list[str], config: dict[str, Any], run_id: str | None = None):
    """A Lightning WandbLogger for one job; its curves use training tokens as the x-axis.

    `run_id` (kept in results.json) makes a resumed job continue the same W&B run rather than
    start a second one; a fresh start gets a new id.
    """
    from lightning.pytorch.loggers import WandbLogger

    mode = resolve_wandb_mode(str(cfg.get("mode", "auto")))
    logger = WandbLogger(
        project=cfg.get("project", "fixedcode-study"),
        entity=cfg.get("entity"),
        name=run_name,
        group=group,
        job_type=job_type,
        tags=tags,
        save_dir=str(job_dir),
        mode=mode,
        config=config,
        reinit="finish_previous",  # several jobs in one process (Hydra multirun) each get a run
        id=run_id,
        resume="allow" if run_id else None,
    )
    run = logger.experiment
    run.define_metric("tokens")
    for prefix in ("train/*", "val/*", "eval/*"):
        run.define_metric(prefix, step_metric="tokens")
    return logger

"""One training job, start to finish: data -> model -> Lightning fit -> checkpoint -> results.json.

`train_job` is what the Hydra app calls per job; it is plain Python so tests and other launchers
can call it directly with a composed config.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import lightning as L
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from .batches import TokenDataModule
from .build import build_model
from .checkpoint import save_checkpoint
from .data import prepare
from .errors import ConfigError
from .model import parameter_groups
from .results import RESULTS_FILE, SCHEMA_VERSION, versions, write_json_atomic
from .task import LanguageModelTask
from .tracking import LongCSVLogger, make_wandb_logger


def world_size(trainer_cfg: DictConfig) -> int:
    devices = trainer_cfg.get("devices", 1)
    n = devices if isinstance(devices, int) and devices > 0 else 1
    return n * int(trainer_cfg.get("num_nodes", 1))


def plan_steps(cfg: DictConfig) -> tuple[int, int]:
    """(tokens per optimizer step, optimizer steps) for the token budget."""
    t = cfg.train
    if int(t.tokens) <= 0:
        raise ConfigError("train.tokens", f"budget {t.tokens} is not positive", "set train.tokens to a positive count")
    per_step = int(t.batch_size) * int(t.seq_len) * int(t.grad_accum) * world_size(cfg.trainer)
    return per_step, max(1, math.ceil(int(t.tokens) / per_step))


def base_record(cfg: DictConfig, job_dir: Path, overrides: list[str]) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "status": "running",
        "error": None,
        "sweep": cfg.name,
        "job_key": job_dir.name,
        "job_dir": str(job_dir.resolve()),
        "input": cfg.input.name,
        "seed": int(cfg.seed),
        "model": cfg.model.name,
        "code_width": cfg.input.get("code_width"),
        "overrides": list(overrides),
        "config": OmegaConf.to_container(cfg, resolve=True),
        "versions": versions(),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def train_job(cfg: DictConfig, job_dir: str | Path, overrides: list[str] | None = None) -> dict[str, Any]:
    """Train one model; returns the completed results record (also written to results.json)."""
    job_dir = Path(job_dir)
    job_dir.mkdir(parents=True, exist_ok=True)
    record = base_record(cfg, job_dir, overrides or [])
    write_json_atomic(job_dir / RESULTS_FILE, record)
    wandb_logger = None
    try:
        L.seed_everything(int(cfg.seed), workers=True, verbose=False)
        tokens_per_step, max_steps = plan_steps(cfg)
        prepared = prepare(cfg.data)
        model = build_model(cfg.model, cfg.input)  # after seeding: init depends on the seed only
        props = model.input.properties()
        params = parameter_groups(model)
        record.update(input_props=props, params=params, code_width=props.get("code_width"),
                      data={"name": cfg.data.name, **{k: prepared.meta[k] for k in (
                          "vocab_size", "tokenizer_vocab_size", "train_tokens", "val_tokens",
                          "val_bytes", "unigram_val_ppl", "cache_key")}},
                      plan={"tokens_per_step": tokens_per_step, "max_steps": max_steps})
        write_json_atomic(job_dir / RESULTS_FILE, record)
        if hasattr(model.input, "matrix_record"):
            write_json_atomic(job_dir / "gf2_matrix.json", model.input.matrix_record())
        (job_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))

        loggers: list[Any] = [LongCSVLogger(job_dir)]
        if cfg.logger.get("wandb"):
            wandb_logger = make_wandb_logger(
                cfg.logger.wandb, job_dir, run_name=f"{cfg.name}/{job_dir.name}", group=cfg.name,
                job_type=cfg.input.name, tags=[f"input:{cfg.input.name}", f"seed:{cfg.seed}", f"model:{cfg.model.name}"],
                config={**record["config"], "input_props": props, "params": params},
            )
            loggers.append(wandb_logger)

        dm = TokenDataModule(prepared, int(cfg.train.seq_len), int(cfg.train.batch_size), int(cfg.seed),
                             int(cfg.train.val_batch_size))
        task = LanguageModelTask(model, cfg.optim, max_steps, tokens_per_step,
                                 torch.from_numpy(prepared.token_bytes()), int(cfg.train.log_every))
        trainer: L.Trainer = instantiate(
            cfg.trainer, max_steps=max_steps, max_epochs=-1, logger=loggers, default_root_dir=str(job_dir),
            val_check_interval=min(int(cfg.train.val_every), max_steps), check_val_every_n_epoch=None,
            accumulate_grad_batches=int(cfg.train.grad_accum), log_every_n_steps=int(cfg.train.log_every),
        )
        t0 = time.time()
        trainer.fit(task, datamodule=dm)
        if task.last_val_step != trainer.global_step:  # budget did not end on a validation step
            trainer.validate(task, datamodule=dm, verbose=False)
        wall = time.time() - t0

        ckpt = save_checkpoint(job_dir / "checkpoints" / "final", model, cfg.model, cfg.input, prepared.tokenizer_path,
                               extra={"data": record["data"], "seed": int(cfg.seed), "sweep": cfg.name})
        final = {"val_loss": task.last_val["val/loss"], "val_ppl": task.last_val["val/ppl"],
                 "val_bpb": task.last_val["val/bpb"], "val_tokens": int(task.last_val["val/tokens"])}
        record.update(
            status="completed", final=final, tokens_seen=task.tokens_seen, steps=trainer.global_step,
            train_seconds=round(task.train_seconds, 3), wall_seconds=round(wall, 3),
            tokens_per_second=task.tokens_seen / max(task.train_seconds, 1e-9),
            checkpoint=str(ckpt.relative_to(job_dir)), finished_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        )
        if wandb_logger is not None:
            wandb_logger.experiment.summary.update({f"final/{k}": v for k, v in final.items()}
                                                   | {"tokens_seen": task.tokens_seen})
        write_json_atomic(job_dir / RESULTS_FILE, record)
        return record
    except BaseException as err:
        record.update(status="failed", error=f"{type(err).__name__}: {err}".splitlines()[0],
                      finished_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        write_json_atomic(job_dir / RESULTS_FILE, record)
        raise
    finally:
        if wandb_logger is not None:
            import wandb

            wandb.finish(exit_code=0 if record["status"] == "completed" else 1)

"""One training job, start to finish: data -> model -> Lightning fit -> checkpoint -> results.json.

`train_job` is what the Hydra app calls per job; it is plain Python so tests and other launchers
can call it directly with a composed config. Its steps, in order:
  1. seed, plan the global batch       5. trainer (strategy from conf/trainer) + resume point
  2. build the model                   6. fit, resuming from checkpoints/last.ckpt if present
  3. prepare data (cached)             7. final validation (unless the budget ended on one)
  4. records, config, loggers (rank 0) 8. final weights (safetensors), optional lm-eval suite,
                                          and results.json "completed"

Distributed runs execute this on every rank; only global rank 0 writes the record (results.json,
config.yaml, metrics.csv, W&B; layout in record/jobdir.py). Resuming is automatic: re-running the
same command finds last.ckpt in the job directory (see resume.py for what a checkpoint holds).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import lightning as L
import torch
from hydra.utils import instantiate
from lightning.fabric.utilities.rank_zero import rank_zero_only
from omegaconf import DictConfig, OmegaConf

from ..accounting import parameter_groups
from ..build import build_model
from ..data.batches import TokenDataModule
from ..data.prepare import prepare
from ..errors import ConfigError
from ..record import atomic
from ..record.checkpoint import save_checkpoint
from ..record.jobdir import COMPLETED, FAILED, PREEMPTED, RUNNING, SCHEMA_VERSION, JobDir, versions
from .loggers import LongCSVLogger, make_wandb_logger
from .plan import BatchPlan, plan_batch
from .resume import PREEMPT_EXIT_CODE, Preempted, ResumableCheckpoint, checkpoint_step, trim_metrics
from .task import LanguageModelTask

__all__ = ["base_record", "evaluate_into", "train_job", "wants_eval"]


def base_record(cfg: DictConfig, job: JobDir, overrides: list[str]) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "status": RUNNING,
        "error": None,
        "sweep": cfg.name,
        "job_key": job.name,
        "job_dir": str(job.path.resolve()),
        "input": cfg.input.name,
        "seed": int(cfg.seed),
        "model": cfg.model.name,
        "code_width": cfg.input.get("code_width"),
        "overrides": list(overrides),
        "config": OmegaConf.to_container(cfg, resolve=True),
        "versions": versions(),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def _checkpoint_cfg(cfg: DictConfig) -> DictConfig:
    return cfg.get("checkpoint") or OmegaConf.create({})


def build_trainer(cfg: DictConfig, plan: BatchPlan, job_dir: Path, callbacks: list[Any]) -> L.Trainer:
    trainer: L.Trainer = instantiate(
        cfg.trainer, max_steps=plan.max_steps, max_epochs=-1, logger=False, callbacks=callbacks,
        default_root_dir=str(job_dir), check_val_every_n_epoch=None,
        # Lightning counts validation intervals in micro-batches: align them to optimizer steps.
        val_check_interval=min(int(cfg.train.val_every), plan.max_steps) * plan.grad_accum,
        accumulate_grad_batches=plan.grad_accum, log_every_n_steps=int(cfg.train.log_every),
        # Validation windows are already sharded by rank (batches.ValidationWindows); a
        # DistributedSampler on top would shard twice and pad with duplicates.
        use_distributed_sampler=False,
    )
    if trainer.world_size != plan.world:
        raise ConfigError("trainer.devices", f"the trainer runs {trainer.world_size} processes but the batch plan "
                          f"assumed {plan.world}", "set trainer.devices / trainer.num_nodes to explicit numbers")
    return trainer


def _refuse_reexec_in_sweep(trainer: L.Trainer) -> None:
    """Lightning's `ddp` launches ranks by re-running the command line; under `-m` that re-runs the
    whole sweep in every rank. Sweeps need one process per job (ddp_spawn, or a cluster launcher
    that starts the ranks itself)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    from lightning.pytorch.strategies.launchers.subprocess_script import (
        _SubprocessScriptLauncher,
    )

    if (HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
            and isinstance(trainer.strategy.launcher, _SubprocessScriptLauncher)):
        raise ConfigError("trainer", "strategy=ddp re-executes the command line per rank, which re-runs the "
                          "whole -m sweep in each rank", "use trainer=ddp_spawn for sweeps on one machine, "
                          "hydra/launcher=slurm_gpu on a cluster, or run jobs one command at a time")


def _final_weights(trainer: L.Trainer, task: LanguageModelTask, cfg: DictConfig) -> torch.nn.Module | None:
    """The trained Decoder as a plain module on rank 0 (gathered from shards under FSDP)."""
    from lightning.pytorch.strategies import FSDPStrategy

    if not isinstance(trainer.strategy, FSDPStrategy):
        return task.model if trainer.is_global_zero else None
    full = trainer.strategy.lightning_module_state_dict()  # collective; full dict on rank 0 only
    if not trainer.is_global_zero:
        return None
    model = build_model(cfg.model, cfg.input)
    model.load_state_dict({k.removeprefix("model."): v for k, v in full.items() if k.startswith("model.")})
    return model


def wants_eval(cfg: DictConfig) -> bool:
    return bool(cfg.get("eval") and cfg.eval.get("tasks"))


def evaluate_into(ckpt: Path, cfg: DictConfig, prepared_root: Path | None, wandb_logger: Any = None) -> dict[str, Any]:
    """Run the configured lm-eval suite on the final weights; the record for results.json "eval".

    An evaluation error does not undo a finished training run: it is recorded as {"error": ...}
    and a re-run of the same command retries only the evaluation.
    """
    from ..evaluation.harness import evaluate_checkpoint, wandb_metrics

    try:
        result = evaluate_checkpoint(ckpt, cfg.eval, prepared_root=prepared_root)
    except Exception as err:  # noqa: BLE001 - keep the trained model and its validation numbers
        print(f"[eval] {cfg.eval.name} failed on {ckpt}: {type(err).__name__}: {err}".splitlines()[0])
        return {"name": cfg.eval.name, "error": f"{type(err).__name__}: {err}".splitlines()[0]}
    result["name"] = cfg.eval.name
    if wandb_logger is not None:
        # The summary, not a logged step: W&B drops points at a step below the run's current one.
        wandb_logger.experiment.summary.update(wandb_metrics(result))
    return result


def _summary(trainer: L.Trainer) -> dict[str, float]:
    return {k.split("/", 1)[1]: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("summary/")}


def train_job(cfg: DictConfig, job_dir: str | Path, overrides: list[str] | None = None) -> dict[str, Any]:
    """Train one model; returns the completed results record (also written to results.json on rank 0)."""
    job = JobDir(job_dir)
    # Rank from the launcher's environment (RANK / LOCAL_RANK / SLURM_PROCID); confirmed by the
    # trainer below. Every file write in this function is rank 0's.
    is_zero = rank_zero_only.rank == 0
    ckpt_cfg = _checkpoint_cfg(cfg)
    previous = job.read_results() or {}
    record = base_record(cfg, job, overrides or [])
    if previous.get("status") == COMPLETED and is_zero:  # force=true: train again from scratch
        shutil.rmtree(job.checkpoints, ignore_errors=True)
    ckpt_path = job.resume_point() if ckpt_cfg.get("resume", True) else None
    if is_zero:
        job.path.mkdir(parents=True, exist_ok=True)
        job.start_attempt(record, previous, resuming=ckpt_path is not None)
        job.write_results(record)
    wandb_logger = None
    try:
        # 1. seed and batch plan
        if not 0 <= int(cfg.seed) < 2**32:
            raise ConfigError("seed", f"{cfg.seed} is outside [0, 2^32)", "use a non-negative 32-bit seed")
        L.seed_everything(int(cfg.seed), workers=True, verbose=False)
        plan = plan_batch(cfg)
        # 2. model (after seeding: init depends on the seed only; built before the data so a bad
        #    input/model setting fails in seconds rather than after tokenizing a corpus)
        model = build_model(cfg.model, cfg.input)
        # 3. data
        prepared = prepare(cfg.data)
        props = model.input.properties()
        params = parameter_groups(model)
        record.update(input_props=props, params=params, code_width=props.get("code_width"),
                      data={"name": cfg.data.name, **{k: prepared.meta[k] for k in (
                          "vocab_size", "tokenizer_vocab_size", "train_tokens", "val_tokens",
                          "val_bytes", "unigram_val_ppl", "cache_key")}},
                      plan=plan.as_record())
        if cfg.train.get("compile"):
            for block in model.blocks:  # per block: the unit FSDP wraps, and small graphs compile fast
                block.compile()

        # 4. trainer, and who this process is
        checkpointer = ResumableCheckpoint(
            job, every_steps=int(ckpt_cfg.get("every_steps", 0)), grad_accum=plan.grad_accum,
            keep_every_steps=int(ckpt_cfg.get("keep_every_steps", 0)),
            preempt_signals=tuple(ckpt_cfg.get("preempt_signals", ("SIGTERM", "SIGUSR1", "SIGUSR2"))))
        trainer = build_trainer(cfg, plan, job.path, [checkpointer])
        _refuse_reexec_in_sweep(trainer)
        is_zero = trainer.is_global_zero

        # 5. records, config and loggers: rank 0 only
        loggers: list[Any] = []
        if is_zero:
            job.write_results(record)
            if hasattr(model.input, "matrix_record"):
                atomic.write_json(job.gf2_matrix, model.input.matrix_record())
            atomic.write_text(job.config, OmegaConf.to_yaml(cfg, resolve=True))
            if ckpt_path is not None:
                record["resumed_from_step"] = checkpoint_step(ckpt_path)
                trim_metrics(job.metrics, record["resumed_from_step"])
            else:  # an attempt that died before its first checkpoint: keep its curves aside
                job.set_aside_metrics()
            loggers.append(LongCSVLogger(job.metrics))
            if cfg.logger.get("wandb"):
                wandb_logger = make_wandb_logger(
                    cfg.logger.wandb, job.path, run_name=f"{cfg.name}/{job.name}", group=cfg.name,
                    job_type=cfg.input.name, tags=[f"input:{cfg.input.name}", f"seed:{cfg.seed}", f"model:{cfg.model.name}"],
                    config={**record["config"], "input_props": props, "params": params}, run_id=record["wandb_id"],
                )
                loggers.append(wandb_logger)
        trainer.loggers = loggers

        # 6. fit, resuming from the last checkpoint when a previous attempt left one
        dm = TokenDataModule(prepared, int(cfg.train.seq_len), int(cfg.train.batch_size), int(cfg.seed),
                             int(cfg.train.val_batch_size), grad_accum=plan.grad_accum)
        task = LanguageModelTask(model, cfg.optim, plan.max_steps, plan.tokens_per_step,
                                 torch.from_numpy(prepared.token_bytes()), int(cfg.train.log_every))
        t0 = time.time()
        trainer.fit(task, datamodule=dm, ckpt_path=str(ckpt_path) if ckpt_path else None, weights_only=True)
        fit = _summary(trainer)  # via callback_metrics: also right when ranks ran in spawned processes
        steps = int(fit["global_step"])

        # 7. final validation unless the budget ended on a validation step
        if int(fit["last_val_step"]) != steps:
            trainer.validate(task, datamodule=dm, verbose=False)
        val = _summary(trainer)
        wall = time.time() - t0

        # 8. final weights and the completed record
        final_model = _final_weights(trainer, task, cfg)
        tokens_seen = steps * plan.tokens_per_step
        final = {"val_loss": val["val_loss"], "val_ppl": val["val_ppl"], "val_bpb": val["val_bpb"],
                 "val_tokens": int(val["val_tokens"])}
        record.update(
            status=COMPLETED, final=final, tokens_seen=tokens_seen, steps=steps,
            train_seconds=round(fit["train_seconds"], 3), wall_seconds=round(wall, 3),
            tokens_per_second=tokens_seen / max(fit["train_seconds"], 1e-9),
            finished_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        )
        if is_zero:
            ckpt = save_checkpoint(job.final_checkpoint, final_model, cfg.model, cfg.input, prepared.tokenizer_path,
                                   extra={"data": record["data"], "data_config": cfg.data, "seed": int(cfg.seed),
                                          "sweep": cfg.name})
            record["checkpoint"] = str(ckpt.relative_to(job.path))
            if wants_eval(cfg):  # 8b. downstream tasks through lm-evaluation-harness
                record["eval"] = evaluate_into(ckpt, cfg, prepared.root, wandb_logger)
            if not ckpt_cfg.get("keep_last", False):  # the resume state is not needed once complete
                job.drop_resume_state()
            if wandb_logger is not None:
                wandb_logger.experiment.summary.update({f"final/{k}": v for k, v in final.items()}
                                                       | {"tokens_seen": tokens_seen})
            job.write_results(record)  # the completion marker, written last
        return record
    except BaseException as err:
        # Under ddp_spawn a preempted worker reaches us as torch's ProcessExitedException carrying
        # the preemption exit status: it is still a preemption (checkpoint written), not a failure.
        spawned_preempt = getattr(err, "exit_code", None) == PREEMPT_EXIT_CODE
        status = PREEMPTED if isinstance(err, Preempted) or spawned_preempt else FAILED
        record.update(status=status, error=f"{type(err).__name__}: {err}".splitlines()[0],
                      finished_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        if is_zero:
            job.write_results(record)
        if spawned_preempt and not isinstance(err, Preempted):
            raise SystemExit(PREEMPT_EXIT_CODE) from err  # stop the sweep too: the allocation is going
        raise
    finally:
        if wandb_logger is not None:
            import wandb

            wandb.finish(exit_code=0 if record["status"] == COMPLETED else 1)

"""The training procedure of one job: seed, model, data, trainer, fit, final validation, the trained model.

`train(spec, job, rec, resume_from, previous)` trains the model of a resolved spec and returns it
in memory with its final numbers (`Trained`); saving the weights, the record that says `trained`,
the evaluation and the end of the job are the job's life (training/job.py). What the attempt trains
with (runtime, the model's properties, the data) is noted on the record as it is known and written
once, just before the fit (training/recorder.py), so a stop during training leaves it on disk.

Every rank runs this; files are rank 0's (the trainer confirms who that is).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import lightning as L
import torch
from hydra.utils import instantiate

from ..accounting import parameter_groups
from ..build import build_decoder
from ..console import terminal_stdout
from ..data.batches import TokenDataModule
from ..data.heldout import without_heldout
from ..data.prepare import PreparedData, prepare
from ..errors import ConfigError
from ..model import Decoder
from ..record import atomic
from ..record.jobdir import JobDir
from ..spec import JobSpec
from .breakdown import build_breakdown
from .compile_turns import CompileTurns, graph_key
from .progress import JobProgressBar
from .loggers import LongCSVLogger
from .recorder import Recorder
from .resume import Preempted, ResumableCheckpoint
from .schedule import ValidationSchedule
from .speed import apply_threads, compile_model, keep_freed_memory
from .task import BREAKDOWN_SUMS, BREAKDOWN_TOTAL, LanguageModelTask

__all__ = ["Trained", "build_trainer", "train"]


@dataclass
class Trained:
    """A trained model in memory (rank 0; None on other ranks) and what the record says of it."""
    model: Decoder | None
    prepared: PreparedData           # the data it trained on: tokenizer and held-out split
    final: dict[str, Any]            # the final validation's numbers (results.json `final`)
    facts: dict[str, Any]            # the rest of the trained record: breakdown, steps, tokens, seconds
    is_zero: bool                    # global rank 0: the process that writes the record


def train(spec: JobSpec, job: JobDir, rec: Recorder, resume_from: Path | None,
          previous: Mapping[str, Any] | None) -> Trained:
    plan = spec.plan
    # 1. threads and seed (the batch plan and schedule were resolved with the spec)
    apply_threads(spec.runtime.threads)
    rec.note(runtime={**spec.runtime.record(), "keep_freed_memory": keep_freed_memory()})
    L.seed_everything(spec.seed, workers=True, verbose=False)
    # 2. the model, this process's one build: after seeding (its init depends on the seed only) and
    #    before the data, so a bad model fails in seconds rather than after tokenizing a corpus
    model = build_decoder(spec.model, seed=spec.seed)  # per-group generators (CRN)
    props, params = model.input.properties(), parameter_groups(model)
    rec.note(input_props=props, output_props=model.head.properties(), params=params,
             code_width=props.get("code_width"), init=model.init_record(),
             flops_per_token=spec.model.flops_per_token(plan.seq_len))
    rec.resume_files(spec, resume_from, previous)
    rec.open_mirror(spec, {**rec.record["config"], "input_props": props, "params": params,
                           "fingerprint": spec.fingerprint["sha"]})
    if resume_from is not None:
        rec.sync_history(rec.record.get("resumed_from_step"))  # what the checkpoint covers, once
    # 3. data (its [data] lines, printed only while a corpus is prepared, are ours: on the terminal)
    with terminal_stdout():
        prepared = prepare(spec.data.settings)
        if spec.train.heldout_fraction is not None:  # the new-tokens protocol: the same text without H
            prepared = without_heldout(prepared, spec.train.heldout_fraction, spec.train.heldout_seed)
    stored_key = ((previous or {}).get("data") or {}).get("cache_key")
    if resume_from is not None and stored_key and stored_key != prepared.meta["cache_key"]:
        raise ConfigError("data", f"the checkpoint was trained on data cache {stored_key}, this machine prepared "
                          f"{prepared.meta['cache_key']} (a tokenizer or dataset changed)",
                          "re-run with force=true to retrain on today's data")
    rec.note(data={"name": spec.data.name, **{k: prepared.meta[k] for k in (
        "vocab_size", "tokenizer_vocab_size", "train_tokens", "val_tokens", "val_bytes", "unigram_val_ppl",
        "split", "cache_key")}, **({"heldout": prepared.meta["heldout"]} if "heldout" in prepared.meta else {})})
    # the final validation's loss per bucket (breakdown.py): tables from the uncompiled input
    counts, counted = prepared.train_token_counts()
    breakdown = build_breakdown(counts, counted, counts.size, plan.seq_len, model.input)
    if spec.runtime.compile:  # per block under FSDP (the unit it wraps and gathers), else the whole decoder
        compile_model(model, per_block=spec.runtime.compile_per_block)
    # 4. trainer, and who this process is
    ckpt = spec.checkpoint
    checkpointer = ResumableCheckpoint(
        job, every_steps=ckpt.every_steps, grad_accum=plan.grad_accum, keep_every_steps=ckpt.keep_every_steps,
        preempt_signals=ckpt.preempt_signals, fingerprint=dict(spec.fingerprint), spec=spec.to_text(),
        after_save=rec.sync_history)
    # compiled jobs side by side take turns at the steps that compile (compile_turns.py); one process
    # per job only: a rank waiting for the turn would hold up its peers' collectives, and they its own
    turns = [CompileTurns(graph_key(spec))] if spec.runtime.compile and spec.plan.world == 1 else []
    trainer = build_trainer(spec, job.path, [checkpointer, *turns])
    _refuse_reexec_in_sweep(trainer)
    is_zero = trainer.is_global_zero
    if _spawns_workers(trainer):
        checkpointer.after_save = None  # spawned workers cannot reach this process's W&B run: it syncs after fit
    # 5. the attempt's files and its record: rank 0's
    if is_zero:
        if hasattr(model.input, "matrix_record"):
            atomic.write_json(job.gf2_matrix, model.input.matrix_record())
        atomic.write_text(job.config, spec.config_yaml())
    trainer.loggers = [LongCSVLogger(job.metrics)] if is_zero else []
    rec.write()  # what this attempt trains with, before the fit: a stop from here on leaves it on disk
    # 6. fit, resuming from the last checkpoint when a previous attempt left one
    dm = TokenDataModule(prepared, plan.seq_len, plan.micro_batch, spec.seed, spec.train.val_batch_size,
                         grad_accum=plan.grad_accum, val_early_tokens=spec.train.val_early_tokens, part=spec.train.part)
    task = LanguageModelTask(model, spec.optim, plan.max_steps, plan.tokens_per_step,
                             torch.from_numpy(prepared.token_bytes()), spec.train.log_every,
                             compiled_loss=spec.runtime.compile, breakdown=breakdown)
    t0 = time.time()
    trainer.fit(task, datamodule=dm, ckpt_path=str(resume_from) if resume_from else None, weights_only=True)
    fit = _summary(trainer)  # via callback_metrics: also right when ranks ran in spawned processes
    steps = int(fit["global_step"])
    if checkpointer.preempt_signum is not None:  # the signal came during the last step
        raise Preempted(None, checkpointer.preempt_signum)
    if trainer.interrupted or steps != plan.max_steps:  # e.g. trainer.max_time: not what was asked
        raise RuntimeError(f"training stopped at step {steps} of {plan.max_steps}; the job is not complete")
    # 7. final validation unless the budget ended on a validation step, which gave the breakdown
    #    too; a run resumed at its last step validates again for the breakdown (the same numbers,
    #    whose curve points metrics.csv already holds: not logged twice)
    if int(fit["last_val_step"]) != steps:
        trainer.validate(task, datamodule=dm, verbose=False)
    elif BREAKDOWN_SUMS not in trainer.callback_metrics:
        task.log_validation = False
        trainer.validate(task, datamodule=dm, verbose=False)
    val = _summary(trainer)
    early = dm.early_validation_windows()  # results.json `validation`: what each kind of validation read
    rec.note(validation={"early_windows": early, "early_tokens": None if early is None else early * plan.seq_len,
                         "final_tokens": int(val["val_tokens"])})
    final = {"val_loss": val["val_loss"], "val_ppl": val["val_ppl"], "val_bpb": val["val_bpb"],
             "val_tokens": int(val["val_tokens"])}
    final.update({k: v for k, v in val.items() if k.startswith("val_") and k not in final})
    tokens_seen = steps * plan.tokens_per_step
    facts = {"val_breakdown": breakdown.record(trainer.callback_metrics[BREAKDOWN_SUMS],
                                               trainer.callback_metrics[BREAKDOWN_TOTAL], steps),
             "tokens_seen": tokens_seen, "steps": steps, "train_seconds": round(fit["train_seconds"], 3),
             "wall_seconds": round(time.time() - t0, 3),
             "tokens_per_second": tokens_seen / max(fit["train_seconds"], 1e-9)}
    return Trained(_final_weights(trainer, task, spec), prepared, final, facts, is_zero)


def build_trainer(spec: JobSpec, job_dir: Path, callbacks: list[Any]) -> L.Trainer:
    plan, val_steps = spec.plan, list(spec.validation_steps)
    # One bar per job (console.py) instead of Lightning's bar per epoch and per validation.
    bar = [JobProgressBar()] if spec.runtime.progress_bar else []
    trainer: L.Trainer = instantiate(
        dict(spec.trainer.arguments), max_steps=plan.max_steps, max_epochs=-1, logger=False,
        callbacks=[*callbacks, ValidationSchedule(val_steps, plan.grad_accum), *bar],
        default_root_dir=str(job_dir), check_val_every_n_epoch=None,
        # Validation runs at the scheduled optimizer steps (training/schedule.py): the callback
        # re-aims Lightning's micro-batch cadence at the next one; this is the first.
        val_check_interval=val_steps[0] * plan.grad_accum,
        accumulate_grad_batches=plan.grad_accum, log_every_n_steps=spec.train.log_every,
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


def _final_weights(trainer: L.Trainer, task: LanguageModelTask, spec: JobSpec) -> Decoder | None:
    """The trained Decoder as a plain module on rank 0 (gathered from shards under FSDP)."""
    from lightning.pytorch.strategies import FSDPStrategy

    if not isinstance(trainer.strategy, FSDPStrategy):
        return task.model if trainer.is_global_zero else None
    full = trainer.strategy.lightning_module_state_dict()  # collective; full dict on rank 0 only
    if not trainer.is_global_zero:
        return None
    model = build_decoder(spec.model)  # a second build, rank 0 only: the trained one is sharded
    model.load_state_dict({k.removeprefix("model."): v for k, v in full.items() if k.startswith("model.")})
    return model


def _spawns_workers(trainer: L.Trainer) -> bool:
    from lightning.pytorch.strategies.launchers.multiprocessing import _MultiProcessingLauncher

    return isinstance(trainer.strategy.launcher, _MultiProcessingLauncher)


def _summary(trainer: L.Trainer) -> dict[str, float]:
    return {k.split("/", 1)[1]: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("summary/")}

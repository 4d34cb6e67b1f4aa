"""Downstream evaluation of a model through lm-evaluation-harness.

The command line is `fixedcode evaluate checkpoint=PATH eval=builtin|paper`
(fixedcode_study/evaluate.py). The result is written to <checkpoint>/eval-<name>.json (or
eval.output): it lives with the weights it describes, and a re-saved checkpoint directory drops
it along with the old weights.

From Python, with the settings a spec validated (spec/evaluation.EvalSpec; they are run as they are):

    record = evaluate_model(model, tokenizer, spec.eval, checkpoint_dir, checkpoint_config)  # a model in memory
    record = evaluate_checkpoint(checkpoint_dir, spec.eval)                                    # one loaded from disk
    record["tasks"]["hellaswag"]["acc_norm"], record["tasks"]["hellaswag"]["acc_norm_stderr"]

Training evaluates the model it just trained, in memory, once its final checkpoint is saved
(`checkpoint_dir` names where, for the record and the weights hash); a finished job's later
evaluation, and the command, load the checkpoint (record/checkpoint.py). `model_spec` in the
record says whether the model was built from the checkpoint's stored spec or, for a format-1
checkpoint, reconstructed from conf/.

The record (docs/results-schema.md, "eval"): lm_eval_version, tasks {task: {metric: value, metric_stderr: value}}
for the requested tasks (groups such as mmlu give their aggregate), subtasks (members of groups),
headline (the metrics the suite reports), n_samples, task_versions, settings, checkpoint,
weights_sha256, seconds. A stderr lm-eval does not compute (e.g. wikitext perplexities) is null.

What lm-eval and its libraries print (logging, progress bars, "bootstrapping for stddev", and the
"fatal: not a git repository" of the `git describe` lm-eval runs for a commit hash outside a
checkout) goes to a log, as a training job's does (console.job_console, at the file-descriptor
level): the job's run.log for a job's final checkpoint, else a .log beside the record
(`evaluation_log`); inside a job the job's own routing holds. The terminal gets our lines: where
the output goes, the summary, and errors. An evaluation that writes nothing (write=False) routes nothing.

lm-eval's request cache (eval.use_cache=true) keys entries by request text only, so the cache file
is placed under a key made of the checkpoint's weights hash, dtype and context length: a cache is
never read for different weights.
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..data.layout import read_meta
from ..errors import ConfigError
from ..model import Decoder
from ..record import atomic
from ..record.checkpoint import CHECKPOINT_CONFIG_FILE, STORED, load_checkpoint, weights_file
from ..record.jobdir import JobDir
from ..spec.evaluation import CONTEXT_RULE, EvalSpec

__all__ = ["build_record", "evaluate_checkpoint", "evaluate_model", "evaluation_log", "file_sha256",
           "find_prepared_root", "library_output_to", "run_suite", "task_metrics", "wandb_metrics"]


def evaluation_log(output: Path, checkpoint_dir: Path | None = None) -> Path:
    """Where an evaluation's library output goes: the job's run.log when `checkpoint_dir` is a job's
    final checkpoint, else beside the record `output` (eval-builtin.json -> eval-builtin.log)."""
    job = JobDir.of_final_checkpoint(checkpoint_dir) if checkpoint_dir is not None else None
    return job.log_file if job is not None else output.with_suffix(".log")


@contextmanager
def library_output_to(log_path: Path | None, suite: str, subject: str) -> Iterator[None]:
    """Run the evaluation of `subject` on `suite` with lm-eval's output going to `log_path`
    (console.job_console: appended, a traceback there when it fails), the terminal told where in
    one line. A no-op inside a job, whose log already takes it, and when `log_path` is None."""
    from .. import console

    if log_path is None or console.in_job_console():
        yield
        return
    with console.job_console(log_path):
        if console.routed():  # not verbose (FIXEDCODE_VERBOSE=1 leaves the output on the terminal)
            console.say(f"[eval] eval={suite}: lm-eval's output goes to {log_path}", log=False)
            print(f"[eval] eval={suite} on {subject} (pid {os.getpid()}); lm-eval's output follows", flush=True)
        yield


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 24), b""):
            h.update(block)
    return h.hexdigest()


def find_prepared_root(checkpoint_dir: Path, ckpt_config: Mapping[str, Any], explicit: str | None,
                       cache_dir: str | None, field: str = "eval.prepared_root") -> Path:
    """The data cache holding the checkpoint's held-out documents (same corpus cache key).

    Looked up in the job's data cache folder (the checkpoint's `data_config`), then the given and
    default cache folders; rebuilt from `data_config` (deterministic) when no copy is found.
    `field` is the setting named in errors (the probe command passes probe.prepared_root).
    """
    key = (ckpt_config.get("data") or {}).get("cache_key")
    if explicit:
        root = Path(explicit).expanduser().resolve()
        meta = read_meta(root)
        if meta is None:
            raise ConfigError(field, f"{root} holds no prepared data cache",
                              "point it at a prepared data cache folder")
        found = meta.get("cache_key")
        if key and found != key:
            raise ConfigError(field, f"cache {found} is not the checkpoint's corpus ({key})",
                              "use the cache the checkpoint was trained on, so held-out documents are held out")
        return root
    if not key:
        raise ConfigError(field, f"{checkpoint_dir / CHECKPOINT_CONFIG_FILE} records no data cache key",
                          f"pass {field}=<data cache folder>")
    data_cfg = ckpt_config.get("data_config") or {}
    roots = [data_cfg.get("cache_dir"), cache_dir, os.environ.get("FIXEDCODE_CACHE"),
             "~/.cache/fixedcode_study"]
    for root in dict.fromkeys(r for r in roots if r):
        for candidate in sorted(Path(os.path.expanduser(root)).glob(f"*-{key}")):
            if read_meta(candidate) is not None:
                return candidate.resolve()
    if data_cfg:  # rebuild the cache from the job's data config (deterministic)
        from ..data.prepare import prepare

        prepared = prepare(data_cfg)
        if prepared.meta.get("cache_key") == key:
            return prepared.root.resolve()
    raise ConfigError(field, f"no data cache with key {key} was found",
                      f"pass {field}=<the data cache folder the checkpoint was trained on>")


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) if math.isfinite(value) else None
    return None  # lm-eval writes "N/A" where it computes no stderr


def task_metrics(entry: Mapping[str, Any]) -> dict[str, float | None]:
    """{"acc,none": .., "acc_stderr,none": ..} -> {"acc": .., "acc_stderr": ..} (other filters keep a suffix)."""
    out = {}
    for key, value in entry.items():
        if "," not in key:
            continue  # alias, name, sample_len, ...
        metric, filt = key.split(",", 1)
        out[metric if filt == "none" else f"{metric},{filt}"] = _number(value)
    return out


def build_record(results: Mapping[str, Any], settings: EvalSpec) -> dict[str, Any]:
    requested = list(settings.tasks)
    per_task = {name: task_metrics(entry) for name, entry in results["results"].items()}
    missing = [t for t in requested if t not in per_task]
    if missing:
        raise RuntimeError(f"lm-eval returned no results for {missing}")
    headline = {task: {m: per_task[task].get(m) for m in metrics}
                for task, metrics in settings.metrics.items() if task in per_task}
    return {
        "lm_eval_version": results.get("lm_eval_version"),
        "suite": settings.name,
        "tasks": {t: per_task[t] for t in requested},
        "subtasks": {t: m for t, m in per_task.items() if t not in requested},
        "headline": headline,
        "n_samples": {t: e.get("sample_len") for t, e in results["results"].items()},
        "task_versions": dict(results.get("versions", {})),
        "settings": {k: settings.record()[k] for k in ("num_fewshot", "batch_size", "limit", "data_dir",
                                                       "prepared_root", "dtype", "bootstrap_iters", "use_cache",
                                                       "builtin")},
    }


def run_suite(lm: Any, settings: EvalSpec, use_cache: str | None = None) -> dict[str, Any]:
    """lm-eval's simple_evaluate of the suite's tasks on `lm` (any lm-eval model): the record's
    task part (build_record). settings.prepared_root must be set when a built-in task is asked for."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from .tasks import write_tasks

    with tempfile.TemporaryDirectory(prefix="fixedcode-eval-tasks-") as task_dir:
        folder = write_tasks(list(settings.tasks), task_dir, data_dir=settings.data_dir,
                             prepared_root=settings.prepared_root, builtin_settings=dict(settings.builtin))
        manager = TaskManager(include_path=str(folder.include_path), include_defaults=folder.needs_official_index)
        unknown = [t for t in settings.tasks if t not in manager.all_tasks]
        if unknown:
            raise ConfigError("eval.tasks", f"{unknown[0]} is not an lm-eval task",
                              "use an lm-eval task name (lm_eval ls tasks) or a built-in task")
        results = lm_eval.simple_evaluate(
            model=lm, tasks=list(settings.tasks), task_manager=manager, num_fewshot=settings.num_fewshot,
            limit=settings.limit, bootstrap_iters=settings.bootstrap_iters, use_cache=use_cache,
            log_samples=False,
        )
    record = build_record(results, settings)
    record["context"] = {"max_length": int(lm.max_length), "rule": CONTEXT_RULE}
    return record


def evaluate_checkpoint(checkpoint_dir: str | os.PathLike, settings: EvalSpec,
                        prepared_root: str | os.PathLike | None = None, write: bool = True) -> dict[str, Any]:
    """Load a checkpoint (record/checkpoint.load_checkpoint) and evaluate it (`evaluate_model`)."""
    from .lm import final_folder

    ckpt = load_checkpoint(final_folder(Path(checkpoint_dir).expanduser()).resolve())
    return evaluate_model(ckpt.model, ckpt.tokenizer, settings, ckpt.path, ckpt.config, prepared_root, write,
                          model_spec=ckpt.spec_note)


def evaluate_model(model: Decoder, tokenizer: Any, settings: EvalSpec, checkpoint_dir: str | os.PathLike,
                   checkpoint_config: Mapping[str, Any], prepared_root: str | os.PathLike | None = None,
                   write: bool = True, model_spec: str = STORED) -> dict[str, Any]:
    """Run the settings' tasks on `model` (saved as the checkpoint `checkpoint_dir`, whose config.json
    says `checkpoint_config`); returns the record and (write=True) saves it as JSON beside the weights.
    `model_spec`: where the model's spec came from (Checkpoint.spec_note), stated in the record."""
    checkpoint_dir = Path(checkpoint_dir).expanduser().resolve()
    output = Path(settings.output or checkpoint_dir / f"eval-{settings.name}.json")
    with library_output_to(evaluation_log(output, checkpoint_dir) if write else None, settings.name,
                           str(checkpoint_dir)):
        record = _evaluate(model, tokenizer, settings, checkpoint_dir, checkpoint_config, prepared_root, model_spec)
    if write:
        atomic.write_json(output, record)
        record["output"] = str(output)
    return record


def _evaluate(model: Decoder, tokenizer: Any, settings: EvalSpec, checkpoint_dir: Path,
              checkpoint_config: Mapping[str, Any], prepared_root: str | os.PathLike | None,
              model_spec: str) -> dict[str, Any]:
    from ..console import terminal_stdout
    from .lm import FixedCodeLM
    from .tasks import BUILTIN_TASKS

    t0 = time.time()
    lm = FixedCodeLM(model=model, tokenizer=tokenizer, checkpoint_config=checkpoint_config, saved_at=checkpoint_dir,
                     batch_size=settings.batch_size, device=settings.device, dtype=settings.dtype)
    weights_sha = file_sha256(weights_file(checkpoint_dir))
    if settings.data_dir:
        settings = settings.with_paths(data_dir=str(Path(settings.data_dir).expanduser().resolve()))
    if any(t in BUILTIN_TASKS for t in settings.tasks):
        with terminal_stdout():  # a corpus rebuilt here says so on the terminal ([data] lines)
            root = prepared_root or find_prepared_root(checkpoint_dir, checkpoint_config, settings.prepared_root,
                                                       settings.cache_dir)
        settings = settings.with_paths(prepared_root=str(Path(root).resolve()))

    use_cache = None
    if settings.use_cache:
        key = hashlib.sha256(f"{weights_sha}|{settings.dtype}|{lm.max_length}".encode()).hexdigest()[:20]
        cache = Path(os.path.expanduser(settings.cache_dir)) / "lm_eval_requests" / key
        cache.mkdir(parents=True, exist_ok=True)
        use_cache = str(cache / "responses")

    record = run_suite(lm, settings, use_cache)
    record.update(checkpoint=str(checkpoint_dir), weights_sha256=weights_sha, model_spec=model_spec,
                  device=str(lm.device), seconds=round(time.time() - t0, 2),
                  finished_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    return record


def wandb_metrics(record: Mapping[str, Any], prefix: str = "eval") -> dict[str, float]:
    """Flat {"eval/<task>/<metric>": value} for W&B (requested tasks, stderrs included, nulls dropped)."""
    return {f"{prefix}/{task}/{metric}": value for task, metrics in record["tasks"].items()
            for metric, value in metrics.items() if value is not None}


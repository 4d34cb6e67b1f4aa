"""Never train the same job twice: a completed job with this job's fingerprint is linked in.

Studies share reference arms (learned and binary16 at seeds 1-3 run in main, controls, code_width,
...). When a job has no record yet, training/decide.py asks `completed_sources`, and
training/job.py then `adopt_completed`:

  candidates  every <out_root>/{multirun,runs}/<name>/<job_key>/ (jobdir.STUDY_ROOTS) whose
              results.json says `completed` with this job's fingerprint sha (record/fingerprint.py:
              every setting that can change a number, plus the training source) and whose final
              weights exist; never this job's own directory. Only results.json is read. A candidate
              that is itself a reuse stands for its original (its `reused_from`) while the original
              is still a candidate; only when the original is gone is the reuse linked from.
  the pick    the earliest `finished_at`, then the path: the same on every re-run and every rank.
  the files   every file of the source's checkpoints/final/ hard-linked (copied where the filesystem
              refuses, e.g. across devices: `reused_from.link` says which), built under a temporary
              name and renamed into place (record/atomic.py); metrics.csv and gf2_matrix.json copied;
              config.yaml written from this job's composed config, like results.json's `config`. Not
              taken: the source's W&B run, run.log, probes/samples, snapshots, last.ckpt, its lock.
  the record  the source's (fingerprint, final numbers, timing, params, data, runtime: they describe
              the trained model) with this job's identity (sweep, job_key, job_dir, overrides, config,
              spec, started_at), a W&B run id of its own, no `eval`, and `reused_from` = {job_dir, sweep,
              fingerprint, finished_at, link}. It is written last, with status `running`.

run_job then finishes it like any trained job (`_finish_trained`): a W&B run of its own with
metrics.csv replayed into it, the requested evaluation, status `completed`. A kill before
results.json leaves no record (the next run adopts again and replaces what is there); a kill after
leaves a trained `running` record (the next run finishes it). `reuse=false` turns this off and
`force=true` retrains. Hard links share bytes, never later versions: every record write here is a
rename (record/atomic.py), so retraining or deleting either job leaves the other one intact.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any, Mapping, Sequence

from lightning.fabric.utilities.rank_zero import rank_zero_only
from ..console import say
from . import atomic
from .jobdir import COMPLETED, RESULTS_FILE, RUNNING, STUDY_ROOTS, JobDir

__all__ = ["adopt_completed", "completed_sources"]

HARDLINK, COPY = "hardlink", "copy"


def adopt_completed(job: JobDir, sources: Sequence[tuple[JobDir, dict[str, Any], dict[str, Any] | None]],
                    identity: Mapping[str, Any], config_yaml: str) -> dict[str, Any] | None:
    """Link the first usable of `sources` (completed_sources: completed jobs with this job's
    fingerprint, best first) into `job` and return its record (written as results.json, status
    running), or None when none can be linked: then train. `identity`: this job's own part of the
    record (sweep, overrides, config, spec); `config_yaml`: its config.yaml text."""
    for source, record, via in sources:
        if rank_zero_only.rank != 0:
            # Rank 0 links the files and writes the record; the others only need the decision.
            return _record(job, identity, source, record, via, HARDLINK)
        adopted = _adopt(job, identity, config_yaml, source, record, via)
        if adopted is not None:
            return adopted
    return None


def completed_sources(out_root: Path, sha: str, exclude: Path | None = None,
                      ) -> list[tuple[JobDir, dict[str, Any], dict[str, Any] | None]]:
    """(source job, its record, `via`), best first: completed, trained jobs with fingerprint `sha`
    under out_root's study roots (never `exclude`), ordered by finished_at, then path.

    A reuse stands for its original (`via` None), even one outside out_root; it is a source itself,
    after every original, only when its original is gone or changed (`via` = its reused_from)."""
    found: dict[Path, dict[str, Any]] = {}
    for root in STUDY_ROOTS:
        for results in sorted((out_root / root).glob(f"*/*/{RESULTS_FILE}")):
            path = results.parent.resolve()
            if path != exclude and (record := _completed(JobDir(path), sha)) is not None:
                found[path] = record
    originals = {path: record for path, record in found.items() if not record.get("reused_from")}
    orphans: list[tuple[Path, dict[str, Any]]] = []  # reuses whose original is gone or no longer the same
    for path, record in found.items():
        if not record.get("reused_from"):
            continue
        origin = Path(str(record["reused_from"].get("job_dir"))).resolve()
        if origin in originals:
            continue
        origin_record = None if origin == exclude else _completed(JobDir(origin), sha)
        if origin_record is not None and not origin_record.get("reused_from"):
            originals[origin] = origin_record  # outside out_root, e.g. under another FIXEDCODE_OUT
        else:
            orphans.append((path, record))

    def order(item: tuple[Path, dict[str, Any]]) -> tuple[str, str]:
        return str(item[1].get("finished_at") or ""), str(item[0])

    out: list[tuple[JobDir, dict[str, Any], dict[str, Any] | None]] = [
        (JobDir(p), r, None) for p, r in sorted(originals.items(), key=order)]
    out += [(JobDir(p), r, r["reused_from"]) for p, r in sorted(orphans, key=order)]
    return out


def _completed(job: JobDir, sha: str) -> dict[str, Any] | None:
    """The job's record when it is completed and trained under fingerprint `sha`, else None."""
    try:
        text = job.results.read_text()
    except (OSError, UnicodeDecodeError):
        return None
    if sha not in text:  # cheap: most records of a study tree differ
        return None
    try:
        record = json.loads(text)
    except json.JSONDecodeError:
        return None
    if (not isinstance(record, dict) or record.get("status") != COMPLETED
            or (record.get("fingerprint") or {}).get("sha") != sha or not job.is_trained(record)):
        return None
    return record


def _same_source(before: Mapping[str, Any], after: Mapping[str, Any] | None) -> bool:
    """The source's record did not move while its files were linked (a retrain or an evaluation of
    the source rewrites status, finished_at or final before and after touching its weights)."""
    def key(record: Mapping[str, Any]) -> tuple[Any, ...]:
        return (record.get("status"), (record.get("fingerprint") or {}).get("sha"), record.get("finished_at"),
                json.dumps(record.get("final"), sort_keys=True, default=str), record.get("checkpoint"))

    return after is not None and key(before) == key(after)


def _adopt(job: JobDir, identity: Mapping[str, Any], config_yaml: str, source: JobDir, record: dict[str, Any],
           via: dict[str, Any] | None) -> dict[str, Any] | None:
    src_final = source.path / record["checkpoint"]
    link = HARDLINK
    try:
        with atomic.atomic_dir(job.final_checkpoint) as tmp:
            for entry in sorted(src_final.rglob("*")):
                target = tmp / entry.relative_to(src_final)
                if entry.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(entry, target)
                except OSError:  # another device, no hard links on this filesystem, too many links
                    shutil.copy2(entry, target)
                    link = COPY
        for src, dst in ((source.metrics, job.metrics), (source.gf2_matrix, job.gf2_matrix)):
            if src.exists():
                _copy(src, dst)
            else:
                dst.unlink(missing_ok=True)
        atomic.write_text(job.config, config_yaml)
    except OSError as err:  # e.g. the source was retrained or deleted while it was linked: next, or train
        _undo(job)
        say(f"[run] {job.name}: could not link the completed job {source.path} ({type(err).__name__}: {err})",
            err=True)
        return None
    if not _same_source(record, source.read_results()):
        _undo(job)
        return None
    adopted = _record(job, identity, source, record, via, link)
    job.write_results(adopted)  # last: only now is this directory a (trained, running) job
    say(f"[run] {job.name}: reusing the completed job {source.path} (same fingerprint "
        f"{adopted['reused_from']['fingerprint'][:12]}){_runtime_caveat(record)}; force=true retrains it")
    return adopted


def _runtime_caveat(record: Mapping[str, Any]) -> str:
    """What the reused numbers' runtime does not promise (runtime.deterministic; empty when bitwise)."""
    deterministic = (record.get("runtime") or {}).get("deterministic") or {}
    if deterministic.get("bitwise", True):
        return ""
    return f"; its runtime is not bitwise deterministic ({deterministic.get('reason', 'no reason recorded')})"


def _copy(src: Path, dst: Path) -> None:
    with open(src, "rb") as inp, atomic.atomic_file(dst, "wb") as out:
        shutil.copyfileobj(inp, out)


def _undo(job: JobDir) -> None:
    """Remove what an adoption placed (the directory has no results.json yet)."""
    shutil.rmtree(job.final_checkpoint, ignore_errors=True)
    for path in (job.metrics, job.gf2_matrix, job.config):
        path.unlink(missing_ok=True)


def _record(job: JobDir, identity: Mapping[str, Any], source: JobDir, record: Mapping[str, Any],
            via: Mapping[str, Any] | None, link: str) -> dict[str, Any]:
    """The source's record with this job's identity (see the module docstring)."""
    adopted = {k: v for k, v in record.items() if k not in ("eval", "finished_at", "reused_from")}
    reused_from = {"job_dir": str(source.path.resolve()), "sweep": record.get("sweep"),
                   "fingerprint": (record.get("fingerprint") or {}).get("sha"),
                   "finished_at": record.get("finished_at"), "link": link}
    if via:  # linked from a reuse whose original is gone: say where the weights were trained
        reused_from["original"] = dict(via)
    adopted.update(
        status=RUNNING, error=None, sweep=identity["sweep"], job_key=job.name, job_dir=str(job.path.resolve()),
        overrides=list(identity["overrides"]), config=json.loads(json.dumps(identity["config"])),
        spec=json.loads(json.dumps(identity["spec"])),
        checkpoint=str(job.final_checkpoint.relative_to(job.path)),
        attempts=1, wandb_id=uuid.uuid4().hex[:12],  # never the source's W&B run
        started_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"), reused_from=reused_from)
    return adopted

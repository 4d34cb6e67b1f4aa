"""The adapt records of a study (`fixedcode adapt`, adaptation/run.py), read as one row per adapted job
and init, and the measures the report tests.

    data = read_adapt(study, declared_settings)   # data.runs, data.points, data.curves, data.notes

Where: every adapt.json under the report's run directories (`fixedcode adapt study=<study>` writes
<study>/adapt/<job>/adapt.json beside the jobs; a committed report keeps them under runs/ the same
way). Which: a record enters when its model is an included job of this report (matched by the
checkpoint's fingerprint, the sha its results.json records too), computed under the adaptation
settings the study declares (or, with no declaration, the settings most records share). Every record
left out is a note saying why; a second record of the same job is counted once.

The measures (MEASURES), each read off one run of one record, at the end of adaptation unless said:
  adapt_heldout_loss        the loss where the target is a held-out token (nats/token, down)
  adapt_after_heldout_loss  the loss where the input is one and the target is not (down)
  adapt_other_loss          the loss everywhere else: forgetting (down)
  adapt_heldout_mass        the probability on the held-out set at step 0, before any update (down:
                            the share the new head rows take from the tokens the model knows)
and, exploratory, each loss's change over the adaptation (the end minus step 0, down), which leaves out
the gap the arms bring from pretraining (the end-of-adaptation losses carry it):
  adapt_heldout_loss_change, adapt_after_heldout_loss_change, adapt_other_loss_change (a rise: forgetting)
A learned table adapts once per init of its new rows: the comparisons read its `mean` run (the
reference the study declares; REFERENCE_INIT), a fixed code its one run (`code`). Every init's
curve is in `curves`, every init's final measures in `runs`.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ...record.jobdir import ADAPT_FILE
from .records import display_path, files_named

ADAPT_SCHEMA = 1                  # adaptation/run.py ADAPT_SCHEMA: the record this reads
REFERENCE_INIT = "mean"           # the learned table's init the comparisons read (Hewitt's bound on the damage)
FIXED_INIT = "code"               # a fixed code's one run (adaptation/rows.py FIXED)
PREFIX = "adapt_"
FINAL_MEASURES = ("heldout_loss", "after_heldout_loss", "other_loss")
MEASURES = tuple(PREFIX + m for m in (*FINAL_MEASURES, "heldout_mass"))
PRIMARY_MEASURES = MEASURES[:3]   # the mass at step 0 is exploratory: its direction is a reading, not a loss
CHANGES = tuple(f"{PREFIX}{m}_change" for m in FINAL_MEASURES)   # exploratory: the end minus step 0
MEASURE_TITLES = {"adapt_heldout_loss": "loss on new tokens", "adapt_after_heldout_loss": "loss after a new token",
                  "adapt_other_loss": "loss on other tokens", "adapt_heldout_mass": "mass on new tokens at step 0",
                  "adapt_heldout_loss_change": "change of the loss on new tokens",
                  "adapt_after_heldout_loss_change": "change of the loss after a new token",
                  "adapt_other_loss_change": "change of the loss on other tokens"}
CONTEXT = ("model", "data")
RUN_COLUMNS = ["run", "job", "variant", "input", "init", *CONTEXT, "seed", *MEASURES]
CURVE_COLUMNS = ["run", "variant", "init", *CONTEXT, "seed", "step", "tokens", *(m.removeprefix(PREFIX) for m in MEASURES)]


def is_measure(metric: str) -> bool:
    return str(metric) in MEASURE_TITLES


def measure_title(metric: str) -> str:
    return MEASURE_TITLES.get(str(metric), str(metric))


@dataclass
class AdaptData:
    runs: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=RUN_COLUMNS))
    points: pd.DataFrame = field(default_factory=pd.DataFrame)   # one row per compared run and measure
    curves: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=CURVE_COLUMNS))
    settings: dict | None = None
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def any(self) -> bool:
        return not self.runs.empty


def adapt_files(sources: list[str]) -> list[Path]:
    """Every adapt.json below the run directories (job trees pruned as job discovery prunes them)."""
    return files_named(sources, ADAPT_FILE)


def declared_record(declared: dict | None) -> dict | None:
    """The record's `settings` the study's `adapt:` block stands for (AdaptSettings(**block).record())."""
    if declared is None:
        return None
    from ...adaptation.settings import AdaptSettings   # the settings alone: no torch

    return AdaptSettings(**declared).record()


def _key(settings) -> str:
    return json.dumps(settings or {}, sort_keys=True)


def run_measures(run: dict) -> dict[str, float]:
    """One init's measures (module docstring)."""
    final = run.get("final") or {}
    out = {PREFIX + m: float(final[m]) for m in FINAL_MEASURES if final.get(m) is not None}
    if run.get("first_mass") is not None:
        out[PREFIX + "heldout_mass"] = float(run["first_mass"])
    start = (run.get("curve") or [{}])[0]
    out.update({f"{PREFIX}{m}_change": float(final[m]) - float(start[m]) for m in FINAL_MEASURES
                if final.get(m) is not None and start.get("step") == 0 and start.get(m) is not None})
    return out


def read_adapt(study, declared_settings: dict | None = None) -> AdaptData:
    """The adapt records under the study's run directories that describe its included jobs."""
    data = AdaptData()
    files = adapt_files(list(study.sources))
    if not files or not len(study.included_jobs):
        return data
    jobs = study.included_jobs
    by_sha = {str(j["fingerprint_sha"]): j for _, j in jobs.iterrows()
              if "fingerprint_sha" in jobs and isinstance(j["fingerprint_sha"], str)}
    readable = []
    for path in files:
        shown = display_path(path)
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            data.notes.append(f"adapt record {shown} left out: unreadable ({type(err).__name__})")
            continue
        if not isinstance(record, dict) or record.get("schema") != ADAPT_SCHEMA:
            data.notes.append(f"adapt record {shown} left out: not an adapt.json of schema {ADAPT_SCHEMA}")
            continue
        readable.append((shown, record))
    want = declared_record(declared_settings)
    candidates = []
    for shown, record in readable:
        if want is not None and record.get("settings") != want:
            changed = sorted(k for k, v in want.items() if (record.get("settings") or {}).get(k) != v)
            data.notes.append(f"adapt record {shown} left out: computed under other settings than the study declares "
                              f"({', '.join(changed)}); re-run `fixedcode adapt study=<study>`")
        else:
            candidates.append((shown, record))
    if not candidates:
        return data
    (chosen, _), = Counter(_key(r.get("settings")) for _, r in candidates).most_common(1)
    seen: dict[str, str] = {}
    runs, points, curves = [], [], []
    for shown, record in candidates:
        if _key(record.get("settings")) != chosen:
            data.notes.append(f"adapt record {shown} left out: computed under other settings than the records pooled")
            continue
        model = record.get("model") or {}
        job = by_sha.get(str(model.get("fingerprint")))
        if job is None:
            where = Path(str(model.get("job") or model.get("checkpoint") or "?")).name
            data.notes.append(f"adapt record {shown} left out: its model ({where}) is not an included job here")
            continue
        if job["run"] in seen:
            data.notes.append(f"adapt record {shown} repeats {seen[job['run']]} (the same job): counted once")
            continue
        seen[job["run"]] = shown
        base = {"run": shown, "variant": job["variant"], **{c: job.get(c) for c in CONTEXT}, "seed": job["seed"]}
        for init, run in (record.get("runs") or {}).items():
            measures = run_measures(run)
            runs.append(base | {"job": job["run"], "input": job["input"], "init": init,
                                **{m: measures.get(m, math.nan) for m in MEASURES}})
            curves += [base | {"init": init, **{k: row.get(k, math.nan) for k in CURVE_COLUMNS[len(CONTEXT) + 4:]}}
                       for row in run.get("curve") or []]
            if init in (REFERENCE_INIT, FIXED_INIT):   # the compared run of each job
                points += [base | {"input": job["input"], "variant_order": job["variant_order"],
                                   "crn": bool(job["crn"]), "kind": "adapt", "metric": metric, "value": value,
                                   "stderr": math.nan} for metric, value in measures.items()]
        data.files.append(shown)
    if not runs:
        return data
    data.settings = json.loads(chosen)
    data.runs = pd.DataFrame(runs, columns=RUN_COLUMNS)
    data.points = pd.DataFrame(points)
    data.curves = pd.DataFrame(curves, columns=CURVE_COLUMNS)
    return data

"""The compose records of a study (`fixedcode compose`, composition/run.py), read as one row per pair of
models and the measures the report tests.

    data = read_compose(study, declared_settings)   # data.pairs, data.points, data.stitches, data.paths, data.notes

Where: every compose.json under the report's run directories (study.sources; `fixedcode compose
study=<study>` writes <study>/compose/<arm>,seeds=<a>+<b>/compose.json beside the jobs, and a
committed report keeps them under runs/ the same way). Which: a record enters when both members
are included jobs of this report (matched by their fingerprint, the job's final val loss the one
the record was computed on: else it predates the job's current weights), of one arm (variant) and
context, at two different seeds, computed under the compose settings the study declares (or, with
no declaration, the settings most records share). Every record left out is a note saying why; a
second record of the same arm and seeds is counted once.

The measures (MEASURES), each a function of one record's own numbers, in nats per token:
  ensemble_gain            ensemble.logits.gain_over_better: the better member's val loss minus the
                           logit-averaged ensemble's (up: the ensemble gains more)
  stitch_cost_identity     the mean over k = 1..n_layer of stitch.identity[k].val_loss minus the mean of
                           the two members' val losses (down: stitching costs less). k = 0 is not in
                           the mean: there a's input feeds every block of b, and with one fixed code that
                           is b itself by construction (tests/composition/test_compose.py), so its cost
                           is the members' own difference and says nothing about their blocks
  stitch_cost_affine       the same over the trained affine stitches
  barrier                  barrier.barrier: the largest excess of the straight path's val loss over the
                           line between the endpoints' (down)
and, exploratory (never in a declared family):
  ensemble_mixture_gain    ensemble.probabilities.gain_over_better: the probability mixture's gain
  stitch_cost_<kind>_k<k>  each boundary's stitched loss minus the members' mean, k = 0 included
A record without a measure (`measures=` ran a subset) gives no row for it.

A pair's `seed` is "<a>+<b>" (its members' seeds, in stitch order) and it records common random
numbers when both members do: two arms' pairs at the same seeds then pair in the comparisons as two
runs at one seed do (stats/pairing.py).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ...record.jobdir import COMPOSE_FILE
from .records import display_path, files_named

COMPOSE_SCHEMA = 1                            # composition/run.py COMPOSE_SCHEMA: the record this reads
STITCH_KINDS = ("identity", "affine")
# The measures a study may declare primary (read/declared.py `measures:`), in the report's order.
PRIMARY_MEASURES = ("ensemble_gain", "stitch_cost_identity", "stitch_cost_affine", "barrier")
GAINS = ("ensemble_gain", "ensemble_mixture_gain")   # up is the better direction; every other measure: down
MEASURE_TITLES = {"ensemble_gain": "ensemble gain", "ensemble_mixture_gain": "mixture gain",
                  "stitch_cost_identity": "stitch cost, identity", "stitch_cost_affine": "stitch cost, affine",
                  "barrier": "loss barrier"}
CONTEXT = ("model", "data")

PAIR_COLUMNS = ["run", "variant", "input", "variant_order", *CONTEXT, "seed", "seed_a", "seed_b", "crn", "run_a",
                "run_b", "loss_a", "loss_b", "n_layer", *PRIMARY_MEASURES, "ensemble_mixture_gain", "at_alpha"]
STITCH_COLUMNS = ["run", "variant", *CONTEXT, "seed", "kind", "k", "val_loss", "cost"]
PATH_COLUMNS = ["run", "variant", *CONTEXT, "seed", "alpha", "val_loss", "linear", "excess"]


def per_k(kind: str, k: int) -> str:
    """The exploratory measure of one boundary: stitch_cost_identity_k0, ..."""
    return f"stitch_cost_{kind}_k{k}"


def is_measure(metric: str) -> bool:
    """Is this metric name a composition measure (any, per-k ones included)?"""
    return str(metric) in MEASURE_TITLES or str(metric).startswith("stitch_cost_")


def measure_title(metric: str) -> str:
    """'stitch cost, affine, k = 2' for stitch_cost_affine_k2; the name itself for anything else."""
    metric = str(metric)
    if metric in MEASURE_TITLES:
        return MEASURE_TITLES[metric]
    kind, _, k = metric.removeprefix("stitch_cost_").rpartition("_k")
    return f"stitch cost, {kind}, k = {k}" if kind in STITCH_KINDS and k.isdigit() else metric


def higher_is_better(metric: str) -> bool:
    return str(metric) in GAINS


@dataclass
class ComposeData:
    pairs: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=PAIR_COLUMNS))
    points: pd.DataFrame = field(default_factory=pd.DataFrame)      # one row per pair and measure (comparisons)
    stitches: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=STITCH_COLUMNS))
    paths: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=PATH_COLUMNS))
    settings: dict | None = None        # the compose settings of every record read
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def any(self) -> bool:
        return not self.pairs.empty


def compose_files(sources: list[str]) -> list[Path]:
    """Every compose.json below the run directories (job trees pruned as job discovery prunes them)."""
    return files_named(sources, COMPOSE_FILE)


def settings_difference(recorded: dict, declared: dict) -> str | None:
    """The first declared compose setting a record's `settings` does not have, as 'key: recorded -> declared'.
    `measures` is compared as a set of names (the record lists them, a study file may write a comma list)."""
    for key, want in declared.items():
        have = recorded.get(key)
        if key == "measures":
            want_set = {m.strip() for m in (want.split(",") if isinstance(want, str) else want or []) if m.strip()}
            if set(have or []) != want_set:
                return f"measures: {','.join(have or [])} -> {','.join(sorted(want_set))}"
        elif have != want:
            return f"{key}: {have} -> {want}"
    return None


def _final_losses(study) -> dict[str, float]:
    long = study.long
    finals = long[(long["kind"] == "final") & (long["metric"] == "val_loss")]
    return dict(zip(finals["run"], finals["value"].astype(float), strict=True))


def _member(record: dict, role: str, by_sha: dict[str, pd.Series], finals: dict[str, float]) -> tuple[pd.Series | None, str]:
    """The included job a record's member is, or None and why not."""
    member = record.get(role) or {}
    sha = member.get("fingerprint")   # the checkpoint's fingerprint: the sha its results.json records too
    job = by_sha.get(sha) if sha else None
    if job is None:
        where = Path(str(member.get("job") or member.get("checkpoint") or "?")).name   # no path of the composing machine
        return None, f"its member {role} ({where}) is not an included job here"
    recorded = (member.get("job_final") or {}).get("val_loss")
    if recorded != finals.get(job["run"]):
        return None, (f"its member {role} ({job['run']}) has other final weights now (val loss {finals.get(job['run'])} "
                      f"against {recorded} when composed): re-run `fixedcode compose`")
    return job, ""


def pair_measures(record: dict) -> dict[str, float]:
    """Every measure of one record (module docstring); absent measures are absent."""
    members = record["members"]
    mean_loss = (float(members["a"]["val_loss"]) + float(members["b"]["val_loss"])) / 2
    out: dict[str, float] = {}
    ensemble = record.get("ensemble")
    if ensemble:
        out["ensemble_gain"] = float(ensemble["logits"]["gain_over_better"])
        out["ensemble_mixture_gain"] = float(ensemble["probabilities"]["gain_over_better"])
    for kind in STITCH_KINDS:
        rows = (record.get("stitch") or {}).get(kind)
        if not rows:
            continue
        costs = {int(r["k"]): float(r["val_loss"]) - mean_loss for r in rows}
        inside = [cost for k, cost in costs.items() if k >= 1]
        if inside:
            out[f"stitch_cost_{kind}"] = float(np.mean(inside))
        out.update({per_k(kind, k): cost for k, cost in sorted(costs.items())})
    if record.get("barrier"):
        out["barrier"] = float(record["barrier"]["barrier"])
    return out


def _stitch_rows(record: dict, base: dict) -> list[dict]:
    members = record["members"]
    mean_loss = (float(members["a"]["val_loss"]) + float(members["b"]["val_loss"])) / 2
    return [base | {"kind": kind, "k": int(r["k"]), "val_loss": float(r["val_loss"]),
                    "cost": float(r["val_loss"]) - mean_loss}
            for kind in STITCH_KINDS for r in (record.get("stitch") or {}).get(kind) or []]


def _path_rows(record: dict, base: dict) -> list[dict]:
    return [base | {"alpha": float(r["alpha"]), "val_loss": float(r["val_loss"]), "linear": float(r["linear"]),
                    "excess": float(r["excess"])} for r in (record.get("barrier") or {}).get("path") or []]


def _settings_key(record: dict) -> str:
    return json.dumps(record.get("settings") or {}, sort_keys=True)


def read_compose(study, declared_settings: dict | None = None) -> ComposeData:
    """The compose records under the study's run directories that describe pairs of its included jobs."""
    data = ComposeData()
    files = compose_files(list(study.sources))
    if not files or not len(study.included_jobs):
        return data
    jobs = study.included_jobs
    by_sha = {str(j["fingerprint_sha"]): j for _, j in jobs.iterrows()
              if "fingerprint_sha" in jobs and isinstance(j["fingerprint_sha"], str)}
    finals = _final_losses(study)
    readable = []
    for path in files:
        shown = display_path(path)
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            data.notes.append(f"compose record {shown} left out: unreadable ({type(err).__name__})")
            continue
        if not isinstance(record, dict) or record.get("schema") != COMPOSE_SCHEMA:
            data.notes.append(f"compose record {shown} left out: not a compose.json of schema {COMPOSE_SCHEMA}")
            continue
        readable.append((shown, record))
    chosen = _chosen_settings(readable, declared_settings, data.notes)
    seen: dict[tuple, str] = {}
    pairs, points, stitches, paths = [], [], [], []
    for shown, record in readable:
        if _settings_key(record) != chosen:
            continue
        (a, why_a), (b, why_b) = (_member(record, role, by_sha, finals) for role in ("a", "b"))
        why = why_a or why_b
        if not why and (a["variant"] != b["variant"] or any(a.get(c) != b.get(c) for c in CONTEXT)):
            why = f"its members are of different arms or contexts ({a['variant']}, {b['variant']}): not one arm's pair"
        if not why and a["seed"] == b["seed"]:
            why = f"its members share seed {a['seed']}: not two models"
        if why:
            data.notes.append(f"compose record {shown} left out: {why}")
            continue
        seed = f"{a['seed']}+{b['seed']}"
        key = (a["variant"], *(a.get(c) for c in CONTEXT), seed)
        if key in seen:
            data.notes.append(f"compose record {shown} repeats {seen[key]} (same arm and seeds): counted once")
            continue
        seen[key] = shown
        measures = pair_measures(record)
        crn = bool(a["crn"]) and bool(b["crn"])
        base = {"run": shown, "variant": a["variant"], **{c: a.get(c) for c in CONTEXT}, "seed": seed}
        pairs.append(base | {"input": a["input"], "variant_order": a["variant_order"],
                             "seed_a": a["seed"], "seed_b": b["seed"],
                             "crn": crn, "run_a": a["run"], "run_b": b["run"],
                             "loss_a": float(record["members"]["a"]["val_loss"]),
                             "loss_b": float(record["members"]["b"]["val_loss"]),
                             "n_layer": _n_layer(record) if _n_layer(record) is not None else math.nan,
                             "at_alpha": (record.get("barrier") or {}).get("at_alpha", math.nan),
                             **{m: measures.get(m, math.nan) for m in (*PRIMARY_MEASURES, "ensemble_mixture_gain")}})
        points += [base | {"input": a["input"], "variant_order": a["variant_order"], "crn": crn, "kind": "compose",
                           "metric": metric, "value": value, "stderr": math.nan} for metric, value in measures.items()]
        stitches += _stitch_rows(record, base)
        paths += _path_rows(record, base)
        data.files.append(shown)
    if not pairs:
        return data
    data.settings = json.loads(chosen) if chosen else None
    data.pairs = pd.DataFrame(pairs).reindex(columns=[c for c in PAIR_COLUMNS if c in pd.DataFrame(pairs)])
    data.points = pd.DataFrame(points)
    data.stitches = pd.DataFrame(stitches, columns=STITCH_COLUMNS)
    data.paths = pd.DataFrame(paths, columns=PATH_COLUMNS)
    return data


def _n_layer(record: dict) -> int | None:
    """The members' depth: the number of stitch boundaries minus one (None without stitches)."""
    ks = (record.get("stitch") or {}).get("ks")
    return len(ks) - 1 if ks else None


def _chosen_settings(readable: list[tuple[str, dict]], declared: dict | None, notes: list[str]) -> str | None:
    """The one set of compose settings the report pools: among the records that match the study's declared
    settings (every record, with no declaration), the settings most of them share (the first on a tie)."""
    candidates = []
    for shown, record in readable:
        differs = settings_difference(record.get("settings") or {}, declared) if declared is not None else None
        if differs:
            notes.append(f"compose record {shown} left out: computed under other settings than the study declares "
                         f"({differs}); re-run `fixedcode compose study=<study>`")
        else:
            candidates.append((shown, _settings_key(record)))
    if not candidates:
        return None
    (chosen, count), = Counter(key for _, key in candidates).most_common(1)
    left = [shown for shown, key in candidates if key != chosen]
    if left:
        notes.append(f"{len(left)} compose record(s) left out, computed under other settings than the {count} "
                     f"pooled ({', '.join(left[:3])}{' ...' if len(left) > 3 else ''}): a report pools one set of settings")
    return chosen

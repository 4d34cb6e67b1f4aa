"""Every estimate of a report, computed once from one reading of the run directories.

`compute(study, options, probe_study)` -> `Results`: the per-job rows (the Study: one read of each
job's results.json and metrics.csv, read/runs.py) and everything estimated from them, each once:

- the comparisons (stats/comparisons.py): every row with its family, primary (the study's declared
  comparisons, read/declared.py: Holm over them alone, verdicts, seeds needed) or exploratory (raw
  and Holm-adjusted p, no verdict), and where a row is primary in another study's file;
- the seed summaries the main and downstream tables and the downstream figure show (stats/core.py
  summarize), and those of the compared metrics (the comparisons' number precision);
- a tuning study's grid and chosen arms (stats/tuning.py); the matrix x seed variance components;
- the loss breakdown (stats/breakdown.py): bucket comparisons on a common partition, one BH
  procedure over every tested bucket, and the per-arm own-code profiles;
- the gap over training tokens and per model size (results/curves.py);
- an input continuum's rows: each arm's gap to the baseline (its comparison row) beside its token-specific
  and shared trainable input parameters (results/continuum.py);
- a study's compositions (its compose records, read/compose.py): one point per pair of models and measure
  in the comparisons above, and per arm its measures, the stitch cost at each k and the barrier path
  (results/composition.py);
- a study's adaptations to held-out tokens (its adapt records, read/adapt.py): one point per adapted job
  and measure in the comparisons above, and per arm and init its curves and final measures;
- a compute ladder's fits and predictions (results/scaling.py);
- the fresh probes and samples of the included jobs (read/probes.py, read/samples.py);
- the tested readings (results/readings.py): bucket trends and ends, size contrasts, the ladder's
  fits, probe contrasts at equal input RMS, input side against output side, points of a gap curve,
  each row in its stated Holm family.

Report sections (sections/) build their tables, figures and text from this object; figures draw
the estimates they are given and never recompute one (rliable's `plot_interval_estimates` shape).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..read.adapt import AdaptData, read_adapt
from ..read.compose import read_compose
from ..read.declared import Declared, declared, every_declaration
from ..read.probes import ProbeData, load_probes
from ..read.samples import load_samples
from ..stats import tuning
from ..stats.breakdown import MIN_TOKENS, compare_buckets, profiles
from ..stats.comparisons import DEFAULT_BASELINE, Plan, comparison_rows, primary_pairs
from ..stats.core import summarize
from ..stats.equivalence import DEFAULT_LOSS_MARGIN, PRIMARY, Margins
from ..stats.grouping import COMPARED_FINAL, comparison_points, context_columns, context_mask, table_points
from ..stats.variance import variance_rows
from ..tables.render import MAX_INLINE_ROWS
from ..tables.summary import metric_decimals
from .composition import Composition, composition
from .continuum import continuum_rows
from .curves import gap_curves, size_gaps
from .readings import compute_readings
from .scaling import Scaling, build as build_scaling

DEFAULT_EMA_ALPHA = 0.1


@dataclass
class ReportOptions:
    reference: bool = False
    ema_alpha: float = DEFAULT_EMA_ALPHA
    command: str = ""
    baseline: str = DEFAULT_BASELINE
    pairs: tuple[tuple[str, str], ...] = ()
    margins: Margins = field(default_factory=Margins)
    primary: tuple[tuple[str, str], ...] = ()    # primary=: the declared family, replacing any study file's
    study: Path | None = None                    # study=FILE.yaml: the study file that declares it
    min_bucket_tokens: float = MIN_TOKENS       # min_bucket_tokens=: smaller breakdown buckets are not tested
    notes: tuple[str, ...] = ()                  # note=: how and where the jobs ran, shown under What was compared
    inline_rows: int = MAX_INLINE_ROWS           # inline_rows=: a longer results table is linked, not shown

    def declared(self, study) -> Declared:
        """The primary family of a report on `study` (read/declared.py)."""
        sweeps = study.included_jobs["sweep"].dropna().astype(str).tolist() if len(study.jobs) else []
        return declared(sweeps, self.study, tuple(self.primary))

    def plan(self, declaration: Declared) -> Plan:
        return Plan(self.baseline, tuple(self.pairs), primary=declaration.pairs,
                    measure_pairs=declaration.measure_pairs, measures=declaration.measures)

    @property
    def loss_margin(self) -> float:
        """The breakdown's TOST margin: the val-loss margin (nats/token)."""
        margin = self.margins.for_metric("val_loss")
        return margin.on_scale if margin else DEFAULT_LOSS_MARGIN


@dataclass
class Results:
    study: object                                 # read/runs.py Study: the per-job rows
    options: ReportOptions
    declared: Declared
    plan: Plan
    probe_study: object = None                    # the jobs the probe section reads (the study, or + probe_runs=)
    probe_only: dict = field(default_factory=dict)   # variant -> jobs of the arms only the probes read
    compared: object = None                       # the study the comparisons and curves use (tuned: chosen arms)
    tuned_grid: pd.DataFrame | None = None
    finals: list[str] = field(default_factory=lambda: list(COMPARED_FINAL))
    summary: pd.DataFrame = field(default_factory=pd.DataFrame)             # per (context, variant, metric)
    compared_summary: pd.DataFrame = field(default_factory=pd.DataFrame)    # of the compared metrics
    comparisons: pd.DataFrame = field(default_factory=pd.DataFrame)
    variance: pd.DataFrame = field(default_factory=pd.DataFrame)
    buckets: pd.DataFrame = field(default_factory=pd.DataFrame)
    profiles: pd.DataFrame = field(default_factory=pd.DataFrame)
    curve_gaps: pd.DataFrame = field(default_factory=pd.DataFrame)
    size_gaps: pd.DataFrame = field(default_factory=pd.DataFrame)
    continuum: pd.DataFrame = field(default_factory=pd.DataFrame)  # results/continuum.py
    composition: Composition | None = None                          # results/composition.py
    adaptation: AdaptData | None = None                             # read/adapt.py: the adapt records read
    scaling: Scaling | None = None
    probes: ProbeData | None = None
    samples: list = field(default_factory=list)
    readings: pd.DataFrame = field(default_factory=pd.DataFrame)   # results/readings.py
    notes: list[str] = field(default_factory=list)   # what computing them had to say

    @property
    def has_jobs(self) -> bool:
        return bool(len(self.study.included_jobs))

    @property
    def primary(self) -> pd.DataFrame:
        """The rows of the declared family: the only rows with verdicts and Findings."""
        rows = self.comparisons
        return rows[rows["family"] == PRIMARY] if not rows.empty else rows


def compute(study, options: ReportOptions | None = None, probe_study=None) -> Results:
    """Every estimate of one report, each computed once (see the module docstring)."""
    options = options or ReportOptions()
    probe_study = study if probe_study is None else probe_study
    declaration = options.declared(study)
    results = Results(study, options, declaration, options.plan(declaration), probe_study=probe_study,
                      probe_only=probe_only_variants(study, probe_study) if probe_study is not study else {},
                      compared=study)
    if not results.has_jobs:
        return results
    context = context_columns(study.jobs)
    results.summary = summarize(table_points(study), context + ["variant", "variant_order"])
    if tuning.is_tuned(study):
        grid, notes = tuning.grid(study)
        results.notes += notes
        if not grid.empty:
            results.tuned_grid = grid
            results.compared = tuning.selected_study(study, grid)
            results.finals = tuning.tested_metric(grid.attrs["report"])
    compared = results.compared
    composed = read_compose(compared, declaration.compose_settings)   # ComposeData: empty without records
    results.notes += composed.notes
    adapted = read_adapt(compared, declaration.adapt_settings)        # AdaptData: empty without records
    results.notes += adapted.notes
    results.adaptation = adapted if adapted.any else None
    extra = [data.points for data in (composed, adapted) if data.any]
    extra = pd.concat(extra, ignore_index=True) if extra else None
    rows, notes = comparison_rows(compared, results.plan, options.margins, results.finals,
                                  strict_primary=bool(options.primary), extra=extra)
    results.notes += notes
    results.comparisons = with_primary_elsewhere(rows, compared, declaration, results.finals[0])
    points = comparison_points(compared, results.finals)
    points = pd.concat([points, extra], ignore_index=True) if extra is not None else points
    results.compared_summary = summarize(points, context_columns(compared.jobs) + ["variant"]) if len(points) else \
        pd.DataFrame()
    if not results.comparisons.empty:   # the Findings' precision per metric, so comparisons.csv alone rewrites them
        precision = metric_decimals(results.compared_summary) if len(results.compared_summary) else {}
        results.comparisons["decimals"] = results.comparisons["metric"].map(precision)
    results.variance, notes = variance_rows(study)
    results.notes += notes
    results.buckets, notes = compare_buckets(compared, results.plan, options.loss_margin, options.min_bucket_tokens)
    results.notes += notes
    results.profiles = profiles(compared)
    results.curve_gaps = gap_curves(compared, options.baseline)
    results.size_gaps = size_gaps(compared, results.comparisons, options.baseline)
    results.continuum, notes = continuum_rows(compared, results.comparisons, options.baseline, results.finals[0])
    results.notes += notes
    results.composition = composition(composed, results.comparisons, compared)
    results.scaling = build_scaling(study, options.baseline)
    results.probes = load_probes(probe_study)
    results.notes += results.probes.notes
    results.samples, notes = load_samples(study)
    results.notes += notes
    if results.scaling is not None:
        results.notes += results.scaling.notes
    results.readings = compute_readings(results)
    return results


def with_primary_elsewhere(rows: pd.DataFrame, study, declaration: Declared, metric: str) -> pd.DataFrame:
    """`primary_in`: the other studies whose file declares a row's comparison primary (in its context,
    on the primary metric). A comparison is decided in the family that declares it, so a row that is
    exploratory here, or primary here in another family, has its reason in the report."""
    if rows.empty:
        return rows
    own = {s.removeprefix("sweeps/").removesuffix(".yaml") for s in declaration.sources}
    others = [f for f in every_declaration() if f.name not in own]
    context = context_columns(study.jobs)
    jobs = study.included_jobs
    found = []
    for row in rows.itertuples(index=False):
        key = tuple(getattr(row, c) for c in context)
        variants = jobs[context_mask(jobs, context, key)]
        names = [f.name for f in others if row.metric == metric
                 and (row.variant_a, row.variant_b) in primary_pairs(variants, Plan(primary=f.pairs))]
        found.append(";".join(names))
    return rows.assign(primary_in=found)


def probe_only_variants(study, probe_study) -> dict[str, int]:
    """Variant -> included jobs of the arms that only the probe section reads (probe_runs=)."""
    extra = probe_study.included_jobs
    extra = extra[~extra["run"].isin(set(study.jobs["run"]))]
    return {str(v): len(g) for v, g in extra.groupby("variant", sort=False)}

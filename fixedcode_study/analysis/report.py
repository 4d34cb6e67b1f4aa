"""Write tables, figures and report.md for a loaded Study into a report directory."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .figures import curves as figures
from .figures import gap as figures_gap
from .figures import summary as figures_summary
from .figures import tuned as figures_tuned
from .tables import summary as tables
from .stats import tuning
from .figures.probes import probe_figures
from .stats.comparisons import DEFAULT_BASELINE, Plan
from .stats.equivalence import (
    ALPHA,
    DEFAULT_ACCURACY_MARGIN,
    DEFAULT_BPB_MARGIN,
    DEFAULT_LOSS_MARGIN,
    DEFAULT_RELATIVE_MARGIN,
    Margins,
)
from .figures.style import FigureFile, style_context
from .stats.grouping import COMPARED_FINAL, comparison_points, context_columns, shown_context
from .read.declared import Declared, declared
from .read.probes import RERUN, ProbeData, load_probes
from .tables.reference import reference_table
from .read.samples import load_samples, samples_section
from .tables.render import Table, to_markdown, write_table
from .stats.core import CONFIDENCE, summarize
from .stats.power import POWER
from .stats.breakdown import METHOD as BUCKET_METHOD, MIN_TOKENS, compare_buckets, profiles as bucket_profiles
from .tables.breakdown import PREFIX as BREAKDOWN_PREFIX, PROFILE_PREFIX, TITLES as BREAKDOWN_TITLES, breakdown_tables
from .tables.breakdown import title as breakdown_title
from .figures.breakdown import breakdown_heatmap, profile_figure
from .figures.scaling import STEM as SCALING_FIGURE, scaling_figure
from .tables import scaling as tables_scaling
from .tables.code import code_table, constant_bit_warnings
from .tables.heads import heads_table
from .tables.compare import comparison_table, compute
from .tables.eval import eval_table
from .tables.findings import findings_lines
from .tables.probes import probe_tables
from .tables.tuned import tuned_grid_table
from .tables.variance import variance_table

METHODS = f"""\
- **Cells** are mean ± sample standard deviation (ddof = 1) over seeds, with the number of seeds n.
  With a single seed the ± is lm-eval's own standard error (marked "stderr"); with neither, the value alone.
- **Best** per column (bold) is judged at the displayed precision, within each model preset; lower is better
  for perplexity, bits per byte and loss, higher for everything else (accuracy-type lm-eval metrics).
- **What is compared.** Within one model preset (and data set), every variant against the baseline
  (`--baseline`, default learned), the two fixed codes against each other (gf2 − binary16) whenever both ran,
  and any pair named with `--pairs a:b`. Δ is always a − b. The validation metric tested is val bpb (val ppl
  is not tested separately: on one validation set log ppl and bpb are proportional, so it would repeat the
  same test); downstream metrics are lm-eval's headline metrics of the suite. Perplexities are tested on the
  log scale, so their Δ is a ratio, shown as the % change of the geometric mean.
- **Pairing.** When two runs of different variants share a seed and both record common random numbers
  (results.json `init.scheme` = per_group_generators: the same body/head initialisation and the same data order
  for every variant at that seed), they form a pair, and seed-to-seed noise cancels in their difference. With at
  least two pairs the comparison is a paired t-test on the per-seed differences (`scipy.stats.ttest_rel`), with
  a t interval on n − 1 degrees of freedom. Otherwise, with at least two runs per side, it is Welch's t-test
  (`scipy.stats.ttest_ind(equal_var=False)`) with a Welch–Satterthwaite t interval; the table says why it was
  not paired. With fewer runs nothing is tested ("n/a"): one seed says nothing about seed-to-seed variation, and
  lm-eval's stderr (sampling over benchmark items) is not a substitute for it.
- **Effect sizes.** Besides Δ and its {CONFIDENCE:.0%} CI: d_z (mean difference / sd of the differences) for
  paired comparisons, Hedges' g (difference / pooled sd, small-sample corrected) otherwise; their CIs invert the
  noncentral t distribution. With three seeds these intervals are wide, which is the honest answer.
- **Families.** A study declares the comparisons it was run for (sweeps/<study>.yaml `primary:`, or `--study
  FILE.yaml`, or `--primary A:B` on the command): those rows, on the tested validation metric in every comparison
  context, are the *primary* family. Every other row (other pairs, downstream metrics) is *exploratory*.
- **Multiplicity.** The tests of Δ = 0 of the primary family are adjusted with Holm–Bonferroni (step-down, statsmodels'
  `multipletests`; controls the family-wise error rate at α = {ALPHA}), their TOST p-values as a second family.
  The exploratory rows are Holm-adjusted among themselves the same way, and shown with raw and adjusted p only:
  they get no verdict and no finding, whatever their p. A primary verdict depends on its family alone, so the same
  comparison on the same jobs gets the same verdict whatever else the report compares.
- **Equivalence (TOST).** For each metric a margin says how small a difference is too small to matter. Two
  one-sided t-tests (same se and degrees of freedom as the test above) check Δ > −margin and Δ < +margin; the
  TOST p-value is the larger of the two. Default margins: val bpb ±{DEFAULT_BPB_MARGIN} bits/byte; val loss
  (incl. select/report halves) ±{DEFAULT_LOSS_MARGIN} nats/token (a perplexity ratio of 1.02); perplexities ±{100 * DEFAULT_RELATIVE_MARGIN:g}%
  relative (|log ratio| < log 1.02); accuracies ±{DEFAULT_ACCURACY_MARGIN} (one percentage point). The three
  loss-type margins describe the same ~2% change in perplexity at 3–4.5 bytes per token; one point of accuracy
  is about two binomial standard errors on HellaSwag and well below the paper's 2–5 point gaps. Other metrics have
  no default margin. Change any with `--margin METRIC=VALUE` (e.g. `--margin val_bpb=0.005`,
  `--margin hellaswag/acc_norm=0.02`, `--margin acc_norm=0.02` for every task; for perplexities VALUE is
  relative: `0.03` or `3%`).
- **Verdict** (primary rows; α = {ALPHA}, on the Holm-adjusted p-values): *equivalent* when TOST shows |Δ| < margin (written
  "equivalent (Δ ≠ 0)" when the difference test is also significant: a real but negligible difference);
  *better* / *worse* when the difference test is significant and equivalence is not shown, in the metric's
  direction; *inconclusive* when neither test is significant: these runs can tell neither a difference nor an
  equivalence, so more seeds are needed. A CI that contains 0 is not by itself evidence of no difference, so
  it never earns a verdict of its own.
- **Findings** are written by the analysis from the verdicts, one sentence per comparison row, in words its
  verdict allows (an inconclusive row is never called better, worse or equivalent), with the numbers it rests on.
- **Seeds needed** (inconclusive paired rows): the number of seed pairs for {POWER:.0%} power, taking the observed Δ
  and sd of the paired differences as the truth: to show Δ ≠ 0 with the two-sided paired t-test (noncentral t, as
  statsmodels' `TTestPower`), and to show equivalence within the margin by TOST (exact power under normality by
  numerical integration over the sd). Each is solved at α/m, m the size of its Holm family in this table, which
  Holm rejects whatever the other rows do; the CSV also has the numbers at α alone. None when no n can (Δ = 0,
  |Δ| ≥ margin) or the row is not paired. With three seeds the sd is itself uncertain, so these are orders of magnitude.
- **Tuned arms** (studies where runs differ in optim.lr or warm-up): per arm, the learning rate with the lowest
  mean final val_loss_select over seeds is chosen, and the arms are compared, with everything above, on the
  other half of the validation windows: val_bpb_report when recorded, else val_loss_report (one of them only, as
  they are proportional). The halves share
  the trained models, so a lucky seed at one learning rate helps both halves: disjoint windows remove the data
  part of the selection optimism, not the training-noise part.
- **Matrix vs seed variance** (GF(2) matrix seeds crossed with run seeds): a two-way random-effects model
  y = μ + matrix + seed + residual, estimated by ANOVA mean squares (σ²_matrix = (MS_matrix − MS_residual)/J,
  σ²_seed = (MS_seed − MS_residual)/I, σ²_residual = MS_residual, negative estimates set to 0), with F tests of
  "no matrix effect" / "no seed effect" and 95% intervals: exact chi-square for σ²_residual, generalized confidence
  intervals (chi-square pivots of the mean squares; Hamada & Weerahandi 2000) for σ²_matrix, σ²_seed and the
  shares. Simulated under this model at 5 × 3 and 10 × 3 they cover 95–97% (at least 94% over 30 grid sizes and
  variance settings). The residual holds the matrix × seed interaction, which one run per cell cannot
  separate from noise.
- Only jobs with status "completed" and finite final val_ppl and val_bpb enter tables and figures; every other
  job is listed under *Excluded jobs*. Every table value traces to run directories via the `runs` column of
  the CSV next to it (tables/*.csv) and `tables/jobs.csv` (one row per job). Reference rows (the paper, chance
  levels) are shown for orientation only and never enter a statistic.
"""


@dataclass
class ReportOptions:
    reference: bool = False
    ema_alpha: float = figures.DEFAULT_EMA_ALPHA
    command: str = ""
    baseline: str = DEFAULT_BASELINE
    pairs: tuple[tuple[str, str], ...] = ()
    margins: Margins = field(default_factory=Margins)
    primary: tuple[tuple[str, str], ...] = ()    # --primary: the declared family, replacing any study file's
    study: Path | None = None                    # --study FILE.yaml: the study file that declares it
    min_bucket_tokens: float = MIN_TOKENS       # --min-bucket-tokens: smaller breakdown buckets are not tested

    def declared(self, study) -> Declared:
        """The primary family of a report on `study` (read/declared.py)."""
        sweeps = study.included_jobs["sweep"].dropna().astype(str).tolist() if len(study.jobs) else []
        return declared(sweeps, self.study, tuple(self.primary))

    def plan(self, declaration: Declared) -> Plan:
        return Plan(self.baseline, tuple(self.pairs), primary=declaration.pairs)


@dataclass
class ReportOutput:
    report: Path
    tables: dict[str, Table] = field(default_factory=dict)
    figures: list[FigureFile] = field(default_factory=list)


@dataclass
class Built:
    """Everything report.md is made of, before it is written."""
    tables: dict[str, Table] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    compared: object = None              # the study the comparisons and curves use (tuned: best arms)
    tuned_grid: object = None
    probes: ProbeData | None = None      # representation probes of the included jobs (fixedcode_study.analysis.read.probes)
    samples: list = field(default_factory=list)  # fresh samples.json per variant (fixedcode_study.analysis.read.samples)
    findings: list[str] = field(default_factory=list)  # the Findings section, from the comparison verdicts
    scaling: object = None               # a compute ladder's fits (tables/scaling.py), else None
    probe_study: object = None           # the jobs the probe section reads (the study, or it plus --probe-runs)
    probe_only: dict = field(default_factory=dict)  # variant -> jobs of the arms only the probes read
    declared: Declared = field(default_factory=Declared)  # the primary family (read/declared.py)
    buckets: pd.DataFrame = field(default_factory=pd.DataFrame)   # loss breakdown comparisons (stats/breakdown.py)
    profiles: pd.DataFrame = field(default_factory=pd.DataFrame)  # own-code profiles per arm
    min_tokens: float = MIN_TOKENS
    plan: Plan = field(default_factory=Plan)


def comparison_decimals(study, finals: list[str]) -> dict[str, int]:
    points = comparison_points(study, finals)
    if points.empty:
        return {}
    return tables.metric_decimals(summarize(points, context_columns(study.jobs) + ["variant"]))


def build_tables(study, options: ReportOptions, probe_study=None) -> Built:
    """`probe_study` (--probe-runs): the study's jobs plus arms trained only to be probed beside them;
    it feeds the probe tables alone, so those arms never enter a comparison or its Holm family."""
    probe_study = study if probe_study is None else probe_study
    declaration = options.declared(study)
    built = Built(compared=study, probe_study=probe_study,
                  probe_only=probe_only_variants(study, probe_study) if probe_study is not study else {},
                  declared=declaration, plan=options.plan(declaration))
    made = built.tables
    if len(study.included_jobs):
        made["main_results"], _ = tables.main_table(study)
        evals = eval_table(study)
        if evals is not None:
            made["eval_results"] = evals[0]
        finals = COMPARED_FINAL
        if tuning.is_tuned(study):
            grid, notes = tuning.grid(study)
            built.notes += notes
            if not grid.empty:
                built.tuned_grid = grid
                made["tuned_lr"] = tuned_grid_table(study, grid)
                built.compared = tuning.selected_study(study, grid)
                finals = tuning.tested_metric(grid.attrs["report"])
        diffs, notes = compute(built.compared, built.plan, options.margins, finals, strict_primary=bool(options.primary))
        built.notes += notes
        lead = ("Tuned arms, each at its chosen setting (see the tuning grid), compared on the held-out half. "
                if built.tuned_grid is not None else "")
        decimals = comparison_decimals(built.compared, finals)
        made["comparisons"] = comparison_table(built.compared, diffs, decimals, lead=lead)
        built.findings = findings_lines(diffs, decimals)
        variance, notes = variance_table(study)
        built.notes += notes
        if variance is not None:
            made["matrix_seed_variance"] = variance
        codes = code_table(study)
        if codes is not None:
            made["code_properties"] = codes
        heads = heads_table(study)
        if heads is not None:
            made["output_heads"] = heads
        built.warnings = constant_bit_warnings(study)
        made["params"] = tables.params_table(study)
        built.min_tokens = options.min_bucket_tokens
        add_breakdown_tables(built, options)
        built.scaling = tables_scaling.build(study, options.baseline)
        if built.scaling is not None:
            made.update(built.scaling.tables)
        built.notes += tables.table_notes(built.compared, options.baseline)
        built.probes = load_probes(probe_study)
        built.notes += built.probes.notes
        made.update(probe_tables(probe_study, built.probes))
        built.samples, notes = load_samples(study)
        built.notes += notes
    if options.reference:
        made["reference"] = reference_table()
    made["excluded_jobs"] = tables.excluded_table(study)
    return built


def build_figures(study, built: Built, fig_dir: Path, options: ReportOptions) -> list[FigureFile]:
    compared = built.compared
    with style_context():
        made = [figures.val_ppl_figure(compared, fig_dir),
                figures.train_loss_figure(compared, fig_dir, options.ema_alpha),
                figures_gap.gap_vs_tokens_figure(compared, fig_dir, options.baseline),
                figures_gap.gap_vs_size_figure(compared, fig_dir, options.baseline),
                figures_summary.eval_bar_figure(compared, fig_dir),
                *figures_summary.sweep_figures(study, fig_dir)]
        if built.tuned_grid is not None:
            made.append(figures_tuned.tuned_lr_figure(study, built.tuned_grid, fig_dir))
        if built.probes is not None:
            made += probe_figures(built.probe_study, built.probes, fig_dir)
        made += breakdown_figures(built, fig_dir)
        made.append(scaling_figure(built.scaling, fig_dir))
    return [f for f in made if f is not None]


def family_lines(declaration: Declared) -> list[str]:
    """Where the primary family was declared, or that none was (then nothing is a finding)."""
    if not declaration.any:
        studies = ", ".join(f"sweeps/{n}.yaml" for n in declaration.undeclared) or "a study file"
        return ["No primary comparison is declared for these jobs (no `primary:` in " + studies + ", no "
                "`--study FILE.yaml`, no `--primary A:B`), so every row is exploratory and none is a finding."]
    listed = "; ".join(f"{a} − {b}" for a, b in declaration.pairs)
    return [f"Primary family (declared in {', '.join(declaration.sources)}): {listed}, on the tested validation "
            "metric in every comparison context; Holm runs over these rows alone, and only they get verdicts."]


def compared_section(study) -> list[str]:
    jobs = study.included_jobs
    context = context_columns(study.jobs)
    lines = [f"- Sources: {', '.join(f'`{s}`' for s in study.sources)}",
             f"- Jobs found: {len(study.jobs)}; included: {len(jobs)}; excluded: {len(study.excluded_jobs)}",
             f"- Sweeps: {', '.join(sorted(jobs['sweep'].astype(str).unique())) or 'none'}",
             f"- Data sets: {', '.join(sorted(jobs['data'].astype(str).unique())) or 'none'}",
             f"- Model presets: {', '.join(sorted(jobs['model'].astype(str).unique())) or 'none'}"]
    if jobs.empty:
        return lines
    per_variant = (jobs.groupby(context + ["variant", "variant_order"], sort=False, dropna=False)
                   .agg(seeds=("seed", lambda s: ", ".join(str(x) for x in sorted(s.dropna().unique()))),
                        n=("run", "count"), crn=("crn", "all"))
                   .reset_index().sort_values("variant_order", kind="stable"))
    lines += ["", "| " + " | ".join(context) + " | input variant | seeds | n | paired-ready (CRN) |",
              "|" + " :--- |" * (len(context) + 2) + " ---: | :--- |"]
    for row in per_variant.to_dict("records"):
        cells = [str(row[c]) for c in context] + [row["variant"], row["seeds"], str(row["n"]),
                                                  "yes" if row["crn"] else "no"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _section(title: str, table: Table) -> list[str]:
    return [f"## {title}", "", table.caption, "", to_markdown(table),
            (f"Files: [`tables/{table.name}.md`](tables/{table.name}.md), "
             f"[`.tex`](tables/{table.name}.tex), [`.csv`](tables/{table.name}.csv)"), ""]


TITLES = {"main_results": "Main results", "eval_results": "Downstream evaluation",
          "tuned_lr": "Tuning grid (learning rate per arm)", "comparisons": "Comparisons",
          "matrix_seed_variance": "Matrix vs seed variance", "code_properties": "Code properties",
          "output_heads": "Output heads",
          "params": "Parameter accounting",
          "reference": "Published reference numbers (published, not produced here)"}
PROBE_TITLES = {"probes_identity": "Token identity per layer", "probes_geometry": "Geometry per layer",
                "probes_cka": "Cross-model similarity per layer"}
PROBE_FIGURES = ("probe_layers", "probe_cka", "probe_training")


def _count(value) -> str:
    return f"{value:,}" if isinstance(value, int) else "?"


def _sample_line(sample: dict, runs: list[str], several: bool) -> str:
    seq = f" of {sample['seq_len']} tokens" if sample.get("seq_len") else ""
    coverage = sample.get("class_coverage")
    text = (f"{_count(sample.get('rows'))} held-out positions ({sample.get('windows', '?')} windows{seq} from the "
            f"start of the validation split, positions from {sample.get('first_position', '?')} on); the probes are "
            f"fitted on the first {sample.get('train_windows', '?')} windows ({_count(sample.get('train_rows'))} rows) "
            f"and tested on the rest. Identity probes predict the {sample.get('classes', '?')} most frequent token "
            "types" + (f", which cover {coverage:.1%} of the positions (the others are left out of them)"
                       if isinstance(coverage, (int, float)) else "")
            + f"; type vectors for {sample.get('type_vectors', '?')} types")
    return text + (f" (jobs: {len(runs)}, sample {str(sample.get('windows_sha'))[:12]})" if several else "") + "."


def add_breakdown_tables(built: Built, options: ReportOptions) -> None:
    """The loss breakdown of the compared study (stats/breakdown.py) and its tables, at the val-loss margin."""
    margin = options.margins.for_metric("val_loss")
    margin = margin.on_scale if margin else DEFAULT_LOSS_MARGIN
    built.buckets, notes = compare_buckets(built.compared, built.plan, margin, options.min_bucket_tokens)
    built.profiles = bucket_profiles(built.compared)
    built.tables.update(breakdown_tables(built.compared, built.buckets, built.profiles, margin,
                                         options.min_bucket_tokens))
    built.notes += notes


def breakdown_figures(built: Built, fig_dir: Path) -> list[FigureFile]:
    study = built.compared
    context = shown_context(study.jobs)
    made = []
    if not built.buckets.empty:
        made += [breakdown_heatmap(built.buckets, n, context, fig_dir) for n in dict.fromkeys(built.buckets["breakdown"])]
    if not built.profiles.empty:
        styles = figures.variant_styles(study)
        made += [profile_figure(built.profiles, n, context, styles, fig_dir)
                 for n in dict.fromkeys(built.profiles["breakdown"])]
    return [f for f in made if f is not None]


def options_min_tokens(built: Built) -> float:
    return built.min_tokens


def breakdown_section(built: Built, made: list[FigureFile]) -> list[str]:
    """Where the gap lives: the loss breakdown tables and figure; [] when no job recorded a breakdown."""
    names = [n for n in built.tables if n.startswith((BREAKDOWN_PREFIX, PROFILE_PREFIX))]
    if not names:
        return []
    numbers = {fig.stem: i for i, fig in enumerate(made, start=1)}
    shown = [f"Figure {numbers[n]}" for n in names if n in numbers]
    figure = f" {', '.join(shown)} draw them." if shown else ""
    tested = int(built.buckets["tested"].sum()) if not built.buckets.empty else 0
    lines = ["## Where the gap lives (loss breakdown)", "",
             "At its final validation every job adds up its loss (nats), tokens and bytes per bucket of each "
             "breakdown (results.json `val_breakdown`, with the buckets' edges): the target token's count in the "
             "training split (log2 buckets, 0 = never seen), the input token's binary16 code weight (popcount of "
             "its id: every arm, on the same tokens), its weight under the arm's own fixed binary code (compared "
             "only between arms that have one, with the same buckets), and the position in the window (log2 "
             "buckets). A breakdown's buckets add up to the whole validation: tokens and bytes exactly, nats to "
             "float64 rounding. Where every arm's buckets hold the same tokens, each bucket's mean loss is compared "
             f"like the headline, per comparison, in buckets of at least {options_min_tokens(built):,g} tokens "
             f"(smaller ones are shown, not tested); one procedure, Benjamini–Hochberg ({BUCKET_METHOD}), controls the "
             f"false discovery rate over all {tested} tested buckets of this report. Every bucket is exploratory: none "
             "is worded as a finding. The gaps of a comparison's buckets, weighted by their tokens, add up to its "
             "whole gap in val loss. The weight under the arm's own code puts other tokens in a bucket for each code, "
             "so it is a per-arm profile, with no gap, test or share." + figure, ""]
    for name in names:
        heading = f"### {breakdown_title(name.removeprefix(BREAKDOWN_PREFIX).removeprefix(PROFILE_PREFIX))}"
        lines += [heading, *_section(name, built.tables[name])[1:]]
    return lines


def scaling_section(built: Built, made: list[FigureFile]) -> list[str]:
    """A compute ladder's scaling fits (tables/scaling.py); [] for any other study."""
    result = built.scaling
    if result is None:
        return []
    numbers = {fig.stem: i for i, fig in enumerate(made, start=1)}
    figure = f" Figure {numbers[SCALING_FIGURE]} plots the gap against compute." if SCALING_FIGURE in numbers else ""
    seeds = result.draws.counts.shape[1] if result.draws is not None else 0
    lines = ["## Scaling", "",
             f"Final val bpb of every arm run at several model sizes and token budgets ({len(result.points)} jobs, "
             f"{seeds} seeds; every point in `tables/scaling_jobs.csv` with its run directory). Two fits, each with "
             f"95% intervals from {result.draws.counts.shape[0] if result.draws is not None else 0} bootstrap "
             "replicates that resample whole seeds (a seed's jobs stay together, and arms share the draws, so "
             "predicted gaps are paired):",
             "- **The law** L(N, D) = E + A/N^α + B/D^β per arm (Hoffmann et al. 2022, approach 3: Huber δ = 1e-3 on "
             "log L, L-BFGS from the best points of Hoffmann's initialisation grid and of each exponent pair, run to "
             "tight tolerances as Besiroglu et al. 2024 ask), with N counted two ways (Pearce & Song 2024: the choice "
             "moves fitted exponents at small scale): *Chinchilla*, every trained parameter (a learned arm's input "
             "table included, a fixed code has none), and *Kaplan*, non-embedding parameters (the body: no input "
             "table, no head). D = tokens seen. Five parameters need at least three sizes and three budgets; the flags "
             "say when a fit is at a bound, outside the grid, flat, or weakly identified.",
             "- **The gap fit**: the paired gap (arm minus baseline, same seed, size and budget) against training "
             "compute C = flops_per_token × tokens seen, gap = c0 + c1 log10 C. A line in log C rather than a power "
             "law, which would need a gap of one sign at every point.",
             "- **Predictions** at the paper's (N, D) (SmolLM2-1.7B shape, V = 49,152, untied head, 1e11 tokens) and "
             "the earlier version's (32 × 1,024, GELU MLP, V = 65,536; its d_ff, heads, context and tokens are "
             f"assumed: {tables_scaling.EARLIER_ASSUMED}), with the extrapolation in orders of magnitude. Beside them, "
             "the paper's measured gap on **WikiText** (lm-eval word perplexity converted to bits per byte with "
             "WikiText-2 test's words per byte), which is not our validation text and not our tokenizer: a "
             "reference, not a test of the fit." + figure, ""]
    lines += ["### Readings", "",
              "Each line says what one fit predicts and no more than its interval allows. The intervals are over "
              "seeds only: they take the fitted form as true out to the target, which nothing here tests, so an "
              "interval that excludes 0 orders of magnitude beyond the data says what the fit implies there, not what "
              "a model at that scale does.", "", *result.readings, ""]
    for name, title in (("scaling_budgets", "Sizes, budgets and epochs"), ("scaling_laws", "The law per arm"),
                        ("scaling_gap_fit", "The gap against compute"), ("scaling_predictions", "Predictions")):
        lines += [f"### {title}", *_section(name, built.tables[name])[1:]]
    return lines


def probe_section(built: Built, made: list[FigureFile]) -> list[str]:
    """Method lines and tables of the representation probes; [] when no included job has fresh probes."""
    probes = built.probes
    if probes is None or (probes.empty and probes.pairs.empty):
        return []
    numbers = {fig.stem: i for i, fig in enumerate(made, start=1)}
    figs = [f"Figure {numbers[s]} ({s})" for s in PROBE_FIGURES if s in numbers]
    samples = probes.samples()
    settings = next(iter(probes.records.values()), {}).get("settings") or {}
    lines = ["## Representation probes", "",
             "- **What.** `python -m fixedcode_study.probe` reads every layer's hidden states (input = what block 1 "
             "receives, blockN = residual stream after block N, final_norm = what the head reads) and measures "
             "token identity and code bits with linear probes"
             + (f" ({settings['method']})" if settings.get("method") else "")
             + ", effective rank and anisotropy, type vectors (context-averaged state per token type) against the "
             "learned input table, and linear CKA between models; definitions and references in "
             "`fixedcode_study/probing/__init__.py`.",
             "- **Tokens.** " + " ".join(_sample_line(s, runs, len(samples) > 1) for s, runs in samples),
             "- **Baselines.** Each probe is read against the same probe on the job's initial model (same seed and "
             "input, before training: random features) and against the majority class of the test rows; cross-input "
             "CKA is read against two seeds of one input.",
             *probe_only_lines(built),
             f"- **Freshness.** Probes of {len(probes.records)} included job(s) are used"
             + (f", and cross-model pairs from {', '.join(f'`{f}`' for f in probes.cross_files)}"
                if probes.cross_files else "")
             + ". A job's probes.json counts only when its job fingerprint and finish time equal the job's "
             "results.json (it measured the weights the other tables come from), a pair only when both jobs count; "
             f"anything else is listed under caveats ({RERUN} to refresh).",
             ""]
    if figs:
        lines += ["Figures: " + ", ".join(figs) + ".", ""]
    for name, title in PROBE_TITLES.items():
        if name in built.tables:
            lines += [f"### {title}", *_section(title, built.tables[name])[1:]]
    return lines


def probe_only_variants(study, probe_study) -> dict[str, int]:
    """Variant -> included jobs of the arms that only the probe section reads (--probe-runs)."""
    extra = probe_study.included_jobs
    extra = extra[~extra["run"].isin(set(study.jobs["run"]))]
    return {str(v): len(g) for v, g in extra.groupby("variant", sort=False)}


def probe_only_lines(built: Built) -> list[str]:
    arms = built.probe_only
    if not arms:
        return []
    listed = ", ".join(f"{v} ({n} job{'s' if n != 1 else ''})" for v, n in arms.items())
    return [f"- **Probe-only arms.** {listed}: trained to be probed beside the study's arms (`--probe-runs`); "
            "they appear in these probe tables and figures only, never in a comparison, its Holm family or the "
            "tables above. Their jobs are in tables/jobs.csv (probe_only = true)."]


def report_markdown(study, built: Built, made: list[FigureFile], options: ReportOptions) -> str:
    lines = ["# Fixed-code input study: report", ""]
    if options.command:
        lines += [f"Generated by `{options.command}`.", ""]
    lines += ["## What was compared", ""] + compared_section(study) + [""]
    # Warnings and caveats come before the tables so nobody reads a number without them.
    lines += [f"> **Warning:** {w}" for w in built.warnings] + ([""] if built.warnings else [])
    notes = study.notes + built.notes
    lines += ["## Caveats and notes", ""] + ([f"- {n}" for n in notes] or ["- none"]) + [""]
    if not len(study.included_jobs):
        lines += [("**No job is completed with final metrics, so there is nothing to compare yet.** "
                   "See *Excluded jobs* below."), ""]
    for name, title in TITLES.items():
        if name in built.tables:
            lines += _section(title, built.tables[name])
        if name == "comparisons" and built.findings:   # readings right under the table they come from
            lines += ["## Findings", "", *family_lines(built.declared), "", *built.findings, ""]
    lines += breakdown_section(built, made)
    lines += scaling_section(built, made)
    lines += probe_section(built, made)
    lines += samples_section(built.samples)
    lines += ["## Figures", ""]
    if not made:
        lines += ["No figures: no included job has per-step metrics or final values to plot.", ""]
    for number, fig in enumerate(made, start=1):
        lines += [f"![Figure {number}](figures/{fig.stem}.png)", "",
                  f"*Figure {number}.* {fig.caption} ([PDF](figures/{fig.stem}.pdf))", ""]
    lines += ["## Excluded jobs", ""]
    excluded = built.tables["excluded_jobs"]
    lines += ([to_markdown(excluded)] if excluded.rows else ["None: every job found is completed with final metrics."])
    lines += [""]
    lines += ["## Methods", "", METHODS]
    return "\n".join(lines)


OUR_TABLES = ("main_results", "eval_results", "comparisons", "tuned_lr", "matrix_seed_variance", "code_properties",
              "output_heads",
              "params", "reference", "excluded_jobs", "jobs", "diff_vs_learned", *PROBE_TITLES)
OUR_FIGURES = ("val_ppl_vs_tokens", "train_loss", "eval_metrics", "final_vs_code_width", "final_vs_scale",
               "final_vs_model_params", "gap_vs_tokens", "gap_vs_model_size", "tuned_lr", *PROBE_FIGURES)

OUR_TABLES += tuple(prefix + name for name in BREAKDOWN_TITLES for prefix in (BREAKDOWN_PREFIX, PROFILE_PREFIX))
OUR_FIGURES += ("loss_breakdown", *OUR_TABLES[-2 * len(BREAKDOWN_TITLES):])
OUR_TABLES += tables_scaling.NAMES
OUR_FIGURES += (SCALING_FIGURE,)


def remove_stale_outputs(out_dir: Path) -> None:
    """Delete outputs of an earlier report in the same directory (only files this tool writes, including
    names earlier versions wrote), so a figure or table that no longer applies cannot be mistaken for a current one."""
    stale = [out_dir / "tables" / f"{n}.{e}" for n in OUR_TABLES for e in ("md", "tex", "csv")]
    stale += [out_dir / "figures" / f"{n}.{e}" for n in OUR_FIGURES for e in ("png", "pdf")]
    for path in stale:
        path.unlink(missing_ok=True)


def write_report(study, out_dir: Path, options: ReportOptions | None = None, probe_study=None) -> ReportOutput:
    options = options or ReportOptions()
    out_dir = Path(out_dir)
    table_dir = out_dir / "tables"
    built = build_tables(study, options, probe_study)   # before deleting anything: a bad --pairs leaves the old report intact
    remove_stale_outputs(out_dir)
    for table in built.tables.values():
        write_table(table, table_dir)
    jobs = tables.jobs_table(study)
    if probe_study is not None:   # every probe number traces to a run: the probe-only jobs are listed too
        extra = tables.jobs_table(probe_study)
        extra = extra[~extra["run"].isin(jobs["run"])]
        jobs = pd.concat([jobs.assign(probe_only=False), extra.assign(probe_only=True)], ignore_index=True)
    jobs.to_csv(table_dir / "jobs.csv", index=False)
    made = build_figures(study, built, out_dir / "figures", options) if len(study.included_jobs) else []
    report = out_dir / "report.md"
    report.write_text(report_markdown(study, built, made, options))
    return ReportOutput(report, built.tables, made)

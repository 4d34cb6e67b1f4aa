"""A study's W&B dashboard, built from the study rather than clicked together, and the report on W&B.

report.md is the reviewed record; the W&B workspace is where people watch the same runs while they
train and look back at them later. It should show them the way the report does, so it is generated:
- curves against training tokens (the x axis every job defines, training/loggers.py), one line per
  variant (W&B job type: the input and, where the study varies it, the head, named as the report
  names it, record/variants.py) with the seed spread as a min-max band, as in the report's curve figures;
- final metrics (summary `final/*`, headline `eval/*`) as bars of mean ± std over seeds, as in the
  report's tables;
- the runs table with the variant's properties (`input_props.*`, the settings that label variants),
  seed, model and the final numbers, grouped by variant; every grouping and column is a leaf key of the
  runs' config (`output.name`, `input_props.code_width`), never an object such as `output`;
- with `wandb_log_report=true`, the report itself: its tables (CSV -> wandb.Table) and figures (PNG ->
  wandb.Image, the gap figure first) logged to one study-level run (job type "analysis", the study's
  group), which the workspace's report section shows.

Constructing a `wandb_workspaces` Workspace touches no network, and its `_to_model()` is exactly the
view that `Workspace.save()` uploads, so `dry_run=true` writes that view as JSON (`wandb_dashboard.json`)
and the tests check it offline. (A wandb_workspaces *Report* looks every runset's project up on the
server while it serialises, so it cannot be built offline; hence a workspace.)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from ..record.jobdir import wandb_group
from ..record.variants import OUTPUT
from .errors import AnalysisError
from .read.variants import DERIVED_PROPS, PROP_PREFIX

SPEC_FILE = "wandb_dashboard.json"
X_AXIS = "tokens"                      # training/loggers.py defines every train/* and val/* curve against it
INPUT = "JobType"                      # each job's W&B job type is its variant (training/loggers.py run_identity)
ANALYSIS_JOB_TYPE = "analysis"
VAL_CURVES = ("val/loss", "val/ppl", "val/bpb")
FINAL_METRICS = ("final/val_loss", "final/val_ppl", "final/val_bpb")
# Bands and error bars say what the report's figures and tables say: curves are the seeds' mean with
# their min-max range (figures.py), final numbers mean ± sample std over seeds (tables.py).
CURVE_AGG, CURVE_BAND = "mean", "minmax"
FINAL_AGG, FINAL_BAR = "mean", "stddev"
GAP_FIGURE = "gap_vs_tokens"
REPORT_TABLES = ("main_results", "comparisons")   # shown as tables in the workspace; all are logged
RUN_COLUMNS = ["config:seed.value", "config:model.value.name", "summary:status", "summary:tokens_seen",
               "summary:params/trainable", "summary:params/input_trainable"]


def study_group(study, group: str | None = None) -> str:
    """The W&B group of the study: group= when given, else the one group its runs were logged in:
    the sweep name they record, `runs/<name>` for one-off runs (record/jobdir.py wandb_group)."""
    if group:
        return group
    jobs = study.included_jobs if len(study.included_jobs) else study.jobs
    sweeps = jobs.get("sweep", pd.Series(dtype=object))
    runs = jobs.get("run", pd.Series("", index=sweeps.index, dtype=object)).fillna("")
    names = sorted({wandb_group(str(s), str(r)) for s, r in zip(sweeps, runs) if pd.notna(s)})
    if len(names) != 1:
        found = ", ".join(names) if names else "none"
        raise AnalysisError(f"wandb_report= needs one study, the runs record {len(names)} ({found}); "
                            "name the W&B group with group=")
    return names[0]


# Study columns whose value is an object in the run config: its leaf (config `output` is {name, type}).
CONFIG_LEAF = {OUTPUT: f"{OUTPUT}.name"}


def config_key(column: str) -> str:
    """The run config's leaf key of a study column (`output` -> `output.name`; the rest are theirs)."""
    return CONFIG_LEAF.get(column, column)


def _column(config_key: str) -> str:
    """W&B's runs-table address of a config key. Job columns (`input_props.code_width`, `optim.lr`)
    are the run config's nesting (training/job.py logs the config plus input_props and params), and
    W&B stores a nested key as `<top>.value.<rest>`."""
    config_key = CONFIG_LEAF.get(config_key, config_key)
    top, _, rest = config_key.partition(".")
    return f"config:{top}.value" + (f".{rest}" if rest else "")


def variant_columns(study) -> list[str]:
    """Config keys that define the variants: the non-derived input props the study's jobs record,
    then the settings that label variants (read/variants.py), e.g. optim.lr in a tuning study."""
    jobs = study.included_jobs if len(study.included_jobs) else study.jobs
    props = [c for c in jobs.columns if c.startswith(PROP_PREFIX) and "." not in c[len(PROP_PREFIX):]
             and c[len(PROP_PREFIX):] not in DERIVED_PROPS and jobs[c].notna().any()]
    props.sort(key=lambda c: (c != f"{PROP_PREFIX}type", c))   # the input type first
    return list(dict.fromkeys(props + label_columns(study)))


def label_columns(study) -> list[str]:
    """The settings that split one input into several variants (none in the main study)."""
    return list(dict.fromkeys(c for cols in study.label_props.values() for c in cols))


def grouping_columns(study) -> list[str]:
    """Config leaf keys the runs are grouped by after their job type. The head is in the job type
    already (the variant names it), so only the other labelling settings (code width, lr) remain."""
    return [config_key(c) for c in label_columns(study) if c != OUTPUT]


def eval_metrics(study) -> list[str]:
    """Summary keys of the headline lm-eval metrics the study has (`eval/<task>/<metric>`)."""
    long = study.long
    rows = long[(long["kind"] == "eval") & long["included"].astype(bool)]
    if "headline" in rows:
        rows = rows[rows["headline"].fillna(True).astype(bool)]
    return [f"eval/{m}" for m in dict.fromkeys(rows["metric"])]


def _stable_ids(sections) -> None:
    """Panel ids from section and title instead of random ones, so the same study gives the same JSON."""
    for section in sections:
        for i, panel in enumerate(section.panels):
            title = getattr(panel, "title", None) or getattr(panel, "table_name", None) or str(i)
            digest = hashlib.sha256(f"{section.name}/{title}".encode()).hexdigest()
            object.__setattr__(panel, "_id", "p" + digest[:11])


def build_workspace(entity: str, project: str, group: str, study, *, ema_alpha: float = 0.1,
                    figures: Iterable[str] = (), tables: Iterable[str] = ()):
    """The study's W&B workspace (no network). `figures` / `tables`: stems of the report's PNG figures
    and CSV tables that log_report puts on the study's analysis run (empty: no report section)."""
    import wandb_workspaces.reports.v2 as wr
    import wandb_workspaces.workspaces as ws
    from wandb_workspaces import expr

    labels = grouping_columns(study)
    # One job type may hold several variants (a code-width sweep): then the panels follow the runs
    # table's grouping (job type, then the labelling settings); a panel can group by one key only.
    by_input = {"groupby": INPUT} if not labels else {"aggregate": True}

    def curve(metric: str, title: str, **extra):
        return wr.LinePlot(title=title, x=X_AXIS, y=[metric], log_x=True, title_x="training tokens", title_y=metric,
                           groupby_aggfunc=CURVE_AGG, groupby_rangefunc=CURVE_BAND, **by_input, **extra)

    def bars(metric: str):
        return wr.BarPlot(title=f"{metric} (mean ± std over seeds)", metrics=[metric], orientation="v",
                          groupby_aggfunc=FINAL_AGG, groupby_rangefunc=FINAL_BAR, **by_input)

    band = "mean over seeds, min-max band"
    sections = [
        ws.Section(name="Validation vs training tokens", is_open=True,
                   panels=[curve(m, f"{m} ({band})") for m in VAL_CURVES]),
        ws.Section(name="Training", is_open=True, panels=[
            # The report smooths with an EMA of weight ema_alpha on the new point; W&B's weight is
            # the old value's, so 1 - ema_alpha draws the same curve.
            curve("train/loss", f"train/loss (EMA alpha {ema_alpha:g}, {band})", smoothing_type="exponential",
                  smoothing_factor=round(1.0 - ema_alpha, 6), smoothing_show_original=True),
            curve("train/lr", "train/lr"),
            curve("train/tokens_per_second", "train/tokens_per_second")]),
        ws.Section(name="Final metrics", is_open=True,
                   panels=[bars(m) for m in (*FINAL_METRICS, *eval_metrics(study))]),
    ]
    figures, tables = list(figures), list(tables)
    if figures or tables:
        report = []
        if GAP_FIGURE in figures:
            report.append(wr.MediaBrowser(title="gap to the baseline vs training tokens (report figure)",
                                          media_keys=[f"figures/{GAP_FIGURE}"]))
        report += [wr.MediaBrowser(title=f"{f} (report figure)", media_keys=[f"figures/{f}"])
                   for f in figures if f != GAP_FIGURE]
        report += [wr.WeavePanelSummaryTable(table_name=f"tables/{t}",
                                             layout=wr.Layout(w=24, h=10)) for t in REPORT_TABLES if t in tables]
        sections.append(ws.Section(name="Report (analysis run)", is_open=True, panels=report))
    _stable_ids(sections)

    summary_columns = [f"summary:{m}" for m in (*FINAL_METRICS, *eval_metrics(study))]
    n_runs = len(study.jobs) + 1  # every job plus the analysis run; W&B draws 10 by default
    return ws.Workspace(
        entity=entity, project=project, name=f"{group} study",
        sections=sections,
        settings=ws.WorkspaceSettings(x_axis=X_AXIS, max_runs=max(10, n_runs)),
        runset_settings=ws.RunsetSettings(
            filters=[expr.Metric("Group") == group],
            groupby=[expr.Metric(INPUT), *(expr.Config(c) for c in labels)],
            pinned_columns=list(dict.fromkeys(["run:displayName", "run:jobType",
                                               *(_column(c) for c in variant_columns(study)),
                                               *RUN_COLUMNS, *summary_columns])),
        ),
    )


def workspace_spec(workspace) -> dict:
    """The view Workspace.save() uploads, as plain JSON data (built offline)."""
    return workspace._to_model().model_dump(mode="json", by_alias=True, exclude_none=True)


def write_spec(workspace, group: str, path: Path) -> Path:
    spec = {"entity": workspace.entity, "project": workspace.project, "group": group,
            "x_axis": X_AXIS, "view": workspace_spec(workspace)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(spec, indent=2) + "\n")
    return path


def _refuse_offline(flag: str) -> None:
    mode = os.environ.get("WANDB_MODE", "").lower()
    if mode in ("offline", "disabled", "dryrun"):
        raise AnalysisError(f"{flag} publishes to W&B but WANDB_MODE={mode}; add dry_run=true, or unset WANDB_MODE")


def publish(workspace) -> str:
    """Workspace.save(): a new view in the project; returns its URL."""
    _refuse_offline("wandb_report=")
    try:
        return workspace.save().url
    except Exception as exc:  # wandb raises many types (UsageError, CommError, HTTP errors)
        detail = (str(exc).strip().splitlines() or [""])[0][:200]
        raise AnalysisError(f"wandb_report: W&B did not take the workspace ({type(exc).__name__}: {detail}); "
                            "run `wandb login` on a machine with network access, or add dry_run=true") from exc


def analysis_run_id(group: str) -> str:
    """One analysis run per study: re-running the analysis adds a step to it instead of a new run."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", group).strip("-")[:40] or "study"
    return f"analysis-{slug}-{hashlib.sha256(group.encode()).hexdigest()[:8]}"


def report_files(output) -> tuple[dict[str, Path], dict[str, Path]]:
    """(table name -> CSV, figure stem -> PNG) that write_report wrote (jobs.csv included)."""
    table_dir = output.report.parent / "tables"
    tables = {name: table_dir / f"{name}.csv" for name in [*output.tables, "jobs"]}
    figures = {f.stem: p for f in output.figures for p in f.files if p.suffix == ".png"}
    return ({k: v for k, v in tables.items() if v.is_file()}, {k: v for k, v in figures.items() if v.is_file()})


def log_report(output, entity: str, project: str, group: str, *, offline: bool, command: str = "") -> Path:
    """Log the report's tables and figures to the study's analysis run; returns the run's local folder.

    offline=True (dry_run=true) keeps it on this machine: `wandb sync <folder>` uploads it later.
    """
    if not offline:
        _refuse_offline("wandb_log_report=true")
    import wandb

    tables, figures = report_files(output)
    captions = {f.stem: f.caption for f in output.figures}
    out_dir = output.report.parent
    data = {f"tables/{name}": wandb.Table(dataframe=pd.read_csv(path), allow_mixed_types=True)
            for name, path in tables.items()}
    data |= {f"figures/{stem}": wandb.Image(str(path), caption=captions.get(stem))
             for stem, path in figures.items()}
    try:
        run = wandb.init(entity=entity, project=project, group=group, job_type=ANALYSIS_JOB_TYPE,
                         name=f"{group}/analysis", id=analysis_run_id(group), resume="allow", dir=str(out_dir),
                         mode="offline" if offline else "online", reinit="finish_previous",
                         config={"command": command, "report": str(output.report)})
        run.log(data)
        folder = Path(run.dir).parent
        run.finish()
    except Exception as exc:  # noqa: BLE001 - one line, like every analysis error
        detail = (str(exc).strip().splitlines() or [""])[0][:200]
        raise AnalysisError(f"wandb_log_report: could not log the report ({type(exc).__name__}: {detail})") from exc
    return folder

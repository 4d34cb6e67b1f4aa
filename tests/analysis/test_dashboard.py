"""The study's W&B dashboard (analysis/dashboard.py) and the metric definitions it relies on, offline.

The spec `dry_run=true` writes is exactly the view `Workspace.save()` would upload, so checking it checks
the dashboard; W&B itself is never reached (conftest forces WANDB_MODE=offline, and the CLI test also
refuses every non-local connection). Runs are the schema-true synthetic ones from tests/helpers, no training.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import socket

import pandas as pd
import pytest

from fixedcode_study.analysis import dashboard
from fixedcode_study.cli.analyze import main
from fixedcode_study.analysis.errors import AnalysisError
from fixedcode_study.analysis.read.runs import build_study, collect_run_dirs
from fixedcode_study.record.jobdir import JobDir
from fixedcode_study.spec import WandbSpec
from fixedcode_study.training.loggers import (
    WandbMirror,
    read_wandb_log,
    read_wandb_metric_definitions,
    wandb_records,
)
from helpers.analysis import build_main_sweep, build_single_seed, build_width_sweep, write_job

ENTITY, PROJECT = "fixedcode-team", "fixedcode-study"


def _local(address) -> bool:
    if not isinstance(address, tuple):
        return True  # AF_UNIX path: wandb's own service
    host = address[0]
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _block_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any connection that leaves this machine raises (wandb talks to its local service only)."""
    real_connect, real_getaddrinfo = socket.socket.connect, socket.getaddrinfo

    def connect(sock, address):
        if not _local(address):
            raise AssertionError(f"network call to {address}")
        return real_connect(sock, address)

    def getaddrinfo(host, *args, **kwargs):
        if not _local((host,)):
            raise AssertionError(f"name lookup of {host}")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    with pytest.raises(AssertionError, match="api.wandb.ai"):
        socket.create_connection(("api.wandb.ai", 443), timeout=1)   # the guard itself works


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """`fixedcode analyze <main sweep> wandb_report=E/P dry_run=true wandb_log_report=true`, once, with every
    connection that leaves the machine refused: a dry run builds, writes and logs offline only."""
    root = tmp_path_factory.mktemp("dashboard")
    sweep = build_main_sweep(root)
    out = root / "report"
    with pytest.MonkeyPatch.context() as guard:
        _block_network(guard)
        code = main([str(sweep), f"out={out}", f"wandb_report={ENTITY}/{PROJECT}", "dry_run=true",
                     "wandb_log_report=true"])
    assert code == 0
    return sweep, out, json.loads((out / dashboard.SPEC_FILE).read_text())


def _panels(spec: dict) -> list[dict]:
    sections = spec["view"]["spec"]["section"]["panelBankConfig"]["sections"]
    return [p | {"section": s["name"]} for s in sections for p in s["panels"]]


def _one(spec: dict, view_type: str, key: str, value) -> dict:
    found = [p for p in _panels(spec) if p["viewType"] == view_type and p["config"].get(key) == value]
    assert len(found) == 1, f"one {view_type} with {key} = {value}"
    return found[0]


def _line(spec: dict, metric: str) -> dict:
    return _one(spec, "Run History Line Plot", "metrics", [metric])["config"]


def _bar(spec: dict, metric: str) -> dict:
    return _one(spec, "Bar Chart", "metrics", [metric])["config"]


def test_dry_run_spec_of_the_main_study(published):
    _, _, spec = published
    assert (spec["entity"], spec["project"], spec["group"]) == (ENTITY, PROJECT, "main")
    view = spec["view"]
    assert (view["entity"], view["project"]) == (ENTITY, PROJECT)
    section = view["spec"]["section"]
    runset = section["runSets"][0]
    assert runset["filters"]["filters"] == [
        {"key": {"section": "run", "name": "group"}, "op": "=", "value": "main", "disabled": False}]
    assert runset["grouping"] == [{"section": "run", "name": "jobType"}]      # one group per input
    assert section["settings"]["xAxis"] == "tokens" and section["settings"]["maxRuns"] >= 9 + 1
    # validation curves vs training tokens, one line per input, seeds as a min-max band
    for metric in ("val/loss", "val/ppl", "val/bpb"):
        cfg = _line(spec, metric)
        assert (cfg["xAxis"], cfg["groupBy"], cfg["groupAgg"], cfg["groupArea"]) == ("tokens", "jobType", "mean",
                                                                                      "minmax")
        assert cfg["aggregate"] is True and cfg["xLogScale"] is True
    train = _line(spec, "train/loss")
    assert train["xAxis"] == "tokens" and train["smoothingType"] == "exponential"
    assert train["smoothingWeight"] == pytest.approx(0.9)      # the report's EMA alpha 0.1
    # final metrics: mean ± std over seeds per input, incl. the lm-eval headline metric
    for metric in ("final/val_loss", "final/val_ppl", "final/val_bpb", "eval/hellaswag/acc_norm"):
        cfg = _bar(spec, metric)
        assert (cfg["groupBy"], cfg["groupAgg"], cfg["groupArea"]) == ("jobType", "mean", "stddev")
    # the runs table: the variant's properties as config columns, then seed and the final numbers
    columns = runset["runFeed"]["columnOrder"]
    for column in ("run:displayName", "run:jobType", "config:input_props.value.type",
                   "config:input_props.value.code_width", "config:input_props.value.matrix_seed",
                   "config:seed.value", "summary:status", "summary:final/val_bpb", "summary:eval/hellaswag/acc_norm"):
        assert column in columns, column
    assert "config:input_props.value.matrix_sha256" not in columns   # derived facts are not variant properties
    assert all(runset["runFeed"]["columnPinned"][c] for c in columns)
    # the gap figure and the report tables come from the analysis run
    assert _one(spec, "Media Browser", "mediaKeys", ["figures/gap_vs_tokens"])["section"] == "Report (analysis run)"


def test_spec_is_a_view_the_library_reads_back_and_is_deterministic(published):
    import wandb_workspaces.workspaces as ws
    from wandb_workspaces.workspaces import internal

    sweep, _, spec = published
    workspace = ws.Workspace._from_model(internal.View.model_validate(spec["view"]))
    assert [s.name for s in workspace.sections][:3] == ["Validation vs training tokens", "Training", "Final metrics"]
    assert [[m.name for m in p.y] for p in workspace.sections[0].panels] == [["val/loss"], ["val/ppl"], ["val/bpb"]]
    study = build_study(collect_run_dirs([sweep]))
    first, again = (dashboard.workspace_spec(dashboard.build_workspace(ENTITY, PROJECT, "main", study))
                    for _ in range(2))
    assert first == again   # panel ids are stable: the same study gives the same JSON
    sections = [s["name"] for s in first["spec"]["section"]["panelBankConfig"]["sections"]]
    assert sections == ["Validation vs training tokens", "Training", "Final metrics"]   # no report logged, no report panels


def test_x_axis_is_what_the_training_runs_define(tmp_path):
    """A real WandbMirror run: curves are defined against the dashboard's x axis, summaries stay plain numbers."""
    job_dir = write_job(tmp_path / "multirun" / "main", "gf2", 1, val_ppl=61.0, val_bpb=1.93)
    record = json.loads((job_dir / "results.json").read_text())
    mirror = WandbMirror(WandbSpec(PROJECT, None, "offline"), JobDir(job_dir), run_id="dashmirror01",
                         run_name=f"main/{job_dir.name}", group="main", job_type="gf2", tags=["input:gf2"],
                         config={**record["config"], "input_props": record["input_props"]})
    assert mirror.sync_history() > 0
    mirror.sync_record(record)
    mirror.finish(True)

    defined = read_wandb_metric_definitions(job_dir / "wandb", "dashmirror01")
    for family in ("train/*", "val/*"):
        assert defined[family]["step_metric"] == dashboard.X_AXIS
        assert "summary" not in defined[family]       # plain last value, the number analysis --wandb reads
    assert "tokens" in defined and defined["trainer/global_step"]["options"]["hidden"] is True
    history, summary = read_wandb_log(job_dir / "wandb", "dashmirror01")
    assert all("tokens" in row for row in history if any(k.startswith(("val/", "train/")) for k in row))
    csv = pd.read_csv(job_dir / "metrics.csv")
    last_val = csv[csv["metric"] == "val/loss"].sort_values("step")["value"].iloc[-1]
    assert summary["val/loss"] == pytest.approx(last_val)
    assert summary["final/val_bpb"] == 1.93 and summary["params/trainable"] == record["params"]["trainable"]
    run = next(r["run"] for r in wandb_records(job_dir / "wandb", "dashmirror01") if r.get("type") == "run")
    assert (run["run_group"], run["job_type"]) == ("main", "gf2")


def _table_file(folder, history_row: dict, key: str) -> pd.DataFrame:
    logged = json.loads((folder / "files" / history_row[f"{key}.path"]).read_text())
    return pd.DataFrame(logged["data"], columns=logged["columns"])


def test_report_logged_to_one_offline_study_run(published):
    _, out, spec = published
    run_id = dashboard.analysis_run_id("main")
    history, _ = read_wandb_log(out / "wandb", run_id)
    assert len(history) == 1
    row = history[0]
    folder = next((out / "wandb").glob(f"offline-run-*-{run_id}"))
    csvs = sorted((out / "tables").glob("*.csv"))
    assert {"main_results", "comparisons", "jobs"} <= {p.stem for p in csvs}
    for path in csvs:   # every table of the report, value for value
        logged, written = _table_file(folder, row, f"tables/{path.stem}"), pd.read_csv(path)
        pd.testing.assert_frame_equal(logged, written, check_dtype=False, obj=path.name)
    pngs = sorted((out / "figures").glob("*.png"))
    assert "gap_vs_tokens" in {p.stem for p in pngs}
    for path in pngs:   # every figure, byte for byte
        assert row[f"figures/{path.stem}.sha256"] == hashlib.sha256(path.read_bytes()).hexdigest(), path.name
    run = next(r["run"] for r in wandb_records(out / "wandb", run_id) if r.get("type") == "run")
    assert (run["run_group"], run["job_type"], run["project"]) == ("main", "analysis", PROJECT)
    # every report panel of the workspace shows something this run logged
    shown = [k for p in _panels(spec) for k in p["config"].get("mediaKeys", [])]
    assert shown and all(f"{k}._type" in row for k in shown)


@pytest.mark.parametrize("args, flag", [
    (["dry_run=true"], "dry_run: needs wandb_report="),
    (["wandb_log_report=true"], "wandb_log_report: needs wandb_report="),
    (["wandb_report=just-a-project"], "wandb_report: expects ENTITY/PROJECT"),
    (["wandb_report=a/b/c"], "wandb_report: expects ENTITY/PROJECT"),
    (["group=main"], "group: needs wandb= or wandb_report="),
])
def test_bad_dashboard_settings_are_one_line_errors(tmp_path, capsys, args, flag):
    assert main([str(tmp_path), "out=" + str(tmp_path / "out"), *args]) == 2
    (error,) = capsys.readouterr().err.strip().splitlines()
    assert error.startswith("error: " + flag)


def test_group_is_the_study_or_given(tmp_path):
    two = build_study(collect_run_dirs([build_main_sweep(tmp_path), build_single_seed(tmp_path)]))
    with pytest.raises(AnalysisError, match="group="):
        dashboard.study_group(two)
    assert dashboard.study_group(two, "single") == "single"


def test_variants_within_one_input_group_the_runs_table(tmp_path):
    """A code-width sweep: gf2 at three widths is three variants, so grouping follows input and code_width."""
    study = build_study(collect_run_dirs([build_width_sweep(tmp_path)]))
    view = dashboard.workspace_spec(dashboard.build_workspace(ENTITY, PROJECT, "width", study))
    runset = view["spec"]["section"]["runSets"][0]
    assert runset["grouping"] == [{"section": "run", "name": "jobType"},
                                  {"section": "config", "name": "input_props.value.code_width"}]
    panels = [p["config"] for s in view["spec"]["section"]["panelBankConfig"]["sections"] for p in s["panels"]]
    assert all("groupBy" not in cfg and cfg["aggregate"] for cfg in panels)   # the panels use that grouping


def test_publishing_is_refused_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    write_job(tmp_path / "multirun" / "main", "learned", 1, val_ppl=60.0, val_bpb=1.9)
    study = build_study(collect_run_dirs([tmp_path]))
    with pytest.raises(AnalysisError, match="dry_run=true"):
        dashboard.publish(dashboard.build_workspace(ENTITY, PROJECT, "main", study))


# -- every arm of a study is its own W&B job type (issue 42.1) ------------------------------------------
HEADS = {"learned": ("untied", "tied"), "binary16": ("untied", "fixed", "fixed_gaussian", "bitchain")}


def _head_job(sweep, name: str, head: str, seed: int):
    """A job of a study that varies the head: its grid names output= on the command line (sweeps/output_side.yaml)."""
    return write_job(sweep, name, seed, val_ppl=60.0, val_bpb=1.9, extra_key=f",output={head}",
                     results_extra={"output": head, "overrides": [f"name={sweep.name}", f"input={name}",
                                                                  f"output={head}", f"seed={seed}"]},
                     config_extra={"output": {"name": head, "type": head}})


def _logged_run(job_dir, run_id: str) -> dict:
    """A real offline WandbMirror run opened as the recorder opens it (training/recorder.py); the run
    record W&B wrote, read back from its transaction log."""
    record = json.loads((job_dir / "results.json").read_text())
    mirror = WandbMirror(WandbSpec(PROJECT, None, "offline"), JobDir(job_dir), run_id=run_id,
                         run_name=f"{record['sweep']}/{job_dir.name}", group=record["sweep"], job_type=record["input"],
                         tags=[f"input:{record['input']}", f"seed:{record['seed']}", f"model:{record['model']}"],
                         config={**record["config"], "input_props": record["input_props"]})
    mirror.sync_record(record)
    mirror.finish(True)
    return next(r["run"] for r in wandb_records(job_dir / "wandb", run_id) if r.get("type") == "run")


def _kind(config: dict, address: str) -> str:
    """What W&B's `<top>.value.<rest>` names in a logged run config: a "leaf", an "object" or "absent"."""
    top, _, rest = address.partition(".value")
    if top not in config:
        return "absent"
    node = config[top]
    for part in [p for p in rest.split(".") if p]:
        if not isinstance(node, dict) or part not in node:
            return "absent"
        node = node[part]
    return "object" if isinstance(node, dict) else "leaf"


def test_every_arm_is_its_own_job_type_and_the_workspace_groups_by_keys_the_runs_have(tmp_path):
    sweep = tmp_path / "multirun" / "output_side"
    arms = [_head_job(sweep, name, head, 1) for name, heads in HEADS.items() for head in heads]
    one_off = write_job(tmp_path / "runs" / "main", "learned", 1, val_ppl=60.0, val_bpb=1.9)  # `fixedcode run`
    runs = {job: _logged_run(job, f"arm{i:02d}") for i, job in enumerate([*arms, one_off])}
    study = build_study(collect_run_dirs([sweep]))
    variants = dict(zip(study.jobs["job_key"], study.jobs["variant"]))
    for job in arms:   # the job type is the report's variant: input and head, all six apart
        record = json.loads((job / "results.json").read_text())
        run = runs[job]
        assert run["job_type"] == variants[job.name], (run["job_type"], variants[job.name])
        assert run["run_group"] == "output_side"
        assert {f"input:{record['input']}", f"output:{record['output']}", "seed:1"} <= set(run["tags"])
    assert len({runs[job]["job_type"] for job in arms}) == len(arms)
    assert runs[arms[0]]["job_type"] == "learned (output=untied)"
    # the one-off run (default name=main, no -m) has a group of its own, and its analysis finds it
    assert runs[one_off]["run_group"] == "runs/main" != "main"
    assert dashboard.study_group(build_study(collect_run_dirs([tmp_path / "runs" / "main"]))) == "runs/main"
    # the workspace: filtered by the runs' group, grouped and tabled by leaf keys of the logged config
    view = dashboard.workspace_spec(dashboard.build_workspace(ENTITY, PROJECT, dashboard.study_group(study), study))
    runset = view["spec"]["section"]["runSets"][0]
    assert [f["value"] for f in runset["filters"]["filters"]] == ["output_side"]
    configs = [r["config"]["update"] for r in runs.values()]
    addresses = [g["name"] for g in runset["grouping"] if g["section"] == "config"]
    addresses += [c.removeprefix("config:") for c in runset["runFeed"]["columnOrder"] if c.startswith("config:")]
    assert "output.value.name" in addresses
    for address in addresses:   # a plain value in the runs that have it (learned has no code_width)
        kinds = {_kind(config, address) for config in configs[:-1]}
        assert "leaf" in kinds and "object" not in kinds, (address, kinds)
    assert runset["grouping"][0] == {"section": "run", "name": "jobType"}

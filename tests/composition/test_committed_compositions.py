"""The committed composition reports (docs/reports/composition, docs/reports/composition_teams):
each primary row recomputes from the committed compose records with scipy and statsmodels alone,
and the two-teams jobs trained on the halves their spec names."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from fixedcode_study.analysis.read.compose import pair_measures

REPORTS = Path(__file__).resolve().parents[2] / "docs" / "reports"


def records(report: Path) -> pd.DataFrame:
    rows = []
    for path in sorted((report / "runs" / "compose").glob("*/compose.json")):
        record = json.loads(path.read_text())
        arm = record["a"]["input"]
        assert record["b"]["input"] == arm
        rows.append({"arm": arm, "pair": (record["a"]["seed"], record["b"]["seed"]), **pair_measures(record)})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("study", ["composition", "composition_teams"])
def test_each_primary_row_recomputes_from_the_compose_records(study):
    report = REPORTS / study
    if not (report / "runs" / "compose").is_dir():
        pytest.skip(f"the committed {study} records are not in this checkout")
    frame, table = records(report), pd.read_csv(report / "tables" / "comparisons.csv")
    primary = table[table["family"] == "primary"].reset_index(drop=True)
    assert len(primary) == 8 and len(frame) == 9
    p_values = []
    for row in primary.itertuples():
        a = frame[frame["arm"] == row.variant_a].set_index("pair")[row.metric]
        b = frame[frame["arm"] == row.variant_b].set_index("pair")[row.metric]
        assert sorted(a.index) == sorted(b.index) and len(a) == 3   # paired by the pair's two seeds
        b = b.loc[a.index]
        test = stats.ttest_rel(a, b)
        assert row.delta == pytest.approx(float(np.mean(a - b)), rel=1e-9, abs=1e-12)
        assert row.p_value == pytest.approx(float(test.pvalue), rel=1e-9)
        p_values.append(test.pvalue)
    holm = multipletests(p_values, method="holm")[1]
    assert primary["p_holm"].to_numpy() == pytest.approx(holm, rel=1e-9)


def test_the_two_teams_jobs_trained_on_disjoint_halves():
    """Odd seeds drew from the first half of the training split, even seeds from the second (config.yaml)."""
    runs = REPORTS / "composition_teams" / "runs"
    if not runs.is_dir():
        pytest.skip("the committed composition_teams records are not in this checkout")
    jobs = sorted(p.parent for p in runs.glob("input=*/results.json"))
    assert len(jobs) == 18
    for job in jobs:
        lines = (job / "config.yaml").read_text().splitlines()
        seed = int(next(line.split(":")[1] for line in lines if line.startswith("seed:")))
        part = next(line.split(":", 1)[1].strip().strip("'\"") for line in lines if line.strip().startswith("data_part:"))
        assert part == ("1/2" if seed % 2 else "2/2"), (job.name, part)

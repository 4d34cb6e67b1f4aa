"""The new-tokens study's reading (tables/adaptation_reading.py): each primary row on an adaptation
measure in the words its verdict allows, nothing from an exploratory row, and the same frame as the
composition reading (tables/measure_reading.py)."""

from pathlib import Path

import pandas as pd
import pytest

from fixedcode_study.analysis.stats.equivalence import BETTER, EQUIVALENT, EQUIVALENT_NONZERO, INCONCLUSIVE, WORSE
from fixedcode_study.analysis.tables.adaptation_reading import SAYS, adaptation_reading
from fixedcode_study.analysis.tables.composition_reading import composition_reading

REPORT = Path(__file__).resolve().parents[2] / "docs" / "reports" / "new_tokens"


@pytest.fixture
def rows() -> pd.DataFrame:
    path = REPORT / "tables" / "comparisons.csv"
    if not path.is_file():
        pytest.skip("the committed new_tokens report is not in this checkout")
    return pd.read_csv(path)


def test_each_primary_row_reads_in_its_verdicts_words_and_nothing_else(rows):
    lines = adaptation_reading(rows)
    primary = rows[rows["family"] == "primary"]
    assert len(primary) == 6 and set(primary["metric"]) == set(SAYS)
    read = [line for line in lines if line.startswith("  - ") and "; that is, " in line]
    assert len(read) == len(primary)  # one line per primary row; the exploratory rows are not read
    for row in primary.itertuples():
        words = SAYS[row.metric][row.verdict].format(a=row.variant_a, b=row.variant_b, margin="")
        assert sum(words in line for line in read) == 1, words
    assert not any("change" in line for line in read)  # the change from step 0 is exploratory only
    assert composition_reading(rows) == []   # not a composition family


@pytest.mark.parametrize("verdict, says", [(BETTER, "lower loss"), (WORSE, "higher loss"),
                                           (EQUIVALENT, "within ±0.01 nats"), (EQUIVALENT_NONZERO, "within ±0.01 nats"),
                                           (INCONCLUSIVE, "is not shown either way")])
def test_a_rows_verdict_decides_its_words(rows, verdict, says):
    one = rows[(rows["family"] == "primary") & (rows["metric"] == "adapt_heldout_loss")].head(1).copy()
    one["verdict"] = verdict
    one["margin_label"] = "±0.01"
    (line,) = [line for line in adaptation_reading(one) if "; that is, " in line]
    assert says in line.split("; that is, ")[1]
    tally = adaptation_reading(one)[-1]
    assert tally.endswith(f"{EQUIVALENT if verdict == EQUIVALENT_NONZERO else verdict} on 1 (a list of the rows "
                          "above, not a test across measures).")


def test_no_primary_row_no_reading(rows):
    assert adaptation_reading(rows[rows["family"] != "primary"]) == []
    assert adaptation_reading(pd.DataFrame()) == [] and adaptation_reading(None) == []

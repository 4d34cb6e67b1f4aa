"""The tested readings' table and sentences (results/readings.py rows), written from each row alone.

A stated row's sentence is chosen by its reading (the words its Holm-adjusted test allows): a
direction ("increases", "larger", "above 0") only where the test rejects 0 within its family,
"equivalent" only where its TOST does, and otherwise "not shown", never "no difference". Exploratory
and beside rows get no sentence. A kind with many stated rows (a ladder's 12 cells) is written one
line per comparison and breakdown, listing the contexts under each reading; every number is in
tables/readings.csv.

Works from the frame results/readings.py computes or from readings.csv read back, so the summary
blocks (analysis/summaries.py) are written by the same functions from the committed tables.
"""

from __future__ import annotations

import math

import pandas as pd

from ..stats.rows import DOWN, NOT_SHOWN, UP
from ..stats.trend import DECREASES, INCREASES, NOT_MONOTONE
from . import numfmt
from .breakdown import title as breakdown_title
from .render import Table

# What a reading row tests (results/readings.py builds them) and whether it may be worded.
TREND, END, SIZE, LADDER, EXTRAPOLATION, PROBE, SIDES, POINT, CHANGE = (
    "trend", "end", "size", "ladder", "extrapolation", "probe", "sides", "point", "change")
KINDS = (TREND, END, SIZE, LADDER, EXTRAPOLATION, PROBE, SIDES, POINT, CHANGE)
STATED, EXPLORATORY, BESIDE = "stated", "exploratory", "beside"
EQUIVALENT, NOT_TESTED = "equivalent", "not tested"
NAME = "readings"
MAX_ROWS_PER_KIND = 18   # more stated rows of one kind are written one line per comparison and breakdown
# More condensed lines than this in one kind: the lines that read "not shown" in every context are
# gathered into one line naming them (a row that is not shown is no finding; every row stays in the CSV).
MAX_CONDENSED_LINES = 12
KIND_TITLES = {TREND: "Trends over ordered buckets", END: "The first and last bucket against the others",
               SIZE: "The gap across model sizes at a fixed budget", LADDER: "The ladder's gap, read as the design allows",
               EXTRAPOLATION: "Extrapolations of the ladder's fits", PROBE: "Probe contrasts at equal input RMS",
               SIDES: "The input side against the output side", POINT: "Points of the gap curve",
               CHANGE: "The gap curve's last step"}
UNITS = {TREND: "nats/token per bucket", END: "nats/token", SIZE: "bpb", LADDER: "bpb per decade",
         EXTRAPOLATION: "bpb", PROBE: "", SIDES: "bpb", POINT: "bpb", CHANGE: "bpb"}


def budget_label(tokens) -> str:
    """'2^21 tokens' for a power of two, else the count."""
    value = float(tokens)
    exponent = math.log2(value) if value > 0 else math.nan
    return f"2^{int(exponent)} tokens" if math.isfinite(exponent) and exponent.is_integer() else f"{value:,.0f} tokens"


def _text(value) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def _digits(row) -> int:
    width = abs(float(row.ci_high) - float(row.ci_low)) if math.isfinite(float(row.ci_low)) else abs(float(row.estimate))
    return 3 if width >= 0.02 or not math.isfinite(width) else 4


def numbers(row, unit: str | None = None) -> str:
    """'+0.077 [+0.073, +0.081] nats/token per bucket' (no interval: '(no interval)')."""
    d = _digits(row)
    unit = UNITS.get(row.kind, "") if unit is None else unit
    est = f"{float(row.estimate):+.{d}f}"
    ci = (f" [{float(row.ci_low):+.{d}f}, {float(row.ci_high):+.{d}f}]" if math.isfinite(float(row.ci_low))
          else " (no interval)")
    return est + ci + (f" {unit}" if unit else "")


def holm(row, label: str = "Holm p", column: str = "p_adjusted") -> str:
    shown = numfmt.p_value(float(getattr(row, column)))
    size = int(row.family_size) if math.isfinite(float(row.family_size)) else 0
    value = f"{label} < {shown[1:]}" if shown.startswith("<") else f"{label} = {shown}"
    return f"{value} over {size}"


def _where(row) -> str:
    context = _text(row.context)
    return f" ({context})" if context else ""


# ------------------------------------------------------------------------------------ one sentence per row


def _trend(row) -> str:
    head = f"{row.comparison}, gap {breakdown_title(row.breakdown)}{_where(row)}"
    span = f"slope {numbers(row)}, {holm(row)}"
    if row.reading in (INCREASES, DECREASES):
        return (f"{head}: the gap {row.reading} over the buckets {row.bucket} ({span}); every step of the seed-mean "
                "profile goes the same way.")
    if row.reading == NOT_MONOTONE:
        direction = "an upward" if float(row.estimate) > 0 else "a downward"
        return (f"{head}: {direction} linear trend over the buckets {row.bucket} is shown ({span}), but the profile "
                f"is not monotone: {int(row.steps_against)} of {int(row.steps)} steps go the other way "
                f"({int(row.steps_shown_against)} of them shown by their own Holm-adjusted paired test).")
    return f"{head}: a trend over the buckets {row.bucket} is not shown ({span})."


def _end(row) -> str:
    head = (f"{row.comparison}, gap {breakdown_title(row.breakdown)}{_where(row)}: the gap in the {row.end} tested "
            f"bucket ({row.bucket})")
    rest = "the other tested buckets' token-weighted mean"
    margin = f"±{float(row.margin):g} nats/token"
    if row.reading in (UP, DOWN):
        return (f"{head} is {'larger' if row.reading == UP else 'smaller'} than {rest}: Δ = {numbers(row)}, "
                f"{holm(row)}.")
    if row.reading == EQUIVALENT:
        return (f"{head} and {rest} are equivalent within {margin}: Δ = {numbers(row)}, "
                f"{holm(row, 'TOST Holm p', 'tost_p_adjusted')}.")
    return (f"{head} against {rest}: neither a difference ({holm(row)}) nor equivalence within {margin} "
            f"({holm(row, 'TOST Holm p', 'tost_p_adjusted')}) is shown; Δ = {numbers(row)}.")


def _size(row) -> str:
    a, _, b = str(row.bucket).partition(" − ")
    head = f"{row.comparison} at {row.context}"
    if row.reading in (UP, DOWN):
        return (f"{head}: the gap is {'larger' if row.reading == UP else 'smaller'} at {a} than at {b}: "
                f"Δ = {numbers(row)} (Welch over seeds), {holm(row)}.")
    return f"{head}: a difference between the gap at {a} and at {b} is not shown: Δ = {numbers(row)}, {holm(row)}."


LADDER_WORDS = {
    "gap slope per decade of compute": ("with compute", "a trend with compute"),
    "gap slope per decade of N at fixed D": ("over model size at fixed budget", "a trend over model size at fixed budget"),
    "gap slope per decade of D at fixed N": ("over budget at fixed size", "a trend over budget at fixed size"),
    "gap slope per decade of D at this size": ("over budget at {context}", "a trend over budget at {context}"),
    "gap slope per decade of N at this budget": ("over model size at {context}", "a trend over model size at {context}"),
}


def _ladder(row) -> str:
    head = f"{row.comparison}"
    where = f"random-cell model on {int(row.n)} cell means, {holm(row)}"
    if row.name == "log10 C squared":
        if row.reading in (UP, DOWN):
            return (f"{head}: the gap is curved in log compute (log10 C² coefficient {numbers(row, 'bpb')}, {where}), "
                    "so a compute slope is an average over the range.")
        return f"{head}: curvature in log compute is not shown (log10 C² coefficient {numbers(row, 'bpb')}, {where})."
    if row.name == "curvature in log N and log D":
        f = f"F = {float(row.estimate):.2f} on {int(row.dof)} residual df, {holm(row)}"
        if row.reading == "curved":
            return (f"{head}: the two-factor plane in log N and log D is rejected ({f}): the gap is curved over the "
                    "ladder, so each slope is an average over its range.")
        return f"{head}: curvature in log N and log D is not shown ({f})."
    shown, absent = (w.format(context=row.context) for w in LADDER_WORDS[row.name])
    if row.reading == UP:
        return f"{head}: the gap increases {shown} ({numbers(row)}, {where})."
    if row.reading == DOWN:
        return f"{head}: the gap decreases {shown} ({numbers(row)}, {where})."
    return f"{head}: {absent} is not shown ({numbers(row)}, {where})."


def _extrapolation(row) -> str:
    lo, hi = float(row.ci_low), float(row.ci_high)
    sign = ("the interval lies above 0" if lo > 0 else "the interval lies below 0" if hi < 0
            else "the interval contains 0")
    flags = _text(getattr(row, "flags", ""))
    measured = float(getattr(row, "measured", math.nan))
    paper = (f" The paper measured {measured:+.4f} bpb on WikiText (another text and tokenizer)."
             if math.isfinite(measured) else "")
    return (f"{row.comparison} at {row.context}: the {row.name} predicts {numbers(row)}, {row.method}; {sign}, "
            "and that interval takes the fitted form as true out to the target"
            + (f" ({flags})" if flags else "") + "." + paper)


def _probe(row) -> str:
    a, _, b = str(row.comparison).partition(" − ")
    head = f"current-token identity at {row.bucket}, {row.comparison} at {row.context}"
    if row.reading in (UP, DOWN):
        return (f"{head}: {a} reads the current token out {'higher' if row.reading == UP else 'lower'} than {b}: "
                f"Δ = {numbers(row, 'accuracy')} (Welch over seeds), {holm(row)}.")
    return f"{head}: a difference is not shown: Δ = {numbers(row, 'accuracy')} (Welch over seeds), {holm(row)}."


def _sides(row) -> str:
    first, second = _text(getattr(row, "first", "")), _text(getattr(row, "second", ""))
    head = f"{row.comparison}{_where(row)}"
    if row.reading in (UP, DOWN):
        return (f"{head}: the input-side gap {first} is {'larger' if row.reading == UP else 'smaller'} than the "
                f"output-side gap {second}: Δ = {numbers(row)} (paired over seeds), {holm(row)}.")
    return (f"{head}: a difference between the input-side gap {first} and the output-side gap {second} is not "
            f"shown: Δ = {numbers(row)}, {holm(row)}.")


def _point(row) -> str:
    head = f"{row.comparison}{_where(row)} at {row.bucket}"
    if row.reading in (UP, DOWN):
        return f"{head}: the gap is {'above' if row.reading == UP else 'below'} 0: Δ = {numbers(row)}, {holm(row)}."
    return f"{head}: a gap is not shown: Δ = {numbers(row)}, {holm(row)}."


def _change(row) -> str:
    head = f"{row.comparison}{_where(row)} from {row.bucket}"
    if row.reading in (UP, DOWN):
        return (f"{head}: the gap {'increases' if row.reading == UP else 'decreases'}: change {numbers(row)}, "
                f"{holm(row)}.")
    return f"{head}: a change in the gap is not shown: change {numbers(row)}, {holm(row)}."


LEVELS = {"gap slope per decade of D at this size": "the slope over budget at each size",
          "gap slope per decade of N at this budget": "the slope over model size at each budget"}
LEVEL_WORDS = {UP: "increases", DOWN: "decreases", NOT_SHOWN: "not shown"}


def ladder_lines(rows: pd.DataFrame) -> list[str]:
    """A ladder's rows: one sentence per fit, and one line per comparison for the slopes per size and per
    budget, each level with its reading and numbers."""
    lines = []
    for comparison, part in rows.groupby("comparison", sort=False):
        for r in part[~part["name"].isin(list(LEVELS))].itertuples(index=False):
            lines.append(sentence(r))
        for name, what in LEVELS.items():
            level = part[part["name"] == name]
            if level.empty:
                continue
            first = next(level.itertuples(index=False))
            items = "; ".join(f"at {r.context}: {LEVEL_WORDS.get(r.reading, r.reading)} ({numbers(r, '')})"
                              for r in level.itertuples(index=False))
            lines.append(f"{comparison}, {what} (bpb per decade, random-cell model, Holm over "
                         f"{int(float(first.family_size))}): {items}.")
    return lines


WRITERS = {TREND: _trend, END: _end, SIZE: _size, LADDER: _ladder, EXTRAPOLATION: _extrapolation, PROBE: _probe,
           SIDES: _sides, POINT: _point, CHANGE: _change}


def sentence(row) -> str:
    """The sentence a stated row's reading allows; '' for exploratory and beside rows."""
    if row.role != STATED:
        return ""
    if row.kind != EXTRAPOLATION and _text(row.reading) == NOT_TESTED:
        at = {POINT: " at ", CHANGE: " from "}.get(row.kind, "")  # which point of the curve, as a tested row says
        bucket = f"{at}{row.bucket}" if at and _text(row.bucket) else ""
        why = _text(row.method) or "too few seeds"
        why = why[len("not tested ("):-1] if why.startswith("not tested (") and why.endswith(")") else why
        return f"{row.comparison}{_where(row)}{bucket}, {row.name}: not tested ({why})."
    return WRITERS[row.kind](row)


# ------------------------------------------------------------------------------------ many rows of a kind


PHRASES = {
    TREND: {INCREASES: "increases", DECREASES: "decreases", NOT_MONOTONE: "a linear trend, not monotone",
            NOT_SHOWN: "not shown"},
    END: {UP: "larger than the rest", DOWN: "smaller than the rest", EQUIVALENT: "equivalent to the rest",
          NOT_SHOWN: "not shown"},
    SIZE: {UP: "larger at the larger size", DOWN: "smaller at the larger size", NOT_SHOWN: "not shown"},
    LADDER: {UP: "increases", DOWN: "decreases", "curved": "curved", NOT_SHOWN: "not shown"},
    POINT: {UP: "above 0", DOWN: "below 0", NOT_SHOWN: "not shown"},
    CHANGE: {UP: "increases", DOWN: "decreases", NOT_SHOWN: "not shown"},
    PROBE: {UP: "higher", DOWN: "lower", NOT_SHOWN: "not shown"},
    SIDES: {UP: "larger on the input side", DOWN: "smaller on the input side", NOT_SHOWN: "not shown"},
}


def _item(row, across: str) -> str:
    """How a row is named in a condensed line: by its context (a ladder's cell), or, in a study of one
    context, by its comparison; with the bucket or point where the row has one."""
    at = _text(row.bucket) if row.kind in (SIZE, POINT, CHANGE) else ""
    name = _text(row.context) if across == "context" else _text(row.comparison)
    if row.kind == SIZE and across == "context":
        return f"{at} at {name}"
    return f"{name} at {at}" if at else name


def _counts(part: pd.DataFrame, phrases: dict, across: str) -> str:
    """'not shown in 11 of 12; smaller than the rest in 1 of 12 (…)': every reading but the most common
    one names its rows."""
    common = part["reading"].value_counts(sort=True).index[0]
    groups = []
    for reading in dict.fromkeys(part["reading"]):
        group = part[part["reading"] == reading]
        listed = ("" if reading == common else
                  f" ({', '.join(_item(r, across) for r in group.itertuples(index=False))})")
        groups.append(f"{phrases.get(reading, reading)} in {len(group)} of {len(part)}{listed}")
    return "; ".join(groups)


def condensed(rows: pd.DataFrame) -> list[str]:
    """Many rows of one kind in few lines. Over several contexts (a ladder's cells): one line per
    comparison and breakdown (or row name), counting the contexts under each reading. In one context:
    one line per breakdown (or row name), counting the comparisons. An end bucket's two ends each get
    their count; every reading but the most common one names its rows."""
    several = rows["context"].fillna("").astype(str).nunique() > 1
    across = "context" if several else "comparison"
    keys = (["comparison"] if several else []) + ["breakdown", "name"]
    lines, unshown = [], []
    for key, part in rows.groupby(keys, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        breakdown, name = key[-2], key[-1]
        kind = part["kind"].iloc[0]
        phrases = PHRASES.get(kind, {})
        what = breakdown_title(breakdown) if _text(breakdown) else _text(name)
        head = f"{key[0]}, {what}" if several else what[:1].upper() + what[1:]
        if set(part["reading"]) == {NOT_SHOWN}:
            unshown.append((head, len(part)))
        if kind == END:
            ends = [f"the {end} tested bucket ({', '.join(dict.fromkeys(group['bucket'].astype(str)))}): "
                    + _counts(group, phrases, across) for end, group in part.groupby("end", sort=False)]
            lines.append(f"{head}: " + "; ".join(ends) + ".")
        else:
            lines.append(f"{head}: " + _counts(part, phrases, across) + ".")
    if len(lines) <= MAX_CONDENSED_LINES or len(unshown) < 2:
        return lines
    heads = {head for head, _ in unshown}
    kept = [line for line in lines if line.split(": ", 1)[0] not in heads]
    count = sum(n for _, n in unshown)
    return kept + [f"not shown in any of their {count} rows (each row in `tables/readings.csv`): "
                   + "; ".join(head for head, _ in unshown) + "."]


def reading_lines(frame: pd.DataFrame, kinds=None) -> list[str]:
    """Markdown bullets of the stated rows of `kinds` (default every kind), a heading-less block per kind:
    a sentence per row, or condensed lines past MAX_ROWS_PER_KIND rows."""
    if frame is None or frame.empty:
        return []
    stated = frame[frame["role"] == STATED]
    lines = []
    for kind in [k for k in (kinds or WRITERS) if k in set(stated["kind"])]:
        rows = stated[stated["kind"] == kind]
        if kind == LADDER:
            text = ladder_lines(rows)
        elif len(rows) > MAX_ROWS_PER_KIND and kind != EXTRAPOLATION:
            text = condensed(rows)
        else:
            text = [sentence(r) for r in rows.itertuples(index=False)]
        family = _family_line(rows)
        lines += [f"- **{KIND_TITLES[kind]}**{family}:"] + [f"  - {t}" for t in text]
    return lines


def _family_line(rows: pd.DataFrame) -> str:
    if rows["kind"].iloc[0] == EXTRAPOLATION:
        return " (not tested: a fitted line carried past the data)"
    families = rows.drop_duplicates("family")
    return " (" + "; ".join(f"Holm over {int(r.family_size)}: {r.family}" for r in families.itertuples(index=False)) + ")"


# ------------------------------------------------------------------------------------ the table


TEXT_COLUMNS = ("kind", "role", "family", "context", "comparison", "name", "breakdown", "bucket", "reading", "method",
                "unit", "end", "flags", "first", "second")


def read_readings(path) -> pd.DataFrame:
    """tables/readings.csv read back with its text columns as text (a bucket label '1' stays '1')."""
    header = pd.read_csv(path, nrows=0).columns
    return pd.read_csv(path, dtype={c: str for c in TEXT_COLUMNS if c in header})


def readings_table(frame: pd.DataFrame) -> Table:
    cells = [[r.kind, r.role, _text(r.comparison), _text(r.context), _text(r.breakdown), _text(r.bucket),
              numbers(r, ""), numfmt.p_value(float(r.p_value)), numfmt.p_value(float(r.p_adjusted)),
              str(int(r.family_size)) if math.isfinite(float(r.family_size)) else "", _text(r.reading)]
             for r in frame.itertuples(index=False)]
    caption = ("Every tested reading row (results/readings.py): its kind, role (stated: a family built from the "
               "declared comparisons or by a rule stated in full; exploratory: built from exploratory comparisons, "
               "never worded; beside: shown to say why another interval is read), what it compares, its estimate with "
               "95% CI, p, Holm p within its family and the family's size, and the reading its test allows. The CSV "
               "has each row's method, n, df, TOST p's and family name.")
    return Table(NAME, caption, ["kind", "role", "comparison", "context", "breakdown", "bucket / at", "estimate [95% CI]",
                                 "p", "Holm p", "family size", "reading"], cells, frame.reset_index(drop=True),
                 numeric={7, 8, 9})

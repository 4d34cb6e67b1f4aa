"""The input continuum's reading: its three questions, each answered from primary rows alone.

sweeps/input_continuum.yaml asks which part of the fixed code's gap a trainable input closes. Each
question names its arms and the rows that answer it; each row is read in the words its verdict
allows (stats/equivalence.py verdict(), the Findings' vocabulary, tables/findings.py), with the Δ,
CI and Holm p it rests on:

- against the fixed code (X − binary16): *better* = X closes part of binary16's gap; *equivalent* =
  whatever it closes is inside the margin; *inconclusive* = closing part of the gap is not shown;
- against the baseline (X − learned): *worse* = a gap to learned remains; *equivalent* = the gap is
  inside the margin; *inconclusive* = whether a gap remains is not shown;
- the spelling code against the ID code (spelling − binary16), both with 0 trainable parameters.

Only primary rows are read (an exploratory row has no verdict); a question whose arms have none is
left out, and an arm without one of its rows says so. A per-context line groups the arms by what their
rows say: a list of verdicts, not a comparison across rows. spelling_mlp − binary16_mlp would isolate
the spelling code under a map, but the study does not declare it, so it is named as not read.

Works from compare()'s frame or comparisons.csv read back, with the continuum table (its parameter
counts), so analysis/summaries.py rewrites the block from the committed tables.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..read.compose import is_measure as is_composition_measure
from ..stats.comparisons import label_parts
from ..stats.core import EXACT
from ..stats.equivalence import (
    ALPHA,
    BETTER,
    EQUIVALENT,
    EQUIVALENT_NONZERO,
    IDENTICAL,
    INCONCLUSIVE,
    NOT_AVAILABLE,
    PRIMARY,
    WORSE,
)
from ..stats.grouping import metric_title
from . import numfmt
from .compare import delta_cells
from .continuum import decimals_of

CODE, BASE = "binary16", "learned"   # the fixed code and the baseline the study's rows are against
CONTEXT = ("data", "model")
NOT_DECLARED = ("spelling_mlp", "binary16_mlp")   # the comparison that would isolate spelling under a map

# What a verdict of a row against CODE, against BASE, and of the spelling code against the ID code says.
AGAINST_CODE = {BETTER: "closes part of binary16's gap", WORSE: "adds to binary16's gap",
                EQUIVALENT: "whatever it closes of binary16's gap is inside the margin",
                EQUIVALENT_NONZERO: "whatever it closes of binary16's gap is inside the margin",
                INCONCLUSIVE: "closing part of binary16's gap is not shown"}
AGAINST_BASE = {WORSE: "a gap to learned remains", BETTER: "better than learned",
                EQUIVALENT: "the gap to learned is inside the margin",
                EQUIVALENT_NONZERO: "the gap to learned is inside the margin",
                INCONCLUSIVE: "whether a gap to learned remains is not shown"}
SPELLING = {BETTER: "the spelling code beats the ID code", WORSE: "the ID code beats the spelling code",
            EQUIVALENT: "the two codes are within the margin of each other",
            EQUIVALENT_NONZERO: "the two codes are within the margin of each other",
            INCONCLUSIVE: "a difference between the two codes is not shown either way"}
UNTESTED = "not tested"


@dataclass(frozen=True)
class Question:
    text: str
    arms: tuple[str, ...]
    against: tuple[tuple[str, dict[str, str]], ...]   # (reference arm, what each verdict of X − it says)


QUESTIONS = (
    Question("Does a shared trainable map over the code, with no token-specific parameter, close any of binary16's "
             "gap to learned?", ("binary16_linear", "binary16_mlp", "binary16_mlp_wide"),
             ((CODE, AGAINST_CODE), (BASE, AGAINST_BASE))),
    Question("Do token-specific parameters at low rank close it?", ("learned_lowrank4", "learned_lowrank",
                                                                     "learned_lowdim"),
             ((CODE, AGAINST_CODE), (BASE, AGAINST_BASE))),
    Question("Does a code that spells the token beat the arbitrary ID code, both with 0 trainable input "
             "parameters?", ("spelling",), ((CODE, SPELLING),)),
)


# ------------------------------------------------------------------------------------ one row


def _p(label: str, value) -> str:
    """'Holm p = 0.043', 'Holm p < 0.001' (the tables' precision, as a phrase)."""
    shown = numfmt.p_value(float(value))
    return f"{label} < {shown[1:]}" if shown.startswith("<") else f"{label} = {shown}"


def cited(row) -> str:
    """'*worse* (Δ = +0.0123, 95% CI [0.0100, 0.0146], Holm p = 0.004)': the verdict and what it rests on."""
    delta, ci = delta_cells(row, decimals_of(row))
    numbers = f"Δ = {delta}, 95% CI {ci}"
    verdict = row.verdict
    if verdict in (BETTER, WORSE):
        evidence = "no spread between seeds, so Δ is exact and untested" if row.test == EXACT else _p("Holm p",
                                                                                                       row.p_holm)
        return f"*{verdict}* ({numbers}, {evidence})"
    if verdict == EQUIVALENT:
        return f"*equivalent* within {row.margin_label} ({numbers}, {_p('TOST Holm p', row.tost_p_holm)})"
    if verdict == EQUIVALENT_NONZERO:
        return (f"*equivalent* within {row.margin_label} ({numbers}, {_p('TOST Holm p', row.tost_p_holm)}; the "
                f"difference is nonzero, {_p('Holm p', row.p_holm)}, but inside the margin)")
    if verdict == INCONCLUSIVE:
        return (f"*inconclusive*: neither a difference ({_p('Holm p', row.p_holm)}) nor equivalence within "
                f"{row.margin_label} ({_p('TOST Holm p', row.tost_p_holm)}) is shown ({numbers})")
    if verdict == IDENTICAL:
        return "*identical* at every seed (no spread, Δ = 0): nothing to test"
    if verdict == NOT_AVAILABLE:
        return f"*not tested*: fewer than two seeds on a side (Δ = {delta})"
    raise ValueError(f"unknown verdict {verdict!r}")  # a new verdict must get its words here


def means(row, words: dict[str, str]) -> str:
    """What the row's verdict says for the question (UNTESTED where there is no verdict to read)."""
    return words.get(row.verdict, UNTESTED)


# ------------------------------------------------------------------------------------ finding the rows


def _name_of(label: str) -> str:
    return label_parts(label)[0]


def _row(rows: pd.DataFrame, arm: str, against: str):
    """The primary row `arm − against` (labels or input names) in one context's rows, or None."""
    for exact in (True, False):
        a = rows["variant_a"] == arm if exact else rows["variant_a"].map(_name_of) == arm
        b = rows["variant_b"] == against if exact else rows["variant_b"].map(_name_of) == against
        found = rows[a & b]
        if len(found) == 1:
            return next(found.itertuples(index=False))
    return None


def _context(rows: pd.DataFrame) -> list[str]:
    """The context columns to name: model always (the question is asked per model), data where it varies."""
    return [c for c in CONTEXT if c in rows and (c == "model" or rows[c].nunique(dropna=False) > 1)]


def _parameters(arms: pd.DataFrame, where: dict, variant: str) -> str:
    """' (0 token-specific, 2,048 shared trainable input parameters)' from the continuum table, if it has the arm."""
    if arms is None or arms.empty:
        return ""
    mask = arms["variant"].astype(str) == str(variant)
    for column, value in where.items():
        if column in arms:
            mask &= arms[column].astype(str) == str(value)
    found = arms[mask]
    if found.empty:
        return ""
    r = found.iloc[0]
    return (f" ({numfmt.integer(float(r['token_specific']))} token-specific, {numfmt.integer(float(r['shared']))} "
            "shared trainable input parameters)")


# ------------------------------------------------------------------------------------ the block


def _grouped(pairs: list[tuple[str, str]]) -> str:
    """[(arm, what its row says)] -> 'a, b (2 of 3): closes part of binary16's gap; c (1 of 3): ... not shown'."""
    groups: dict[str, list[str]] = {}
    for arm, said in pairs:
        groups.setdefault(said, []).append(arm)
    return "; ".join(f"{', '.join(arms)} ({len(arms)} of {len(pairs)}): {said}" for said, arms in groups.items())


def _question_lines(question: Question, primary: pd.DataFrame, arms: pd.DataFrame, context: list[str]) -> list[str]:
    lines = []
    for key, rows in primary.groupby(context, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        where = dict(zip(context, key, strict=True))
        label = ", ".join(map(str, key))
        found = {(arm, ref): _row(rows, arm, ref) for arm in question.arms for ref, _ in question.against}
        present = [arm for arm in question.arms if any(found[arm, ref] is not None for ref, _ in question.against)]
        if not present:
            continue
        summary = [f"Against {ref}: " + _grouped([(arm, means(found[arm, ref], words)) for arm in present
                                                  if found[arm, ref] is not None])
                   for ref, words in question.against if any(found[arm, ref] is not None for arm in present)]
        lines.append(f"  - **{label}**: {'. '.join(summary)}.")
        for arm in present:
            parts = []
            for ref, words in question.against:
                row = found[arm, ref]
                said = "" if row is None or means(row, words) == UNTESTED else f": {means(row, words)}"
                parts.append(f"against {ref}: no primary row" if row is None else f"against {ref} {cited(row)}{said}")
            lines.append(f"    - {arm}{_parameters(arms, where, arm)}: {'; '.join(parts)}.")
    if not lines:
        return []
    rows_named = " and ".join(f"X − {ref}" for ref, _ in question.against)
    return [f"- **{question.text}** ({', '.join(question.arms)}; rows {rows_named})", *lines]


def _gap_lines(primary: pd.DataFrame, context: list[str]) -> list[str]:
    """The gap the questions are about, binary16 − learned, per context, when it is a primary row."""
    lines = []
    for key, rows in primary.groupby(context, sort=False, dropna=False):
        row = _row(rows, CODE, BASE)
        if row is not None:
            lines.append(f"  - **{', '.join(map(str, key if isinstance(key, tuple) else (key,)))}**: {cited(row)}.")
    return [f"- **The gap: {CODE} − {BASE}**", *lines] if lines else []


def _not_declared(primary: pd.DataFrame, context: list[str]) -> list[str]:
    a, b = NOT_DECLARED
    names = set(primary["variant_a"].map(_name_of)) | set(primary["variant_b"].map(_name_of))
    if a not in names or any(_row(rows, a, b) is not None for _, rows in primary.groupby(context, sort=False)):
        return []
    return [(f"- {a} − {b}, which would isolate the spelling code under the same map, is not a declared comparison, "
             f"so it is not read here; {a}'s own rows are in the Findings.")]


def continuum_reading(comparisons: pd.DataFrame, arms: pd.DataFrame | None = None, alpha: float = ALPHA) -> list[str]:
    """Markdown lines of the reading (no heading): [] when none of the questions' arms has a primary row.
    `comparisons`: every comparison row (or comparisons.csv); `arms`: the continuum table's rows."""
    if comparisons is None or comparisons.empty or "family" not in comparisons:
        return []
    # the continuum's questions are on the jobs' validation metric: rows on composition measures are not theirs
    primary = comparisons[(comparisons["family"] == PRIMARY) & ~comparisons["metric"].map(is_composition_measure)]
    if primary.empty:
        return []
    metric = primary["metric"].iloc[0]
    primary = primary[primary["metric"] == metric]
    context = _context(primary)
    answers = [line for q in QUESTIONS for line in _question_lines(q, primary, arms, context)]
    if not answers:
        return []
    lead = (f"Each answer is read from primary rows alone (a − b on {metric_title(metric)}, α = {alpha:g} on the p's "
            "Holm-adjusted over the primary family), in the words each row's verdict allows: against binary16, "
            "*better* means the arm closes part of binary16's gap; against learned, *worse* means a gap remains; "
            "*inconclusive* means neither is shown. Per context the arms are grouped by what their rows say; "
            "under each arm, the rows.")
    return [lead, "", *_gap_lines(primary, context), *answers, *_not_declared(primary, context)]

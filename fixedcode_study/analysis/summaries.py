"""Generated summaries (issue 40): what README.md and docs/reports/README.md say a study found, written
from each committed report's tables, and the lint that keeps findings out of hand-written text.

**Blocks.** Text between `<!-- generated:KEY:begin -->` and `<!-- generated:KEY:end -->` is written
by the analysis and nothing else:

- README.md, `results`: the main study's primary table, Findings and tested readings (trends,
  probes), and one line per other committed study with its verdict counts, its input side against
  output side, and for a ladder its compute, size and budget slopes on cell means;
- docs/reports/README.md, one block per committed report (`main`, `controls`, ...): its Findings
  and every stated reading; docs/probes.md, `probes`: the main report's probe contrasts;
- each report.md, `findings`, `readings`, `scaling-readings`, `continuum` and `composition`: the report writes them, from
  the same functions as here, and `expected_report_blocks` rewrites them from the report's own CSVs;
  `table:NAME` blocks hold an inline table, which must equal its tables/NAME.md.

Only the committed tables are read (tables/comparisons.csv, tables/readings.csv,
tables/scaling_predictions.csv, tables/primary.md), never the run directories, so regenerating every
block takes seconds. A report without committed records (docs/reports/<study>/runs/) gets a block
that says so and lists no finding: a report whose rows cannot be recomputed does not speak here.

**The lint.** Outside the blocks, in README.md, docs/**/*.md (not the generated tables/ and runs/
folders) and every report.md whose records are committed, no sentence may pair an arm or a comparison (an input or head name, a
gap, a side, the fixed codes) with a verdict or trend word (worse, better, equivalent, closes,
decreases, grows, smaller, ahead, behind, narrows, widens, ...). Hand-written text says what a study
is and how it ran, never what it found.

    fixedcode regenerate summaries=true   # write the blocks
    fixedcode regenerate check=true       # exit 1 on a stale block or a claim outside one
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pandas as pd

from ..record.jobdir import RESULTS_FILE
from .errors import AnalysisError
from .sections.base import BEGIN, END, wrap
from .sections.readings import HERE, LADDER_KINDS
from .stats.equivalence import PRIMARY
from .tables.continuum import NAME as CONTINUUM_TABLE
from .tables.adaptation_reading import adaptation_reading
from .tables.composition_reading import composition_reading
from .tables.continuum_reading import continuum_reading
from .tables.findings import VERDICT_ORDER, findings_lines
from .tables.readings import LADDER, PROBE, SIDES, STATED, TREND, read_readings, reading_lines
from .tables.scaling import law_readings

# The checkout the package sits in: the committed reports and the docs live there (a wheel has neither).
REPO_ROOT = Path(__file__).resolve().parents[2]
REPORTS = Path("docs") / "reports"
README = Path("README.md")
REPORTS_README = REPORTS / "README.md"
PROBES_DOC = Path("docs") / "probes.md"
BLOCK = re.compile(r"<!-- generated:(?P<key>[\w:.-]+):begin -->\n(?P<body>.*?)<!-- generated:(?P=key):end -->",
                   re.S)
REGENERATE = "fixedcode regenerate summaries=true"
README_KINDS = (TREND, PROBE, SIDES)          # the main study's readings in README.md
HEADLINE_LADDER = ("gap slope per decade of compute", "gap slope per decade of N at fixed D",
                   "gap slope per decade of D at fixed N")


def blocks(text: str) -> dict[str, str]:
    return {m["key"]: m["body"] for m in BLOCK.finditer(text)}


def replace_blocks(text: str, new: dict[str, list[str]], where: str) -> str:
    """`text` with each block KEY's body replaced by new[KEY]; every key must have its markers."""
    missing = [k for k in new if BEGIN.format(key=k) not in text or END.format(key=k) not in text]
    if missing:
        raise AnalysisError(f"{where}: no generated block {', '.join(missing)}; add the lines "
                            f"{BEGIN.format(key=missing[0])} and {END.format(key=missing[0])} where it goes")

    def body(match: re.Match) -> str:
        key = match["key"]
        return match[0] if key not in new else "\n".join(wrap(key, new[key])).rstrip("\n")

    return BLOCK.sub(body, text)


# ------------------------------------------------------------------------------------ a report's own tables


def report_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in (root / REPORTS).glob("*/report.md"))


def has_records(report: Path) -> bool:
    return any((report / "runs").rglob(RESULTS_FILE)) if (report / "runs").is_dir() else False


def comparisons(report: Path) -> pd.DataFrame:
    path = report / "tables" / "comparisons.csv"
    return pd.read_csv(path) if path.is_file() else pd.DataFrame()


def readings(report: Path) -> pd.DataFrame:
    path = report / "tables" / "readings.csv"
    return read_readings(path) if path.is_file() else pd.DataFrame()


def expected_report_blocks(report: Path) -> dict[str, list[str]]:
    """The generated blocks of one report.md, rewritten from its own tables (what the report wrote)."""
    text = (report / "report.md").read_text()
    present = blocks(text)
    out: dict[str, list[str]] = {}
    if "findings" in present:
        out["findings"] = findings_lines(comparisons(report))
    frame = readings(report)
    if "readings" in present:
        out["readings"] = reading_lines(frame, HERE)
    if "scaling-readings" in present:
        predictions = pd.read_csv(report / "tables" / "scaling_predictions.csv").fillna({"convention": ""})
        out["scaling-readings"] = reading_lines(frame, LADDER_KINDS) + law_readings(predictions)
    if "continuum" in present:   # sections/continuum.py READING: the comparison rows and the arms' parameters
        arms = report / "tables" / f"{CONTINUUM_TABLE}.csv"
        out["continuum"] = continuum_reading(comparisons(report), pd.read_csv(arms) if arms.is_file() else None)
    if "composition" in present:   # sections/composition.py READING: the primary rows on the composition measures
        out["composition"] = composition_reading(comparisons(report))
    if "adaptation" in present:   # sections/adaptation.py READING: the primary rows on the adaptation measures
        out["adaptation"] = adaptation_reading(comparisons(report))
    for key in present:
        if key.startswith("table:"):
            md = report / "tables" / f"{key.removeprefix('table:')}.md"
            out[key] = md.read_text().rstrip("\n").splitlines() if md.is_file() else ["(missing table file)"]
    return out


# ------------------------------------------------------------------------------------ the study blocks


def _link(report: Path, root: Path, start: Path) -> str:
    return (report / "report.md").relative_to(root).relative_to(start).as_posix() if start != Path(".") else \
        (report / "report.md").relative_to(root).as_posix()


def _no_records(name: str, link: str) -> list[str]:
    return [f"*{name}* ([report]({link})): its job records are not committed (no `runs/` beside the report), so its "
            "rows cannot be recomputed, and the report, written before tested reading rows and declared families, "
            "is kept as it was. None of its rows is listed here as a finding."]


def _verdict_counts(rows: pd.DataFrame) -> str:
    counts = Counter(rows["verdict"])
    return ", ".join(f"{counts[v]} {v}" for v in VERDICT_ORDER if counts[v])


def study_lines(report: Path, root: Path, start: Path = REPORTS) -> list[str]:
    """A study's block in docs/reports/README.md: its Findings and every stated reading, from its tables."""
    name, link = report.name, _link(report, root, start)
    if not has_records(report):
        return _no_records(name, link)
    lines = [f"Generated from [{name}/report.md]({link})'s tables by `{REGENERATE}`: each line is one tested row, "
             "in the words its verdict allows.", "", "**Findings**", "", *findings_lines(comparisons(report))]
    frame = readings(report)
    stated = frame[frame["role"] == STATED] if not frame.empty else frame
    if not stated.empty:
        lines += ["", "**Tested readings**", "", *reading_lines(frame)]
    return lines


def readme_lines(root: Path) -> list[str]:
    """README.md's results block: the main study in full, one line per other committed study."""
    main = root / REPORTS / "main"
    lines = [f"Generated by `{REGENERATE}` from the committed reports' tables; each line is one tested row in the "
             "words its verdict allows.", ""]
    if has_records(main):
        table = main / "tables" / "primary.md"
        lines += [f"**main** ([report](docs/reports/main/report.md)): the primary comparisons, Holm over their "
                  "family.", ""]
        if table.is_file():
            lines += [*table.read_text().rstrip("\n").splitlines(), ""]
        lines += findings_lines(comparisons(main))
        frame = readings(main)
        kept = reading_lines(frame, README_KINDS)
        if kept:
            lines += ["", *kept]
    else:
        lines += _no_records("main", "docs/reports/main/report.md")
    others = [r for r in report_dirs(root) if r.name != "main"]
    if others:
        lines += ["", "The other committed studies (each block of [docs/reports/README.md](docs/reports/README.md) "
                  "has every row):", ""]
    for report in others:
        link = (report / "report.md").relative_to(root).as_posix()
        if not has_records(report):
            lines.append(f"- *{report.name}* ([report]({link})): records not committed; no finding is listed.")
            continue
        rows = comparisons(report)
        primary = rows[rows["family"] == PRIMARY] if "family" in rows else rows.iloc[0:0]
        counts = _verdict_counts(primary) if not primary.empty else "no primary row"
        lines.append(f"- *{report.name}* ([report]({link})): {len(primary)} primary rows: {counts}.")
        frame = readings(report)
        if not frame.empty:   # a ladder's headline fits and a study's sides; every other row is in its block
            kept = frame[((frame["kind"] == LADDER) & frame["name"].isin(HEADLINE_LADDER)) | (frame["kind"] == SIDES)]
            lines += [f"  {line}" for line in reading_lines(kept)]
    return lines


def probe_lines(root: Path) -> list[str]:
    """docs/probes.md's block: the main report's probe contrasts."""
    main = root / REPORTS / "main"
    if not has_records(main):
        return _no_records("main", "reports/main/report.md")
    lines = reading_lines(readings(main), (PROBE,))
    return lines or ["- The main report has no probe contrast (no fresh probes.json in its records)."]


def expected(root: Path = REPO_ROOT) -> dict[Path, str]:
    """Every file with generated blocks, as the committed tables say it should read."""
    out = {}
    readme = root / README
    out[readme] = replace_blocks(readme.read_text(), {"results": readme_lines(root)}, str(README))
    probes = root / PROBES_DOC
    out[probes] = replace_blocks(probes.read_text(), {"probes": probe_lines(root)}, str(PROBES_DOC))
    index = root / REPORTS_README
    out[index] = replace_blocks(index.read_text(), {r.name: study_lines(r, root) for r in report_dirs(root)},
                                str(REPORTS_README))
    for report in report_dirs(root):
        path = report / "report.md"
        new = expected_report_blocks(report)
        if new:
            out[path] = replace_blocks(path.read_text(), new, str(path.relative_to(root)))
    return out


def write(root: Path = REPO_ROOT) -> list[Path]:
    """Rewrite every block; returns the files that changed."""
    changed = []
    for path, text in expected(root).items():
        if path.read_text() != text:
            path.write_text(text)
            changed.append(path)
    return changed


def stale(root: Path = REPO_ROOT) -> list[str]:
    """'FILE: block KEY' for every block whose committed text differs from what its tables give."""
    found = []
    for path, text in expected(root).items():
        have, want = blocks(path.read_text()), blocks(text)
        found += [f"{path.relative_to(root)}: block {key}" for key in want if have.get(key) != want[key]]
    return found


# ------------------------------------------------------------------------------------ the lint


def _arm_words(root: Path) -> list[str]:
    inputs = {p.stem for p in (root / "conf" / "input").glob("*.yaml")} - {"binary", "wide"}   # common words
    heads = {p.stem for p in (root / "conf" / "output").glob("*.yaml")} - {"fixed", "tied"}
    return sorted(inputs | heads | {"gap", "gaps", "input side", "output side", "fixed code", "fixed codes",
                                    "fixed-code", "table-free"}, key=len, reverse=True)


VERDICT_WORDS = ("worse", "better", "equivalent", "close", "closes", "closing", "closed", "decrease",
                 "decreases", "decreasing", "increase", "increases", "increasing", "grow", "grows", "growing",
                 "smaller", "larger", "ahead", "behind", "narrow", "narrows", "narrowing", "widen", "widens",
                 "widening", "shrink", "shrinks", "outperform", "outperforms", "beats", "recovers", "costs more",
                 "higher than", "lower than", "no excess", "no difference", "follows")
SENTENCE = re.compile(r"(?<=[.!?;:])\s+(?=[A-Z*(\[`])")
SKIPPED_DIRS = ("tables", "runs", "figures")


def lint_files(root: Path = REPO_ROOT) -> list[Path]:
    """README.md and docs/**/*.md, without the generated tables/ and the records; a report.md only when its
    records are committed (a report without them cannot be regenerated, is kept as it was written, and its
    summary block lists nothing from it)."""
    files = [root / README] + sorted((root / "docs").rglob("*.md"))
    files = [f for f in files if f.is_file() and not (set(f.relative_to(root).parts[:-1]) & set(SKIPPED_DIRS))]
    return [f for f in files if f.name != "report.md" or has_records(f.parent)]


def _outside_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line outside generated blocks and fenced code."""
    out, inside, fenced = [], None, False
    for number, line in enumerate(text.splitlines(), start=1):
        begin = re.fullmatch(r"<!-- generated:([\w:.-]+):begin -->", line.strip())
        if inside is None and begin:
            inside = begin[1]
            continue
        if inside is not None:
            if line.strip() == END.format(key=inside):
                inside = None
            continue
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            out.append((number, line))
    return out


def _units(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Sentences: paragraphs and list items joined over their lines, table rows one each, then split."""
    units, current, start = [], [], 0
    for number, line in lines + [(0, "")]:
        stripped = line.strip()
        new_item = bool(re.match(r"([-*+]|\d+\.)\s", stripped)) or stripped.startswith(("|", "#", ">"))
        if not stripped or new_item:
            if current:
                units.append((start, " ".join(current)))
            current, start = ([stripped], number) if new_item and stripped else ([], 0)
            if stripped.startswith(("|", "#")):
                units.append((number, stripped))
                current = []
            continue
        if not current:
            start = number
        current.append(stripped)
    return [(n, s) for n, unit in units for s in SENTENCE.split(unit) if s]


def claims(text: str, arms: list[str]) -> list[tuple[int, str]]:
    """Sentences outside the generated blocks that pair an arm or comparison with a verdict or trend word."""
    arm = re.compile(r"(?<![\w-])(" + "|".join(re.escape(a) for a in arms) + r")(?![\w-])", re.I)
    verdict = re.compile(r"(?<![\w-])(" + "|".join(re.escape(w) for w in VERDICT_WORDS) + r")(?![\w-])", re.I)
    return [(n, s) for n, s in _units(_outside_blocks(text))
            if not s.rstrip(" *").endswith("?") and arm.search(s) and verdict.search(s)]   # a question claims nothing


def lint(root: Path = REPO_ROOT) -> list[str]:
    """'FILE:LINE: sentence' for every claim outside a generated block."""
    arms = _arm_words(root)
    found = []
    for path in lint_files(root):
        for number, sentence in claims(path.read_text(), arms):
            found.append(f"{path.relative_to(root)}:{number}: {sentence[:200]}")
    return found

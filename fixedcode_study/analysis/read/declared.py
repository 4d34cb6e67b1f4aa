"""The comparisons a study was run for: its primary family, declared in sweeps/<study>.yaml.

A study file may declare

    primary:
      question: Does a fixed binary code cost validation loss against a learned table?
      comparisons:
        - binary16 - learned      # arm a minus arm b: each a variant label or an input name
        - gf2 - learned

The analysis tests those comparisons on the study's tested validation metric (val bpb; a tuning
study's report half) in every comparison context, and Holm runs over them alone: they are the
only rows worded as findings. Every other row of the report is exploratory. Names resolve as
`pairs=` names do (stats/comparisons.py resolve: an exact variant label, else the input's plain
variant).

A study that composes pairs of its models (`pairs:`, sweeps/composition.yaml) declares its
comparisons on the composition measures instead, with `measures:` (read/compose.py MEASURES):

      comparisons: [binary16 - learned, gf2 - learned]
      measures: [ensemble_gain, stitch_cost_identity, stitch_cost_affine, barrier]

Then each comparison on each measure is a primary row, and val bpb is exploratory in that report
(`measure_pairs`, `measures`; `pairs` holds the comparisons on the tested metric alone). Its
`pairs.settings` (the compose settings the study declares) are read too (`compose_settings`).
A study that adapts its models to held-out tokens (`adapt:`, sweeps/new_tokens.yaml) declares its
comparisons on the adaptation measures the same way (read/adapt.py PRIMARY_MEASURES), and its
`adapt:` settings are read (`adapt_settings`).

Where a report's declaration comes from, first match wins:
1. `primary=A:B[,C:D]` on the command (a study without a file, e.g. `run -m name=dynamics ...`);
2. `study=FILE.yaml`: that file's `primary` (a study file kept outside sweeps/);
3. sweeps/<sweep>.yaml of every study the jobs ran in (results.json `sweep`), their lists joined;
4. none: every row is exploratory, and the report says how to declare one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..errors import AnalysisError
from .adapt import PRIMARY_MEASURES as ADAPT_MEASURES
from .compose import PRIMARY_MEASURES

PACKAGE_DIR = Path(__file__).resolve().parents[2]


def _sweeps_dir() -> Path:
    """sweeps/ as fixedcode_study/config.py finds it (SWEEPS_DIR): inside the package in a wheel,
    else at the top of the checkout. Not imported from config.py, which pulls in omegaconf: the
    analysis runs without the training stack (tests/test_layout.py); a test checks the two agree."""
    candidates = (PACKAGE_DIR / "sweeps", PACKAGE_DIR.parent / "sweeps")
    return next((c for c in candidates if (c / "main.yaml").is_file()), candidates[-1])


SWEEPS_DIR = _sweeps_dir()
KEY, QUESTION, COMPARISONS, MEASURES = "primary", "question", "comparisons", "measures"
PAIRS, SETTINGS = "pairs", "settings"   # the compositions a study declares (composition/declared.py checks the block)
ADAPT = "adapt"                         # the adaptation settings a study declares (studies/study.py checks the block)
# "a - b" or "a − b": a minus sign with a space on each side (labels hold '-' only inside words or '=')
SEPARATOR = re.compile(r"\s+[-−]\s+")


@dataclass(frozen=True)
class Declared:
    """The primary family of one report and where it was declared."""
    pairs: tuple[tuple[str, str], ...] = ()
    questions: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()          # "sweeps/main.yaml", "primary=", "study=FILE"
    undeclared: tuple[str, ...] = ()       # studies read whose file declares nothing (or has no file)
    measure_pairs: tuple[tuple[str, str], ...] = ()   # comparisons declared on the composition measures
    measures: tuple[str, ...] = ()                     # ... those measures
    compose_settings: dict | None = None               # the compose settings a study's `pairs:` declares
    adapt_settings: dict | None = None                 # the adaptation settings a study's `adapt:` declares

    @property
    def any(self) -> bool:
        return bool(self.pairs or self.measure_pairs)

    @property
    def count(self) -> int:
        """How many comparisons are declared (on the tested metric and on the composition measures)."""
        return len(self.pairs) + len(self.measure_pairs)

    @property
    def question(self) -> str:
        return " ".join(self.questions)


@dataclass(frozen=True)
class StudyFile:
    name: str
    path: Path
    question: str = ""
    pairs: tuple[tuple[str, str], ...] = field(default_factory=tuple)           # on the tested metric
    measure_pairs: tuple[tuple[str, str], ...] = field(default_factory=tuple)   # on `measures`
    measures: tuple[str, ...] = field(default_factory=tuple)
    compose_settings: dict | None = None
    adapt_settings: dict | None = None

    @property
    def declares(self) -> bool:
        return bool(self.pairs or self.measure_pairs)


def parse_comparison(text, where: str) -> tuple[str, str]:
    """'binary16 - learned' -> ('binary16', 'learned'); a bad entry is one line naming where it is."""
    parts = SEPARATOR.split(str(text).strip()) if isinstance(text, str) else []
    if len(parts) != 2 or not all(p.strip() for p in parts) or parts[0].strip() == parts[1].strip():
        raise AnalysisError(f"{where}: {text!r} is not a comparison; write 'A - B' (arm A minus arm B, "
                            "two different variant labels or input names, ' - ' with spaces)")
    return parts[0].strip(), parts[1].strip()


def read_study_file(path: Path) -> StudyFile:
    """A study file's primary declaration (empty when it has none)."""
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise AnalysisError(f"study file {path}: unreadable ({type(exc).__name__})") from exc
    name = Path(path).stem
    settings = compose_settings(raw, Path(path).name)
    adapting = adapt_settings(raw, Path(path).name)
    block = (raw or {}).get(KEY) if isinstance(raw, dict) else None
    if block is None:
        return StudyFile(name, Path(path), compose_settings=settings, adapt_settings=adapting)
    where = f"{Path(path).name}:{KEY}"
    if not isinstance(block, dict) or not isinstance(block.get(COMPARISONS), list) or not block[COMPARISONS]:
        raise AnalysisError(f"{where}: expected {{{QUESTION}: ..., {COMPARISONS}: [A - B, ...]}} with at least one "
                            "comparison; see sweeps/README.md")
    unknown = sorted(set(block) - {QUESTION, COMPARISONS, MEASURES})
    if unknown:
        raise AnalysisError(f"{where}: unknown key {unknown[0]!r}; only {QUESTION}, {COMPARISONS} and {MEASURES}")
    pairs = tuple(parse_comparison(c, f"{where}.{COMPARISONS}[{i}]") for i, c in enumerate(block[COMPARISONS]))
    if len(set(pairs)) != len(pairs):
        raise AnalysisError(f"{where}.{COMPARISONS}: a comparison is listed twice")
    question = " ".join(str(block.get(QUESTION) or "").split())
    if MEASURES not in block:
        return StudyFile(name, Path(path), question, pairs, compose_settings=settings, adapt_settings=adapting)
    measures = parse_measures(block[MEASURES], f"{where}.{MEASURES}")
    if measures[0] in PRIMARY_MEASURES and settings is None:
        raise AnalysisError(f"{where}.{MEASURES}: the composition measures need the pairs the study composes; "
                            f"declare them in `{PAIRS}:` (sweeps/README.md)")
    if measures[0] in ADAPT_MEASURES and adapting is None:
        raise AnalysisError(f"{where}.{MEASURES}: the adaptation measures need the settings the study adapts its "
                            f"jobs with; declare them in `{ADAPT}:` (sweeps/README.md)")
    return StudyFile(name, Path(path), question, measure_pairs=pairs, measures=measures, compose_settings=settings,
                     adapt_settings=adapting)


def parse_measures(value, where: str) -> tuple[str, ...]:
    """`measures: [ensemble_gain, ...]`: composition measures a comparison may be declared primary on,
    or adaptation measures (`[adapt_heldout_loss, ...]`), one kind per study."""
    known = f"{', '.join(PRIMARY_MEASURES)}; or the adaptation measures {', '.join(ADAPT_MEASURES)}"
    if not isinstance(value, list) or not value or not all(isinstance(m, str) for m in value):
        raise AnalysisError(f"{where}: expected a list of composition measures ({known})")
    unknown = [m for m in value if m not in PRIMARY_MEASURES + ADAPT_MEASURES]
    if unknown:
        raise AnalysisError(f"{where}: {unknown[0]!r} is not a composition or adaptation measure; use {known}")
    if len({m in ADAPT_MEASURES for m in value}) > 1:
        raise AnalysisError(f"{where}: composition and adaptation measures are declared apart (one kind per study)")
    if len(set(value)) != len(value):
        raise AnalysisError(f"{where}: a measure is listed twice")
    return tuple(value)


def compose_settings(raw, file_name: str) -> dict | None:
    """The `pairs.settings` mapping a study file declares ({} for none given); None without `pairs:`.
    composition/declared.py checks the block when the study loads; here it is only read."""
    block = raw.get(PAIRS) if isinstance(raw, dict) else None
    if block is None:
        return None
    settings = block.get(SETTINGS) if isinstance(block, dict) else None
    if settings is not None and not isinstance(settings, dict):
        raise AnalysisError(f"{file_name}:{PAIRS}.{SETTINGS}: expected a mapping of compose settings")
    return dict(settings or {})


def adapt_settings(raw, file_name: str) -> dict | None:
    """The `adapt:` mapping a study file declares; None without one. studies/study.py checks the block when
    the study loads; here it is only read."""
    block = raw.get(ADAPT) if isinstance(raw, dict) else None
    if block is None:
        return None
    if not isinstance(block, dict):
        raise AnalysisError(f"{file_name}:{ADAPT}: expected a mapping of adaptation settings")
    return dict(block)


def study_file(name: str, sweeps_dir: Path = SWEEPS_DIR) -> StudyFile | None:
    path = sweeps_dir / f"{name}.yaml"
    return read_study_file(path) if path.is_file() else None


def shown_path(path: Path) -> str:
    """sweeps/main.yaml for a file of the workbench's own sweeps/, else the path as given."""
    path = Path(path)
    return f"sweeps/{path.name}" if path.resolve().parent == SWEEPS_DIR.resolve() else str(path)


def declared(sweeps: list[str], study: str | Path | None = None, pairs: tuple[tuple[str, str], ...] = (),
             sweeps_dir: Path = SWEEPS_DIR) -> Declared:
    """The report's primary family (see the module docstring for the order)."""
    if pairs:
        return Declared(tuple(pairs), (), ("the command's primary=",))
    if study is not None:
        if not Path(study).is_file():
            raise AnalysisError(f"study={study}: no such file (a study file such as sweeps/main.yaml)")
        found = read_study_file(Path(study))
        if not found.declares:
            raise AnalysisError(f"study={study}: the file declares no `{KEY}` comparisons; see sweeps/README.md")
        return Declared(found.pairs, (found.question,) if found.question else (), (f"study={study}",),
                        measure_pairs=found.measure_pairs, measures=found.measures,
                        compose_settings=found.compose_settings, adapt_settings=found.adapt_settings)
    joined, questions, sources, undeclared = [], [], [], []
    on_measures, measures, settings, adapting = [], [], None, None
    for name in dict.fromkeys(str(s) for s in sweeps):
        found = study_file(name, sweeps_dir)
        if found is None or not found.declares:
            undeclared.append(name)
            continue
        joined += [p for p in found.pairs if p not in joined]
        on_measures += [p for p in found.measure_pairs if p not in on_measures]
        measures += [m for m in found.measures if m not in measures]
        settings = settings if settings is not None else found.compose_settings
        adapting = adapting if adapting is not None else found.adapt_settings
        questions += [found.question] if found.question else []
        sources.append(shown_path(found.path))
    return Declared(tuple(joined), tuple(questions), tuple(sources), tuple(undeclared), tuple(on_measures),
                    tuple(measures), settings, adapting)


def every_declaration(sweeps_dir: Path = SWEEPS_DIR) -> list[StudyFile]:
    """Every study file of sweeps/ that declares a primary family on the tested metric: the report says
    where a row of its table is primary in another study (its verdict is decided in that study's family,
    not here). A family on the composition measures has no rows in another study's report."""
    found = (study_file(p.stem, sweeps_dir) for p in sorted(sweeps_dir.glob("*.yaml")))
    return [f for f in found if f is not None and f.pairs]

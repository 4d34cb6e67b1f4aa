"""Every command line the docs teach runs as written (issue 42, point 5).

test_cli_docs checks each documented command against the verbs' settings without running it; this
file runs them. The commands are helpers.docs's: README.md, docs/*.md, docs/reports/README.md,
sweeps/README.md and each command module's docstring. Each falls in one class (`classify`):

  synopsis   it has placeholders (DIR, PATH, <study>, [...], ..., a|b, ENTITY): a form, not a line to
             paste; test_cli_docs checks its verb and settings;
  name       a verb named in running text (`fixedcode analyze` alone in prose), not a command line;
  runs       run exactly as written;
  shrunk     the docs say it is long (a whole study, a benchmark): run with the stated tiny settings
             appended (SHRUNK);
  refused    it needs what a CPU machine without network lacks (a GPU, the Hub, a cluster): it must stop
             in one line, `error: ...`, with a non-zero exit and no traceback.

The sandbox is a copy of the checkout (what `git clone` gives, without .git) with ../shared beside it
as the docs assume, run from its root as the docs say. Its conf/ and sweeps/ differ in a few defaults
(SANDBOX_DEFAULTS: test_micro, the csv logger, 4,096 training tokens, 1% of the text held out, 2,048
probe tokens, 8 documents per evaluation task, 8,192 adaptation tokens in new_tokens' adapt:
settings), so `fixedcode run -m input=learned,binary16,gf2 seed=1,2,3` trains test-sized jobs into
the very directories the docs name (outputs/multirun/main/input=gf2,seed=1): appended overrides would
rename them. `fixedcode <verb>` runs as `python -m fixedcode_study <verb>` (the same command without
the installed script, README), with PYTHONPATH at the sandbox so that every process, sweep workers
included, runs the sandbox's copy. Each `python -m` line starts as a fork of one interpreter that has
imported the heavy libraries (tests/helpers/warm_start.py), not cold: for most lines the imports were
most of their time.

Commands run in stages (producers first: a command that trains or exports what a later one reads), in
document order inside a stage, each once however often the docs repeat it; each prints its seconds as
it ends (-s). The lines that read nothing another line makes (benchmarks, descriptions, dry runs, refusals)
run in a second sandbox from test_cli_docs_run_standalone.py, beside this file on the other xdist worker.
The full runs are in the slow tier; the classification checks are in the default suite.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers.docs import DOCS, MANUALS, ROOT, doc_commands, manual_commands

from fixedcode_study.studies.study import available_studies, load_study

SHARED_DATA = ROOT.parent / "shared" / "data"

# conf/ file -> {line prefix: the sandbox's line}: documented runs train, probe and evaluate test-sized
# jobs (the rest of each line, its comment, is kept)
SANDBOX_DEFAULTS = {
    "conf/config.yaml": {"  - model: cpu_tiny": "  - model: test_micro", "  - logger: wandb": "  - logger: csv",
                         "  tokens: 524288": "  tokens: 4096"},
    "conf/probe/default.yaml": {"tokens: 8192": "tokens: 2048"},
    "conf/eval/builtin.yaml": {"limit: null": "limit: 8"},
    "conf/data/shakespeare.yaml": {"val_fraction: 0.03": "val_fraction: 0.01"},
    "sweeps/new_tokens.yaml": {"  tokens: 131072": "  tokens: 8192", "  val_tokens: 32768": "  val_tokens: 4096"},
}

# Placeholders: a word or a value that stands for the reader's own (DIR, PATH, RUN_DIR..., ENTITY/PROJECT,
# N, A,B), and the doc's syntax for options and choices.
_CAPS = re.compile(r"(?<![\w.-])[A-Z][A-Z_]*(?:\.\.\.)?(?![\w.-])")
_SYNTAX = re.compile(r"<[^<>]*>|\[[^\]]*\]|\.\.\.|(?<![|])\|(?![|])|\bPATH\b")

# What the docs' long runs are cut to: the whole study's job list, composed and validated, without
# training it (the committed reports come from the full runs), or a benchmark's shortest measurement.
# A study is trained here only at the size of the studies later lines read (main, probe_arms: 9 jobs);
# every larger one is cut to its dry run by its job count, so a new study's documented line cannot
# start an 80-job run here. Its jobs are not trained, so `fixedcode compose study=composition` after
# `fixedcode sweep composition` names every pair as waiting.
RUN_AT_MOST_JOBS = 9
LARGE_STUDIES = sorted(name for name in available_studies() if load_study(name).jobs.get("cpu", 0) > RUN_AT_MOST_JOBS)
SHRUNK: list[tuple[str, list[str], str]] = [
    (rf"^fixedcode sweep ({'|'.join(LARGE_STUDIES)})\b(?!.*model=test_micro)(?!.*dry_run=true)",
     ["dry_run=true"], f"a whole study of more than {RUN_AT_MOST_JOBS} jobs"),
    (r"^fixedcode sweep main seed=1,2,3,4,5,6,7,8\b", ["dry_run=true"], "the committed study's 24 jobs"),
    (r"^fixedcode bench(?: |$)(?!.*state_only=true)", ["steps=2", "warmup=1", "memory_steps=1", "train.batch_size=1"],
     "a benchmark"),
    (r"^fixedcode bench-input\b", ["batch=1", "seq=128", "repeats=1"], "a benchmark at paper width"),
    (r"^fixedcode bench-output\b", ["batch=1", "seq=64", "repeats=1", "steps=2"], "a benchmark at paper width"),
    (r"^fixedcode compose a=", ["stitch_tokens=2048"], "an affine stitch trained on 131,072 tokens per layer"),
]

# What the sandbox has no way to do, and the line a user gets instead.
REFUSED: list[tuple[str, str]] = [
    (r"experiment=gpu_quick|^fixedcode sweep gpu_quick\b", "FineWeb-Edu from the Hub"),
    (r"\bhf=HuggingFaceTB/", "a model from the Hub"),
    (r"\bdevice=cuda\b", "a GPU"),
    (r"\bexperiment=paper_1p7b\b", "the paper's data mix from the Hub"),
    (r"model=paper_1p7b train\.batch_size=4 train\.seq_len=2048", "a GPU (the docs say so)"),
    (r"\bdata=paper_mix\b", "the paper's data mix from the Hub"),
    (r"\btrainer=ddp\b", "several GPUs"),
]

# lines that read ../shared/data, or the task folder the documented eval-tasks line makes from it
NEEDS_SHARED = re.compile(r"\.\./shared/data|--include_path tasks/")
# what a line that reads it through its config (data=gutenberg) says without it (data/corpus.py)
SHARED_REFUSAL = "no files match ['../shared/data/"

# The order producers come first in: 0 trains the studies later lines read, 1 derives from them
# (exports, probes, copies), 2 reads, 3 rewrites the sandbox's generated docs.
STAGES: list[tuple[int, str]] = [
    (0, r"^(python -m fixedcode_study\.run|fixedcode run|fixedcode sweep (main|probe_arms|controls .*model=test_micro))\b"),
    (1, r"^fixedcode (export|probe|eval-tasks)\b"),
    (3, r"^fixedcode regenerate\b"),
]


@dataclass
class DocCommand:
    command: str                       # as the docs write it (one logical line)
    where: list[str] = field(default_factory=list)   # file:line of every place it is written

    @property
    def canonical(self) -> str:
        """`fixedcode <verb>` for each spelling of the front door, without a trailing comment."""
        words = shlex.split(self.command, comments=True)
        line = shlex.join(words)
        return re.sub(r"^python -m fixedcode_study(?= |$)", "fixedcode", line)


def _collect() -> list[DocCommand]:
    """Every documented command once (the same line with another comment is the same command)."""
    found: dict[str, DocCommand] = {}
    places = [(command, f"{path.relative_to(ROOT)}:{number}") for path in DOCS for number, command in doc_commands(path)]
    places += [(command, f"{path.relative_to(ROOT)} docstring:{number}")
               for path in MANUALS for number, command in manual_commands(path)]
    for command, where in places:
        doc = DocCommand(command)
        found.setdefault(_key(doc), doc).where.append(where)
    return list(found.values())


def _key(doc: DocCommand) -> str:
    try:
        return doc.canonical
    except ValueError:  # prose with an unbalanced quote: a synopsis, kept as written
        return doc.command


def _is_synopsis(command: str) -> bool:
    body = command.split(" #")[0]
    try:
        words = shlex.split(body)
    except ValueError:
        return True  # prose with an unbalanced quote
    values = [w.split("=", 1)[-1] for w in words]
    return bool(_SYNTAX.search(body)) or any(_CAPS.search(v) and not re.search(r"[ :]", v) for v in values)


def classify(doc: DocCommand) -> tuple[str, str]:
    """(class, why) for one documented command; see the module docstring."""
    command = doc.command
    if _is_synopsis(command):
        return "synopsis", "placeholders"
    line = doc.canonical
    words = shlex.split(line, comments=True)
    # a verb alone inside running text names the command; in a code block it is a command line
    verb_words = 3 if words[:3] in (["python", "-m", "fixedcode_study.run"], ["python", "-m", "analysis"]) else 2
    if len(words) <= verb_words and words[-1] not in ("--help", "-h") and not _in_code_block(doc):
        return "name", "a verb named in prose"
    if words[:2] == ["fixedcode", "lm-eval"] and "--tasks" not in words and "ls" not in words:
        return "synopsis", "lm-eval flags named in prose"
    # describe and a dry run compose the configs on the meta device: they need no GPU and no data
    if not (words[1:2] == ["describe"] or "dry_run=true" in words):
        for pattern, needs in REFUSED:
            if re.search(pattern, line):
                return "refused", needs
    for pattern, _extra, why in SHRUNK:
        if re.search(pattern, line):
            return "shrunk", why
    return "runs", ""


@functools.lru_cache(maxsize=None)
def _code_block_lines(path: Path) -> frozenset[int]:
    """The line numbers inside a markdown file's fenced code blocks."""
    inside, lines = False, set()
    for number, text in enumerate(path.read_text().splitlines(), 1):
        if text.lstrip().startswith("```"):
            inside = not inside
        elif inside:
            lines.add(number)
    return frozenset(lines)


def _in_code_block(doc: DocCommand) -> bool:
    """Written as a command line somewhere: in a markdown code block, or as a manual's example line
    (a docstring line that starts with the command, not prose that names it)."""
    for place in doc.where:
        name, _, number = place.rpartition(":")
        if name.endswith(" docstring"):
            module = name.removesuffix(" docstring").removesuffix(".py").replace("/", ".")
            text = (__import__(module, fromlist=["_"]).__doc__ or "").splitlines()[int(number) - 1].strip()
            if text.startswith(doc.command.split()[0]) and not text.startswith(f"`{doc.command}`"):
                return True
            continue
        if int(number) in _code_block_lines(ROOT / name):
            return True
    return False


def stage(doc: DocCommand) -> int:
    return next((s for s, pattern in STAGES if re.search(pattern, doc.canonical)), 2)


# Lines that read nothing another documented line makes (benchmarks, descriptions, dry runs, refusals) run
# in a sandbox of their own, from test_cli_docs_run_standalone.py: a second file, so that xdist runs the two
# halves on its two workers at once (measured beside each other: about 650 s each).
STANDALONE = re.compile(r"^fixedcode (bench|bench-input|bench-output|describe)\b|\bdry_run=true\b|--help$")


def standalone(doc: DocCommand) -> bool:
    kind = classify(doc)[0]
    return kind == "refused" or bool(STANDALONE.search(shlex.join(argv(doc, kind)[2:]).replace("fixedcode_study", "fixedcode", 1)))


def argv(doc: DocCommand, kind: str) -> list[str]:
    """The process to start: `fixedcode` as `python -m fixedcode_study`, `python` as this interpreter,
    plus the shrinking settings for a long run."""
    words = shlex.split(doc.canonical, comments=True)
    if words[0] == "fixedcode":
        words = [sys.executable, "-m", "fixedcode_study", *words[1:]]
    elif words[0] == "python":
        words = [sys.executable, *words[1:]]
    if kind == "shrunk":  # the shrinking settings replace the line's own values of those keys
        extra = next(e for p, e, _ in SHRUNK if re.search(p, doc.canonical))
        keys = {e.split("=", 1)[0] for e in extra}
        words = [w for w in words if w.split("=", 1)[0] not in keys] + extra
    return words


def one_line_refusal(returncode: int, output: str) -> str | None:
    """None when a refused command stopped as it should: non-zero exit, one `error:` line, no traceback."""
    if returncode == 0:
        return "exit 0: it did not stop"
    if returncode < 0 or returncode in (124, 137):
        return f"exit {returncode}: killed or timed out, not refused"
    if "Traceback (most recent call last)" in output:
        return "a traceback on the terminal"
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    if len(errors) != 1:
        return f"{len(errors)} `error:` lines, not one"
    return None


def make_sandbox(base: Path) -> Path:
    """A copy of the checkout as a clone has it (no .git, no outputs), ../shared beside it, tiny defaults."""
    checkout = base / "checkout"
    ignore = shutil.ignore_patterns(".git", "outputs", "build", "dist", "*.egg-info", "__pycache__",
                                    ".pytest_cache", "wandb", "multirun", "exports", "reports")
    shutil.copytree(ROOT, checkout, ignore=ignore, symlinks=True)
    # `reports` is ignored above only at the top; docs/reports is the committed one: copy it back
    shutil.copytree(ROOT / "docs" / "reports", checkout / "docs" / "reports", dirs_exist_ok=True)
    if SHARED_DATA.is_dir():
        (base / "shared").mkdir()
        (base / "shared" / "data").symlink_to(SHARED_DATA)
    for name, changes in SANDBOX_DEFAULTS.items():
        config = checkout / name
        lines = config.read_text().splitlines(keepends=True)
        for prefix, replacement in changes.items():
            hits = [i for i, line in enumerate(lines) if line.startswith(prefix + " ") or line.rstrip() == prefix]
            assert len(hits) == 1, f"{name}: {prefix!r} found {len(hits)} times; update SANDBOX_DEFAULTS"
            lines[hits[0]] = replacement + lines[hits[0]][len(prefix):]
        config.write_text("".join(lines))
    return checkout


def sandbox_env(checkout: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("FIXEDCODE_OUT", None)  # out_root is ./outputs, where the docs look
    env["PYTHONPATH"] = str(checkout)
    env["COLUMNS"] = "120"
    return env


COMMANDS = _collect()


def test_every_documented_command_has_a_class():
    """Each command line is run, refused, shrunk or recognised as a form; a new command line in the docs
    lands in one of them by the rules above, and the rules leave nothing runnable unrun."""
    kinds = {doc.command: classify(doc)[0] for doc in COMMANDS}
    assert set(kinds.values()) <= {"synopsis", "name", "runs", "shrunk", "refused"}
    # the guide's first command and the README's test command's neighbours are run as written
    assert kinds["python -m fixedcode_study.run -m input=learned,binary16,gf2 seed=1,2,3"] == "runs"
    assert sum(k in ("runs", "shrunk") for k in kinds.values()) >= 40, kinds


@pytest.mark.parametrize("command,kind", [
    ("fixedcode export checkpoint=DIR out=DIR", "synopsis"),
    ("fixedcode analyze wandb=ENTITY/PROJECT", "synopsis"),
    ("fixedcode sweep <study> [dry_run=true]", "synopsis"),
    ("fixedcode evaluate checkpoint=PATH eval=builtin", "synopsis"),
    ('fixedcode generate checkpoint=outputs/multirun/main/input=gf2,seed=1 prompt="KING HENRY:" n=3', "runs"),
    ("fixedcode sweep compute_ladder 'train.tokens=524288,2097152'", "shrunk"),
    ("fixedcode sweep controls seed=1 model=test_micro logger=csv train.tokens=4096", "runs"),
    ("fixedcode sweep input_continuum", "shrunk"),
    ("fixedcode compose a=outputs/multirun/main/input=gf2,seed=1 b=outputs/multirun/main/input=gf2,seed=2", "shrunk"),
    ("fixedcode compose study=composition", "runs"),
    ("fixedcode sweep composition", "shrunk"),
    ("fixedcode sweep main", "runs"),
    ("fixedcode sweep tuned_lr dry_run=true", "runs"),
    ("fixedcode bench device=cuda settings=all", "refused"),
    ("fixedcode describe experiment=paper_1p7b", "runs"),
    ("fixedcode run experiment=paper_1p7b input=binary16", "refused"),
])
def test_the_classes_read_the_docs_spelling(command, kind):
    assert classify(DocCommand(command, ["fixedcode_study/cli/describe.py docstring:4"]))[0] == kind


def test_a_refusal_is_one_line_without_a_traceback():
    assert one_line_refusal(2, "error: data.dataset.path: cannot load ...") is None
    assert one_line_refusal(0, "") == "exit 0: it did not stop"
    assert one_line_refusal(1, "Traceback (most recent call last):\n  ...\nValueError: x") == \
        "a traceback on the terminal"
    assert one_line_refusal(-9, "") == "exit -9: killed or timed out, not refused"


WARM_START = ROOT / "tests" / "helpers" / "warm_start.py"
TIMEOUT = 900


class WarmStart:
    """A running tests/helpers/warm_start.py in the sandbox: each `python -m` line runs in a fork of one
    interpreter that has imported the heavy libraries, not in a cold one (most of a quick line's time)."""

    def __init__(self, checkout: Path, env: dict[str, str]):
        self.logs = checkout.parent / "logs"
        self.logs.mkdir(exist_ok=True)
        self.server = subprocess.Popen([sys.executable, str(WARM_START)], cwd=checkout, env=env, text=True,
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.server.stdout.readline() == "ready\n", "the warm-start server did not start"

    def run(self, words: list[str]) -> tuple[int, str]:
        log = self.logs / f"{len(list(self.logs.iterdir()))}.log"
        self.server.stdin.write(json.dumps({"argv": words, "log": str(log), "timeout": TIMEOUT}) + "\n")
        self.server.stdin.flush()
        return int(self.server.stdout.readline()), log.read_text()

    def close(self) -> None:
        self.server.stdin.close()
        self.server.wait(timeout=60)


def _run(doc: DocCommand, kind: str, warm: WarmStart) -> tuple[int, str, float]:
    """Every documented line is `python -m ...` once `fixedcode` is spelled out (helpers/docs.STARTS)."""
    start = time.perf_counter()
    code, output = warm.run(argv(doc, kind)[2:])
    return code, output, time.perf_counter() - start


def failures_of(docs: list[DocCommand], checkout: Path, env: dict[str, str]) -> list[str]:
    """Run each command in its stage order; what went wrong, one entry per failing command."""
    failed, started = [], set()
    warm = WarmStart(checkout, env)
    for doc in sorted(docs, key=stage):  # sorted is stable: document order within a stage
        kind, why = classify(doc)
        if kind in ("synopsis", "name"):
            continue
        if NEEDS_SHARED.search(doc.command) and not SHARED_DATA.is_dir():
            continue  # the shared data is optional (conftest); the command reads it
        if tuple(argv(doc, kind)) in started:  # shrunk to a process already run (steps=8 and steps=12)
            continue
        started.add(tuple(argv(doc, kind)))
        code, output, seconds = _run(doc, kind, warm)
        if code != 0 and not SHARED_DATA.is_dir() and SHARED_REFUSAL in output:
            # it read the shared data through its config (a study whose jobs use data=gutenberg):
            # optional here, as for the lines that name it; tests/studies/test_sweeps.py skips alike
            print(f"{seconds:6.1f} s  skipped: no ../shared/data here  {doc.canonical}", flush=True)
            continue
        # each line as it ends (-s or a failure shows them): a run cut short still shows where the time went
        print(f"{seconds:6.1f} s  exit {code:3d}  {kind:8s} {doc.canonical}", flush=True)
        if kind == "refused":
            problem = one_line_refusal(code, output)
        else:
            problem = None if code == 0 and "Traceback (most recent call last)" not in output else \
                f"exit {code}" + (" with a traceback" if "Traceback (most recent" in output else "")
        if problem:
            failed.append(f"{doc.canonical!r} ({', '.join(doc.where)}; {kind}{': ' + why if why else ''}): "
                          f"{problem}\n    " + "\n    ".join(output.strip().splitlines()[-12:]))
    warm.close()
    return failed


def check_documented_commands(docs: list[DocCommand], base: Path) -> None:
    checkout = make_sandbox(base)
    failed = failures_of(docs, checkout, sandbox_env(checkout))
    assert not failed, f"{len(failed)} documented commands failed:\n" + "\n".join(failed)


def test_the_two_halves_are_every_documented_command():
    runnable = [doc for doc in COMMANDS if classify(doc)[0] not in ("synopsis", "name")]
    halves = [[doc for doc in runnable if standalone(doc) == alone] for alone in (False, True)]
    assert all(len(half) >= 20 for half in halves), [len(half) for half in halves]
    # what a later line reads (a trained study, an export, a probe) is made in the same sandbox
    makers = [doc for doc in runnable if stage(doc) in (0, 1) and classify(doc)[0] != "refused"
              and "dry_run=true" not in argv(doc, classify(doc)[0])]
    assert makers and not any(standalone(doc) for doc in makers)


@pytest.mark.slow
def test_every_documented_command_runs_as_written(tmp_path):
    """The lines that train, and every line that reads what they make (the other half: the next file)."""
    check_documented_commands([doc for doc in COMMANDS if not standalone(doc)], tmp_path)


@pytest.mark.slow
def test_a_planted_broken_command_fails_the_runner(tmp_path):
    """The runner is not blind: a documented line that does not work, or a refusal that prints a
    traceback, is reported."""
    checkout = make_sandbox(tmp_path)
    where = ["fixedcode_study/cli/describe.py docstring:4"]
    planted = [DocCommand("fixedcode describe model=no_such_model", where),
               DocCommand("fixedcode generate checkpoint=outputs/multirun/nothing prompt=x", where),
               DocCommand("fixedcode describe", where)]
    failed = failures_of(planted, checkout, sandbox_env(checkout))
    assert len(failed) == 2 and "no_such_model" in failed[0] and "nothing" in failed[1], failed

"""Official lm-eval tasks read from a local JSON Lines mirror instead of the Hugging Face Hub.

Each mirror task is a generated YAML that `include:`s the official task file shipped with
lm-eval (so prompt, target, choices, metrics and version are the official ones) and overrides
only where the documents come from:

    include: <site-packages>/lm_eval/tasks/hellaswag/hellaswag.yaml
    dataset_path: json
    dataset_name: null
    dataset_kwargs: {data_files: {validation: /abs/mirror/hellaswag/validation.jsonl}}
    training_split: null          # only where the mirror has no training split

Expected files under eval.data_dir (JSON Lines, one document per line, fields as in the HF dataset
the official task reads):

  task            files                                  fields (HF dataset)
  hellaswag       hellaswag/validation.jsonl             activity_label, ctx_a, ctx_b, endings, label (Rowan/hellaswag)
  piqa            piqa/validation.jsonl                  goal, sol1, sol2, label (baber/piqa)
  lambada_openai  lambada_openai/test.jsonl              text (EleutherAI/lambada_openai)
  arc_easy        arc_easy/{train,validation,test}.jsonl id, question, choices{text,label}, answerKey (allenai/ai2_arc)
  commonsense_qa  commonsense_qa/validation.jsonl        question, choices{label,text}, answerKey (tau/commonsense_qa)
  wikitext        wikitext/test.jsonl                    page (EleutherAI/wikitext_document_level, wikitext-2-raw-v1)
  mmlu            mmlu/<subject>/{test,dev}.jsonl        question, subject, choices (4), answer (cais/mmlu), 57 subjects

Splits a task does not evaluate on are optional (arc_easy/train.jsonl, validation.jsonl). The
generated files hold absolute paths: the HF `json` builder resolves data_files against the working
directory, not the YAML's folder.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import lm_eval

from ...errors import ConfigError
from .yamlio import write_task_yaml

# lm-eval's own task YAMLs, found without importing lm_eval.tasks (its TaskManager loads datasets and
# pandas, seconds that `fixedcode eval-tasks --help` need not pay)
OFFICIAL_TASKS_DIR = Path(lm_eval.__file__).resolve().parent / "tasks"


@dataclass(frozen=True)
class MirrorSpec:
    official_yaml: str  # relative to lm_eval/tasks
    files: dict[str, str]  # split -> file relative to the task folder of the mirror
    required: tuple[str, ...]  # splits the task evaluates on (must exist)


# Official configs such as hellaswag, piqa, commonsense_qa and wikitext declare a training (and
# wikitext a validation) split the mirror lacks; zero-shot never reads it, but the loader does
# (KeyError: 'train') unless it is unset, so write_mirror_task unsets every split without a file.
MIRRORS: dict[str, MirrorSpec] = {
    "hellaswag": MirrorSpec("hellaswag/hellaswag.yaml", {"validation": "validation.jsonl"}, ("validation",)),
    "piqa": MirrorSpec("piqa/piqa.yaml", {"validation": "validation.jsonl"}, ("validation",)),
    "lambada_openai": MirrorSpec("lambada/lambada_openai.yaml", {"test": "test.jsonl"}, ("test",)),
    "arc_easy": MirrorSpec("arc/arc_easy.yaml", {"train": "train.jsonl", "validation": "validation.jsonl",
                                                 "test": "test.jsonl"}, ("test",)),
    "commonsense_qa": MirrorSpec("commonsense_qa/default.yaml", {"validation": "validation.jsonl"}, ("validation",)),
    "wikitext": MirrorSpec("wikitext/wikitext.yaml", {"test": "test.jsonl"}, ("test",)),
}
MMLU_DIR = "mmlu/default"  # official zero-shot MMLU: 57 subject tasks + 4 category groups + the group
MIRROR_TASKS = (*MIRRORS, "mmlu")


def official_yaml(relative: str) -> Path:
    path = OFFICIAL_TASKS_DIR / relative
    if not path.exists():
        raise ConfigError("eval.tasks", f"lm-eval {lm_eval.__version__} has no {relative}",
                          "install the lm-eval version this project pins (0.4.x)")
    return path


def _data_files(task_dir: Path, files: dict[str, str], required: tuple[str, ...], task: str) -> dict[str, str]:
    found = {split: str((task_dir / name).resolve()) for split, name in files.items() if (task_dir / name).exists()}
    missing = [files[s] for s in required if s not in found]
    if missing:
        raise ConfigError("eval.data_dir", f"task {task} needs {task_dir / missing[0]} (missing)",
                          f"put {', '.join(files.values())} under {task_dir} or drop {task} from eval.tasks")
    return found


def write_mirror_task(task: str, data_dir: Path, out_dir: Path) -> list[Path]:
    """Write the YAML(s) that run official `task` on the mirror under data_dir; returns them."""
    if task == "mmlu":
        return _write_mmlu(data_dir, out_dir)
    spec = MIRRORS[task]
    files = _data_files(data_dir / task, spec.files, spec.required, task)
    # A split the mirror lacks is unset, so the loader never asks the json builder for it.
    splits = {key: None for key, split in (("training_split", "train"), ("validation_split", "validation"))
              if split not in files}
    config = {
        "include": str(official_yaml(spec.official_yaml)),
        "dataset_path": "json",
        "dataset_name": None,
        "dataset_kwargs": {"data_files": files},
        **splits,
    }
    return [write_task_yaml(out_dir / f"{task}.yaml", config)]


def _write_mmlu(data_dir: Path, out_dir: Path) -> list[Path]:
    official = official_yaml(MMLU_DIR + "/_mmlu.yaml").parent
    target = out_dir / "mmlu"
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for group_file in sorted(official.glob("_mmlu*.yaml")):  # the group and its four categories, verbatim
        shutil.copyfile(group_file, target / group_file.name)
        written.append(target / group_file.name)
    for task_file in sorted(official.glob("mmlu_*.yaml")):
        subject = task_file.stem.removeprefix("mmlu_")
        files = _data_files(data_dir / "mmlu" / subject, {"test": "test.jsonl", "dev": "dev.jsonl"},
                            ("test",), f"mmlu ({subject})")
        config = {"include": str(task_file), "dataset_path": "json", "dataset_name": None,
                  "dataset_kwargs": {"data_files": files}}
        if "dev" not in files:
            config["fewshot_split"] = None
        written.append(write_task_yaml(target / task_file.name, config))
    return written

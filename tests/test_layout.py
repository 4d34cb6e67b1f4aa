"""The package layout keeps its promises: one owner per fact, no import cycles, thin entry points.

These read the source (ast), so they fail on the regression itself, not on a symptom of it.
"""

from __future__ import annotations

import ast
import importlib
import tomllib
from pathlib import Path

import pytest
import torch

from fixedcode_study.accounting import optimizer_group, optimizer_groups, parameter_groups
from fixedcode_study.build import build_model
from fixedcode_study.config import available, compose

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "fixedcode_study"


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path, module_level_only: bool) -> set[str]:
    """Package modules that `name` imports (relative imports resolved)."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    nodes = tree.body if module_level_only else list(ast.walk(tree))
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            candidates = [target] + [f"{target}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            continue
        found |= {c for c in candidates if c in MODULES and c != name}
    return found


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_module_imports(module):
    importlib.import_module(module)


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def _parents(name: str) -> set[str]:
    """Importing a.b.c runs a/__init__ and a/b/__init__ first: those edges are not design cycles."""
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


@pytest.mark.parametrize("module_level_only", [True, False], ids=["import-time", "including-lazy-imports"])
def test_no_import_cycle(module_level_only):
    graph = {name: _imports(name, path, module_level_only) - _parents(name) for name, path in MODULES.items()}
    assert _cycle(graph) is None, f"import cycle: {' -> '.join(_cycle(graph))}"


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """String constants of a module that are not docstrings (f-string parts included)."""
    tree = ast.parse(path.read_text())
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings]


# Every file name of a job directory is spelled by record/jobdir.py alone, a checkpoint folder's by
# record/checkpoint.py, a prepared data folder's by data/layout.py: nothing else can drift from them.
JOB_FILES = ("results.json", "metrics.csv", "config.yaml", "gf2_matrix.json", ".lock", "last.ckpt",
             "model.safetensors", "checkpoints", "metrics.unfinished", "run.log", "samples.json", "external.json")
CHECKPOINT_FILES = ("config.json", "tokenizer.json")
DATA_FILES = ("train.bin", "val.bin", "token_bytes.npy", "meta.json", "val_docs.jsonl", "manifest.json", "plan.json")
OWNERS = {"fixedcode_study.record.jobdir": JOB_FILES,
          "fixedcode_study.record.checkpoint": ("model.safetensors", *CHECKPOINT_FILES),
          "fixedcode_study.data.layout": (*DATA_FILES, "tokenizer.json")}
# lm-eval's own task files and HF's tokenizer folders also say config.json / tokenizer.json.
# (The benchmark also writes a scratch tokenizer file next to the checkpoints it measures.)
# (An exported Hugging Face folder's model card names that folder's own config.json.)
ALSO_SPELLED_BY = {"config.json": {"fixedcode_study.systems.bench", "fixedcode_study.data.tokenizer",
                                   "fixedcode_study.hub.card"},
                   "tokenizer.json": {"fixedcode_study.data.tokenizer", "fixedcode_study.systems.bench"},
                   # conf/config.yaml, Hydra's root config, shares the job config's file name
                   "config.yaml": {"fixedcode_study.config"}}


def _spells(text: str, file_name: str) -> bool:
    if "." in file_name:  # results.json, .lock, ...: any mention
        return file_name in text
    return text == file_name or f"{file_name}/" in text or f"/{file_name}" in text  # a path component


def test_file_names_are_spelled_by_their_layout_module_only():
    offenders = []
    for name, path in MODULES.items():
        allowed = set(OWNERS.get(name, ())) | {f for f, mods in ALSO_SPELLED_BY.items() if name in mods}
        for line, text in _code_strings(path):
            offenders += [f"{name}:{line} {text!r}" for f in (*JOB_FILES, *CHECKPOINT_FILES, *DATA_FILES)
                          if _spells(text, f) and f not in allowed]
    assert not offenders, offenders


def test_one_atomic_writer():
    """Renames into place and temporary files happen in record/atomic.py (and jobdir's set-aside) only.

    (A scratch folder from tempfile.mkdtemp, e.g. the benchmark's, is not a write into the record.)"""
    allowed = {"fixedcode_study.record.atomic": {"replace", "rename", "mkstemp"},
               "fixedcode_study.record.jobdir": {"replace"}}
    offenders = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id in ("os", "tempfile")
                    and node.func.attr in ("replace", "rename", "mkstemp")
                    and node.func.attr not in allowed.get(name, set())):
                offenders.append(f"{name}:{node.lineno} {node.func.value.id}.{node.func.attr}")
    assert not offenders, offenders


@pytest.mark.parametrize("function", ["flops_per_token", "matmul_params", "block_params", "body_params",
                                      "module_group", "parameter_groups", "optimizer_group", "optimizer_groups",
                                      "adamw_state_bytes"])
def test_accounting_facts_have_one_definition(function):
    owners = [name for name, path in MODULES.items()
              for node in ast.walk(ast.parse(path.read_text()))
              if isinstance(node, ast.FunctionDef) and node.name == function]
    assert owners == ["fixedcode_study.accounting"], owners


def test_only_config_composes_hydra_configs():
    """hydra.compose / initialize_config_dir appear in config.py alone (run.py's @hydra.main aside)."""
    offenders = [name for name, path in MODULES.items() if name != "fixedcode_study.config"
                 and ("initialize_config_dir" in path.read_text() or "from hydra import compose" in path.read_text())]
    assert not offenders, offenders


@pytest.mark.parametrize("input_name", available("input"))
def test_parameter_and_optimizer_groups_cover_every_parameter_once(input_name):
    cfg = compose(["model=test_micro", f"input={input_name}"])
    with torch.device("meta"):
        model = build_model(cfg.model, cfg.input)
    counts = parameter_groups(model)
    assert counts["input_total"] + counts["body"] + counts["head"] == counts["total"]
    groups = optimizer_groups(model, cfg.optim)
    seen = [id(p) for g in groups for p in g["params"]]
    trainable = [id(p) for p in model.parameters() if p.requires_grad]
    assert len(seen) == len(set(seen)) and sorted(seen) == sorted(trainable)
    assert sum(p.numel() for g in groups for p in g["params"]) == counts["trainable"]
    by_name = {g["name"]: g for g in groups}
    assert by_name["head"]["params"] == [model.head.weight]
    assert ("input" in by_name) == (counts["input_trainable"] > 0)
    # norms never decay; every other body tensor is a matrix that does
    assert all(p.dim() == 1 for p in by_name["no_decay"]["params"])
    assert optimizer_group("blocks.0.attn_norm.weight", model.blocks[0].attn_norm.weight) == "no_decay"


def test_optimizer_groups_survive_wrapping_and_flattening():
    """FSDP (use_orig_params) renames parameters and flattens them to 1-D before the optimizer is
    built; the groups decided on the unwrapped model must still apply (matrices decay, norms don't)."""
    from torch import nn

    from fixedcode_study.accounting import optimizer_group_names, unwrapped_name

    cfg = compose(["model=test_micro", "input=learned"])
    model = build_model(cfg.model, cfg.input)
    before = {g["name"]: sorted(p.numel() for p in g["params"]) for g in optimizer_groups(model, cfg.optim)}
    names = optimizer_group_names(model)

    class Wrapper(nn.Module):  # what FSDP / activation checkpointing insert into the module tree
        def __init__(self, inner: nn.Module):
            super().__init__()
            self._fsdp_wrapped_module = inner

    for i, block in enumerate(model.blocks):
        for module in block.modules():
            for pname, p in list(module.named_parameters(recurse=False)):
                setattr(module, pname, nn.Parameter(p.detach().reshape(-1)))  # flattened, 1-D
        model.blocks[i] = Wrapper(block)
    assert unwrapped_name("blocks.0._fsdp_wrapped_module.attn.qkv.weight") == "blocks.0.attn.qkv.weight"
    after = {g["name"]: sorted(p.numel() for p in g["params"]) for g in optimizer_groups(model, cfg.optim, names)}
    assert after == before
    naive = {g["name"]: len(g["params"]) for g in optimizer_groups(model, cfg.optim)}
    assert "decay" not in naive  # without the names taken before wrapping, every matrix would lose its decay


def test_every_declared_script_resolves_to_a_callable():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert {"fixedcode-run", "fixedcode-describe", "fixedcode-sweep", "fixedcode-evaluate", "fixedcode-bench",
            "fixedcode-pretokenize", "fixedcode-analysis"} <= set(scripts)
    for script, target in scripts.items():
        module, attr = target.split(":")
        assert callable(getattr(importlib.import_module(module), attr)), script


def test_each_stage_package_says_what_it_owns():
    for package in ("inputs", "data", "training", "record", "evaluation", "systems"):
        doc = importlib.import_module(f"fixedcode_study.{package}").__doc__
        assert doc and len(doc.strip().splitlines()) >= 3, package


def test_analysis_reads_the_record_without_the_training_stack():
    """analysis/ imports only record.jobdir from the workbench: it must run where torch is absent."""
    for path in (ROOT / "analysis").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fixedcode_study"):
                assert node.module == "fixedcode_study.record.jobdir", f"{path.name}: {node.module}"

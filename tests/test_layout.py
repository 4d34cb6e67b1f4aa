"""The package layout keeps its promises: one owner per fact, no import cycles, thin entry points.

These read the source (ast), so they fail on the regression itself, not on a symptom of it. The
structural rules (no import cycle in fixedcode_study or the checkout's analysis alias, no import up
the layer list, thin command modules, config composition at the front door only) are functions in
tests/helpers/layout.py; each is applied to the real tree here and fed a planted violation.
"""

from __future__ import annotations

import ast
import importlib
import textwrap
import tomllib
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from fixedcode_study.accounting import optimizer_group, optimizer_groups, parameter_groups
from fixedcode_study.build import build_model
from fixedcode_study.config import available, compose, resolve_input_references
from helpers.vocabulary import with_vocabulary
from helpers.layout import (CHECKOUT_ALIAS, Source, compose_calls, find_cycle, import_graph, long_commands,
                            omegaconf_imports, read_modules, upward_imports)

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "fixedcode_study"

# Every module of the package (analysis included), and with it the checkout's `python -m analysis` alias.
SOURCES = read_modules(ROOT, "fixedcode_study")
EVERYTHING = {**SOURCES, **read_modules(ROOT, CHECKOUT_ALIAS)}


def _path(name: str, source: Source) -> Path:
    folder_or_file = ROOT.joinpath(*name.split("."))
    return folder_or_file / "__init__.py" if source.is_package else folder_or_file.with_suffix(".py")


MODULES: dict[str, Path] = {name: _path(name, source) for name, source in SOURCES.items()}
assert all(path.exists() for path in MODULES.values())


def test_every_module_imports():
    failed = {}
    for module in sorted(MODULES):
        try:
            importlib.import_module(module)
        except Exception as error:  # noqa: BLE001 - every failing module is listed, not the first
            failed[module] = f"{type(error).__name__}: {error}"
    assert not failed, failed


# --- The executable layout rules (tests/helpers/layout.py), on the real tree ---------------------

@pytest.mark.parametrize("module_level_only", [True, False], ids=["import-time", "including-lazy-imports"])
def test_no_import_cycle(module_level_only):
    cycle = find_cycle(import_graph(EVERYTHING, module_level_only))
    assert cycle is None, f"import cycle: {' -> '.join(cycle)}"


def test_no_import_runs_up_a_layer():
    """Lazy imports count: a function-level import of a higher layer is the same dependency."""
    offenders = upward_imports(import_graph(EVERYTHING))
    assert not offenders, "\n".join(offenders)


def test_command_modules_are_thin():
    offenders = long_commands(SOURCES)
    assert not offenders, "\n".join(offenders)


def test_only_the_front_door_composes_configs():
    """config.compose / hydra's compose API run in cli/ (and config.py, which wraps them) alone."""
    offenders = compose_calls(SOURCES)
    assert not offenders, "\n".join(offenders)


def test_nothing_below_the_front_door_imports_omegaconf():
    """Below cli/ (and config.py, which composes) a job is its JobSpec and plain data: no DictConfig
    travels there, and no module can take one without importing omegaconf (lazy imports count)."""
    offenders = omegaconf_imports(EVERYTHING)
    assert not offenders, "\n".join(offenders)


# --- Each rule fails on a planted violation --------------------------------------------------------

def _plant(modules: dict[str, str]) -> dict[str, Source]:
    """An in-memory module map; a name ending in `.__init__` is that package's __init__.py."""
    return {name.removesuffix(".__init__"): Source(textwrap.dedent(text), name.endswith(".__init__"))
            for name, text in modules.items()}


def test_cycle_rule_sees_a_planted_cycle_also_through_a_lazy_import():
    eager = _plant({"fixedcode_study.a": "from . import b\n", "fixedcode_study.b": "from .a import x\n",
                    "fixedcode_study.c": "from .a import y\n"})
    assert find_cycle(import_graph(eager, module_level_only=True)) == [
        "fixedcode_study.a", "fixedcode_study.b", "fixedcode_study.a"]
    lazy = _plant({"fixedcode_study.a": "from . import b\n",
                   "fixedcode_study.b": "def f():\n    from .a import x\n    return x\n"})
    assert find_cycle(import_graph(lazy, module_level_only=True)) is None
    assert find_cycle(import_graph(lazy)) == ["fixedcode_study.a", "fixedcode_study.b", "fixedcode_study.a"]
    # a package's __init__ importing its submodule is no cycle (the submodule's import runs the __init__ first)
    package = _plant({"fixedcode_study.record.__init__": "from .jobdir import JobDir\n",
                      "fixedcode_study.record.jobdir": "from ..errors import JobBusy\n", "fixedcode_study.errors": ""})
    assert find_cycle(import_graph(package)) is None
    # the checkout alias is in the graph: a cycle through it is seen
    alias = _plant({"analysis.__main__": "from fixedcode_study.analysis.report import main\n",
                    "fixedcode_study.analysis.report": "import analysis.__main__\n"})
    assert find_cycle(import_graph(alias)) == ["analysis.__main__", "fixedcode_study.analysis.report",
                                               "analysis.__main__"]


def test_layer_rule_sees_planted_upward_imports():
    planted = _plant({
        "fixedcode_study.training.__init__": "",
        "fixedcode_study.training.console": "def say(): ...\n",
        "fixedcode_study.training.speed": "",
        "fixedcode_study.training.job": "from ..record.reuse import link\n",           # down: fine
        "fixedcode_study.record.reuse": "from ..training.console import say\n",        # record -> training
        "fixedcode_study.config": "def f():\n    from .training import speed\n",     # lazy, config -> training
        "fixedcode_study.hub.export": "",
        "fixedcode_study.cli.run": "from ..hub.export import export_checkpoint\n",
        "fixedcode_study.run": "from .cli.run import main\n",                          # an alias: a command
        "fixedcode_study.analysis.read.runs": "from ..report import write_report\n",  # read -> report
        "fixedcode_study.analysis.report": "from .read.runs import load_run_dirs\n",  # down: fine
        "fixedcode_study.analysis.gossip": "",                                          # in no analysis layer
        "fixedcode_study.analysis.dashboard": "from .gossip import x\n",
        "fixedcode_study.scratch": "",                                                  # in no layer at all
        "analysis.__main__": "from fixedcode_study.analysis.report import write_report\n",  # the alias: fine
    })
    offenders = upward_imports(import_graph(planted))
    assert [o.split(" (")[0] for o in offenders] == [
        "fixedcode_study.analysis.dashboard -> fixedcode_study.analysis.gossip",
        "fixedcode_study.analysis.read.runs -> fixedcode_study.analysis.report",
        "fixedcode_study.config -> fixedcode_study.training",
        "fixedcode_study.config -> fixedcode_study.training.speed",
        "fixedcode_study.record.reuse -> fixedcode_study.training.console",
        "fixedcode_study.scratch: in no layer",
    ], offenders


def test_thin_command_rule_sees_a_planted_long_command():
    line = "x = 1\n"
    planted = _plant({"fixedcode_study.cli.fat": line * 130, "fixedcode_study.cli.thin": line * 120,
                      "fixedcode_study.cli.args": line * 300, "fixedcode_study.cli.__main__": line * 300,
                      "fixedcode_study.studies.study": line * 900})
    assert long_commands(planted) == [
        "fixedcode_study.cli.fat: 130 lines (at most 120: move the library code below cli/)"]


def test_compose_rule_sees_planted_compositions():
    planted = _plant({
        "fixedcode_study.evaluation.harness": """
            from ..config import compose
            def settings():
                return compose([]).eval
            """,
        "fixedcode_study.systems.bench": """
            from .. import config
            from hydra import compose as hydra_compose, initialize_config_dir
            def cfgs():
                with initialize_config_dir(config_dir="conf"):
                    return hydra_compose("config"), config.compose_variant([], "gf2")
            """,
        "fixedcode_study.hub.external": """
            import hydra
            def cfg():
                hydra.initialize(config_path="conf")
            def initialize():  # not Hydra's
                pass
            initialize()
            """,
        "fixedcode_study.cli.pretokenize": "from ..config import compose\ncfg = compose([])\n",
        "fixedcode_study.config": ("from hydra import compose, initialize_config_dir\n"
                                   "def compose_(o):\n    with initialize_config_dir(config_dir='c'):\n"
                                   "        return compose('config', o)\n"),
    })
    assert [o.split(" (")[0] for o in compose_calls(planted)] == [
        "fixedcode_study.evaluation.harness:4 compose()",
        "fixedcode_study.hub.external:4 initialize()",
        "fixedcode_study.systems.bench:5 initialize_config_dir()",
        "fixedcode_study.systems.bench:6 compose_variant()",
        "fixedcode_study.systems.bench:6 hydra_compose()",
    ]


def test_omegaconf_rule_sees_planted_imports():
    planted = _plant({
        "fixedcode_study.training.job": "from omegaconf import DictConfig\n",
        "fixedcode_study.studies.launcher": "def f():\n    from omegaconf import open_dict\n",  # lazy
        "fixedcode_study.systems.bench": "import omegaconf.errors as e\n",
        "fixedcode_study.record.reuse": "from .omegaconf import x\n",  # a relative module of that name: ours
        "fixedcode_study.config": "from omegaconf import OmegaConf\n",  # the module that composes
        "fixedcode_study.cli.run": "from omegaconf import DictConfig\n",  # the front door
    })
    assert [o.split(" (")[0] for o in omegaconf_imports(planted)] == [
        "fixedcode_study.studies.launcher:2 from omegaconf import ...",
        "fixedcode_study.systems.bench:1 import omegaconf.errors",
        "fixedcode_study.training.job:1 from omegaconf import ...",
    ]


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
                   "config.yaml": {"fixedcode_study.config"},
                   # Prose that reads no file: the report's Methods text and table/figure captions tell its
                   # reader which record file a number comes from. The analysis *readers* (analysis/read/) take the
                   # names from record/jobdir.py like every other module.
                   "results.json": {"fixedcode_study.analysis.sections.breakdown",
                                    "fixedcode_study.analysis.sections.methods", "fixedcode_study.analysis.sections.probes",
                                    "fixedcode_study.analysis.tables.code", "fixedcode_study.analysis.tables.compare",
                                    "fixedcode_study.analysis.tables.summary",
                                    "fixedcode_study.analysis.figures.curves"}}


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
    """One function computes each fact; a method of that name (build.BuiltModel.flops_per_token) is
    an accessor only when it calls accounting's function."""
    owners, computing_methods = [], []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text())
        owners += [name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == function]
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for method in (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == function):
                delegates = any(isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == function
                                for c in ast.walk(method))
                if not delegates:
                    computing_methods.append(f"{name}.{cls.name}.{function}")
    assert owners == ["fixedcode_study.accounting"], owners
    assert not computing_methods, computing_methods


@pytest.mark.parametrize("input_name", available("input"))
def test_parameter_and_optimizer_groups_cover_every_parameter_once(input_name):
    cfg = compose(["model=test_micro", f"input={input_name}"])
    input_cfg = with_vocabulary(resolve_input_references(OmegaConf.to_container(cfg.input, resolve=True)),
                                cfg.model.vocab_size)  # a spelling code's strings: synthetic here
    with torch.device("meta"):
        model = build_model(cfg.model, input_cfg)
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
    assert set(scripts) == {"fixedcode"}  # the one front door (the fixedcode-<verb> aliases went: docs/commands.md)
    for script, target in scripts.items():
        module, attr = target.split(":")
        assert callable(getattr(importlib.import_module(module), attr)), script


def test_analysis_reads_the_record_without_the_training_stack():
    """fixedcode_study.analysis imports only record.jobdir, record.atomic and record.variants (the
    record's file names, its one atomic writer, which the report's files use too, and the variant's
    name, which W&B runs carry too), adaptation.settings (what a study's `adapt:` block stands for in
    an adapt record, which imports errors alone) and errors (the one-line ConfigError
    its options raise) from the rest of the workbench (lazy imports included): it must run where torch
    is absent. The checkout alias and the command (cli/analyze.py) import the analysis and the
    argument convention (cli/args.py, which imports errors alone) only."""
    graph = import_graph(EVERYTHING)
    allowed = {"fixedcode_study.record.jobdir", "fixedcode_study.record.atomic", "fixedcode_study.record.variants",
               "fixedcode_study.errors", "fixedcode_study.adaptation.settings"}
    assert graph["fixedcode_study.record.variants"] == set()   # the standard library alone
    assert graph["fixedcode_study.adaptation.settings"] == {"fixedcode_study.errors"}
    outside = {f"{name} -> {target}" for name, targets in graph.items()
               if name.startswith("fixedcode_study.analysis") for target in targets
               if not target.startswith("fixedcode_study.analysis") and target not in allowed}
    assert not outside, sorted(outside)
    assert graph["analysis.__main__"] == {"fixedcode_study.cli.analyze", "fixedcode_study.cli.args"}
    assert graph["fixedcode_study.cli.analyze"] == {"fixedcode_study.analysis.entry", "fixedcode_study.cli.args"}
    assert graph["fixedcode_study.cli.args"] == {"fixedcode_study.errors"}

"""The layout rules of tests/test_layout.py as functions over a module map, so each can be fed a planted violation.

A module map is dotted name -> `Source` (its text, and whether it is a package's __init__, which
decides how its relative imports resolve). `read_modules` builds one from files on disk;
a test builds a small one in memory. The rules:

- `find_cycle(import_graph(modules))`: an import cycle, or None;
- `upward_imports(graph)`: imports that run back up the layer list (`LAYERS`, and `ANALYSIS_LAYERS`
  inside fixedcode_study.analysis), plus modules no layer claims;
- `long_commands(modules)`: command modules (fixedcode_study/cli/<verb>.py) over `COMMAND_LINES`;
- `compose_calls(modules)`: config composition outside the front door (cli/) and config.py;
- `omegaconf_imports(modules)`: omegaconf (DictConfig, OmegaConf) outside the front door: below it a
  job is its resolved spec (spec.JobSpec) and plain data, never a composed config.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "fixedcode_study"
CHECKOUT_ALIAS = "analysis"  # the checkout's `python -m analysis` alias package (not installed)

# Lowest first; a module may import from its own tier or below. fixedcode_study itself (__init__)
# sits at the bottom: it must import nothing.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("", "errors", "console", "hardware", "turns"), ("config",), ("inputs",), ("heads",), ("model",), ("accounting",),
    ("build",), ("record",), ("data",), ("spec",), ("evaluation",), ("probing",), ("training",),
    ("systems",), ("hub",), ("composition", "adaptation"), ("studies",), ("analysis",), ("cli",),
)
# Inside fixedcode_study.analysis (its __init__, docstring only, at the bottom).
ANALYSIS_LAYERS: tuple[tuple[str, ...], ...] = (
    ("", "errors"), ("read",), ("stats",), ("tables",), ("results",), ("figures",), ("sections",), ("report",),
    ("dashboard",), ("entry",), ("summaries",), ("regenerate",),
)
COMMAND_LINES = 120  # a command module parses, resolves and calls the library: no more
FRONT_DOOR = (f"{PACKAGE}.cli", f"{PACKAGE}.config")  # where a config may be composed
# config.compose / config.compose_variant, and Hydra's own compose API
COMPOSERS = {"compose", "compose_variant", "initialize_config_dir", "initialize_config_module"}
HYDRA_COMPOSERS = COMPOSERS | {"initialize"}  # `initialize` is Hydra's only when imported from hydra


@dataclass(frozen=True)
class Source:
    text: str
    is_package: bool = False  # an __init__.py: `from . import x` is relative to itself


def read_modules(root: Path, package: str) -> dict[str, Source]:
    """Dotted module name -> Source, for every module of root/package."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = Source(path.read_text(), is_package)
    return out


def imports(name: str, source: Source, known: set[str] | dict, module_level_only: bool = False) -> set[str]:
    """Modules of `known` that `name` imports (relative imports resolved)."""
    tree = ast.parse(source.text)
    package = name if source.is_package else name.rsplit(".", 1)[0]
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
        found |= {c for c in candidates if c in known and c != name}
    return found


def parents(name: str) -> set[str]:
    """Importing a.b.c runs a/__init__ and a/b/__init__ first: those edges are not design cycles."""
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def import_graph(modules: dict[str, Source], module_level_only: bool = False) -> dict[str, set[str]]:
    return {name: imports(name, source, modules, module_level_only) - parents(name)
            for name, source in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None."""
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


def _rank(layers: tuple[tuple[str, ...], ...], part: str) -> int | None:
    return next((i for i, tier in enumerate(layers) if part in tier), None)


def layer_of(name: str, modules: dict[str, Source] | set[str]) -> tuple[str, int] | None:
    """(layer name, rank) of a module; None when no layer claims it.

    The spellings beside the package (fixedcode_study/run.py, for cli/run.py, and
    fixedcode_study/__main__.py) and the checkout's `analysis` alias package are commands."""
    parts = name.split(".")
    cli = ("cli", _rank(LAYERS, "cli"))
    if parts[0] == CHECKOUT_ALIAS:
        return cli
    if parts[0] != PACKAGE:
        return None
    top = parts[1] if len(parts) > 1 else ""
    if len(parts) == 2 and (top == "__main__" or f"{PACKAGE}.cli.{top}" in modules):
        return cli
    rank = _rank(LAYERS, top)
    return None if rank is None else (top or PACKAGE, rank)


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """'a -> b (layer x below layer y)' for every import against the layer order, and the unplaced modules."""
    offenders = []
    for name in sorted(graph):
        here = layer_of(name, graph)
        if here is None:
            offenders.append(f"{name}: in no layer (add it to LAYERS in tests/helpers/layout.py)")
            continue
        for target in sorted(graph[name]):
            there = layer_of(target, graph)
            if there is None:
                continue  # reported as unplaced on its own line
            if there[1] > here[1]:
                offenders.append(f"{name} -> {target} ({here[0]} may not import {there[0]}, a higher layer)")
            elif here[0] == there[0] == "analysis":
                offenders += _analysis_upward(name, target)
    return offenders


def _analysis_layer(name: str) -> tuple[str, int | None]:
    parts = name.split(".")
    part = parts[2] if len(parts) > 2 else ""
    return part or "analysis/__init__", _rank(ANALYSIS_LAYERS, part)


def _analysis_upward(name: str, target: str) -> list[str]:
    (here, low), (there, high) = _analysis_layer(name), _analysis_layer(target)
    if low is None or high is None:
        missing = here if low is None else there
        return [f"{name} -> {target} (analysis.{missing} is in no analysis layer: add it to ANALYSIS_LAYERS)"]
    if high > low:
        return [f"{name} -> {target} (analysis {here} may not import analysis {there}, a higher layer)"]
    return []


def long_commands(modules: dict[str, Source], limit: int = COMMAND_LINES) -> list[str]:
    """Command modules over `limit` lines (cli/args.py, the framework, and the dispatcher are not commands)."""
    prefix = f"{PACKAGE}.cli."
    commands = {n: s for n, s in modules.items() if n.startswith(prefix) and n.count(".") == 2
                and n[len(prefix):] not in ("args", "__main__")}
    return [f"{n}: {len(s.text.splitlines())} lines (at most {limit}: move the library code below cli/)"
            for n, s in sorted(commands.items()) if len(s.text.splitlines()) > limit]


def compose_calls(modules: dict[str, Source]) -> list[str]:
    """'module:line call()' for every config composition outside the front door."""
    offenders: list[tuple[str, int, str]] = []
    for name, source in sorted(modules.items()):
        if any(name == door or name.startswith(door + ".") for door in FRONT_DOOR):
            continue
        tree = ast.parse(source.text)
        from_hydra = {alias.asname or alias.name for node in ast.walk(tree)
                      if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "hydra"
                      for alias in node.names if alias.name in HYDRA_COMPOSERS}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            hydra_attr = (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                          and func.value.id == "hydra" and called in HYDRA_COMPOSERS)
            if called in COMPOSERS or called in from_hydra or hydra_attr:
                offenders.append((name, node.lineno, called))
    return [f"{name}:{line} {called}() (compose at the front door, cli/, and pass the resolved settings down)"
            for name, line, called in sorted(offenders)]


def omegaconf_imports(modules: dict[str, Source]) -> list[str]:
    """'module:line import omegaconf...' for every import of omegaconf (lazy ones included) outside the
    front door (cli/ and config.py, the module that composes and hands on plain data)."""
    offenders = []
    for name, source in sorted(modules.items()):
        if any(name == door or name.startswith(door + ".") for door in FRONT_DOOR):
            continue
        for node in ast.walk(ast.parse(source.text)):
            if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "omegaconf":
                offenders.append(f"{name}:{node.lineno} from {node.module} import ...")
            elif isinstance(node, ast.Import):
                offenders += [f"{name}:{node.lineno} import {a.name}" for a in node.names if a.name.split(".")[0] == "omegaconf"]
    return [f"{o} (take the JobSpec or a part of it; config.py turns a composed config into plain data)"
            for o in offenders]

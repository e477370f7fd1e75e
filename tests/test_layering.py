"""The layering docs/design.md promises, checked in fresh interpreters through sys.modules: the
numpy layers (formats, sources, augment, align, the plan, the schema) import neither torch nor
DALI, and the graph builders (dali_pipes/pipelines) never import torch."""
from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TORCH, DALI = "torch", "nvidia.dali"


def _modules(package: str) -> list[str]:
    path = ROOT.joinpath(*package.split("."))
    return [package] + [f"{package}.{m.name}" for m in pkgutil.iter_modules([str(path)])]


NUMPY_ONLY = (_modules("dali_pipes.formats") + _modules("dali_pipes.sources")
              + ["dali_pipes.recipes.augment", "dali_pipes.align", "dali_pipes.schema",
                 "torch_bridge.order.plan", "torch_bridge.registry"])
GRAPHS = [m for m in _modules("dali_pipes.pipelines") if m != "dali_pipes.pipelines"]


def _imported(modules: list[str]) -> list[str]:
    """Which of torch / DALI a new interpreter holds after importing `modules` (all of them:
    what none pulls in together, none pulls in alone)."""
    code = (f"import importlib, json, sys\nfor name in {modules!r}: importlib.import_module(name)\n"
            f"print(json.dumps(sorted(m for m in ({TORCH!r}, {DALI!r}) if m in sys.modules)))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_numpy_layers_import_neither_torch_nor_dali():
    assert len(NUMPY_ONLY) > 15
    assert _imported(NUMPY_ONLY) == []


def test_graph_builders_never_import_torch():
    assert {"dali_pipes.pipelines.image", "dali_pipes.pipelines.inputs"} <= set(GRAPHS)
    assert _imported(GRAPHS) == [DALI]


def test_the_check_sees_an_import_of_torch():
    """The same probe on a module that does import torch reports it (the check can fail)."""
    assert _imported(["dali_pipes.recipes.augment", "torch_bridge.engines._collate"]) == [TORCH]


def _imports_of(path: Path) -> set[str]:
    """Every module a source file imports, at any depth of its code (function bodies too)."""
    import ast
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


def test_library_never_imports_bench():
    """bench/ holds benchmarks only: the library (and its test-data writers) stand without it."""
    offenders = {str(path.relative_to(ROOT)): sorted(m for m in _imports_of(path)
                                                     if m == "bench" or m.startswith("bench."))
                 for package in ("dali_pipes", "torch_bridge")
                 for path in (ROOT / package).rglob("*.py")}
    assert len(offenders) > 100
    assert {k: v for k, v in offenders.items() if v} == {}


def _modality_lists(path: Path, names: set[str]) -> list[int]:
    """Lines of `path` holding a literal collection (tuple, list, set, dict keys, Literal)
    that names three or more modalities: a per-modality list beside the registry."""
    import ast
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        items = (node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set))
                 else node.keys if isinstance(node, ast.Dict) else [])
        named = {i.value for i in items if isinstance(i, ast.Constant)} & names
        if len(named) >= 3:
            lines.append(node.lineno)
    return lines


def test_the_registry_is_the_only_list_of_modalities():
    """Schemas, make_loader's argument, the check tool and compare.py's rows all derive from
    torch_bridge.registry: no other module of the library or bench lists the modalities."""
    from torch_bridge import registry
    names = set(registry.names())
    found = {str(path.relative_to(ROOT)): _modality_lists(path, names)
             for package in ("dali_pipes", "torch_bridge", "bench")
             for path in (ROOT / package).rglob("*.py")}
    assert found["torch_bridge/registry.py"] == [] and len(found) > 150
    assert _modality_lists(ROOT / "tests" / "torch_bridge" / "test_registry.py", names)
    assert {path: lines for path, lines in found.items() if lines} == {}

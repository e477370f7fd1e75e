"""The layering docs/design.md promises, checked in fresh interpreters through sys.modules: the
numpy layers (formats, sources, stores, geometry, the recipe ops' parameters, the order
package, the schema, the data writers and the shipped conformance suites of dali_pipes) import
neither torch nor DALI, and the graph builders (dali_pipes/pipelines and the recipe ops' graph
steps) never import torch; the packages of dali_pipes import only downwards in their declared
order (LAYERS), never torch_bridge; nothing of the library imports bench or the repository's
tests (the shipped suites stand without them); bench uses only the library's public names; and
no import cycles, even ones hidden inside functions."""
from __future__ import annotations

import ast
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


RECIPES = _modules("dali_pipes.recipes")
NUMPY_ONLY = (_modules("dali_pipes.formats") + _modules("dali_pipes.sources")
              + _modules("dali_pipes.stores") + _modules("dali_pipes.geometry")
              + _modules("torch_bridge.order")
              + [m for m in RECIPES if not m.endswith("_graph")]
              + _modules("dali_pipes.sample_data") + _modules("dali_pipes.testing")
              + ["dali_pipes.align", "dali_pipes.schema", "torch_bridge.registry"])
GRAPHS = ([m for m in _modules("dali_pipes.pipelines") if m != "dali_pipes.pipelines"]
          + [m for m in RECIPES if m.endswith("_graph")])


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
    assert len(NUMPY_ONLY) > 40 and "torch_bridge.order.plan" in NUMPY_ONLY
    assert {"dali_pipes.testing.source_tests", "dali_pipes.sample_data.tiny_data"} \
        <= set(NUMPY_ONLY)
    assert _imported(NUMPY_ONLY) == []


def test_graph_builders_never_import_torch():
    assert {"dali_pipes.pipelines.image", "dali_pipes.recipes.policies_graph"} <= set(GRAPHS)
    assert _imported(GRAPHS) == [DALI]


def test_the_check_sees_an_import_of_torch():
    """The same probe on a module that does import torch reports it (the check can fail)."""
    assert _imported(["dali_pipes.geometry.draws", "torch_bridge.engines._collate"]) == [TORCH]


def _import_statements(path: Path) -> list[tuple[str, tuple[str, ...]]]:
    """(module, names taken from it) of every absolute import of a source file, at any depth
    of its code (function bodies too); `import m` gives (m, ())."""
    found: list[tuple[str, tuple[str, ...]]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.module, tuple(alias.name for alias in node.names)))
    return found


def _imports_of(path: Path) -> set[str]:
    """Every module a source file imports, at any depth of its code (function bodies too)."""
    return {module for module, _ in _import_statements(path)}


def test_library_never_imports_bench():
    """bench/ holds benchmarks only: the library (and its test-data writers) stand without it."""
    offenders = {str(path.relative_to(ROOT)): sorted(m for m in _imports_of(path)
                                                     if m == "bench" or m.startswith("bench."))
                 for package in ("dali_pipes", "torch_bridge")
                 for path in (ROOT / package).rglob("*.py")}
    assert len(offenders) > 100
    assert {k: v for k, v in offenders.items() if v} == {}


def _imports_tests(path: Path) -> list[str]:
    return sorted(m for m in _imports_of(path) if m == "tests" or m.startswith("tests."))


def test_library_never_imports_the_tests():
    """The shipped conformance suites (dali_pipes.testing, torch_bridge.testing) and every
    other module of the library stand without the repository's tests: a modality or store
    written elsewhere proves itself by subclassing them."""
    paths = [path for package in ("dali_pipes", "torch_bridge")
             for path in (ROOT / package).rglob("*.py")]
    shipped = {str(p.relative_to(ROOT)) for p in paths if p.parent.name == "testing"}
    assert {"dali_pipes/testing/source_tests.py", "dali_pipes/testing/store_tests.py",
            "torch_bridge/testing/loader_contract.py"} <= shipped
    assert _imports_tests(ROOT / "tests" / "sources" / "test_source_conformance.py")  # seen
    offenders = {str(p.relative_to(ROOT)): _imports_tests(p) for p in paths}
    assert {k: v for k, v in offenders.items() if v} == {}


def _modality_lists(path: Path, names: set[str]) -> list[int]:
    """Lines of `path` holding a literal collection (tuple, list, set, dict keys, Literal)
    that names three or more modalities: a per-modality list beside the registry."""
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


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph(packages: tuple[str, ...] = ("dali_pipes", "torch_bridge")) -> dict:
    """module -> the library modules it imports, at any depth of its code: imports inside
    functions count (they only hide a cycle). `from P import m` is an edge to the module P.m
    when there is one, else to P; the implicit run of a parent package's __init__ is not."""
    paths = {_module_name(p): p for pkg in packages for p in (ROOT / pkg).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        edges = set()
        for module, names in _import_statements(path):
            subs = {f"{module}.{n}" for n in names} & paths.keys()
            edges.update(subs or ({module} & paths.keys()))
        graph[name] = edges - {name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = []
                while True:
                    top = stack.pop()
                    on.discard(top)
                    part.append(top)
                    if top == node:
                        break
                if len(part) > 1:
                    found.append(sorted(part))
    return found


def test_the_cycle_finder_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_in_the_library():
    graph = _import_graph()
    assert len(graph) > 150 and graph["torch_bridge.factory"]
    assert _cycles(graph) == []


# The packages and top-level modules of dali_pipes, lowest layer first: a module imports its
# own unit and the units of lower layers only, and nothing of torch_bridge (docs/design.md).
LAYERS = (
    ("formats", "schema", "option_groups", "cli", "progress", "launch_env", "gpu", "native",
     "__init__"),
    ("stores", "geometry"),
    ("sources", "recipes", "clip_options"),
    ("pipelines",),
    ("pack", "sample_data", "testing", "align", "frames"),  # align, frames: public entrances
)


def _unit(module: str) -> str:
    """A dali_pipes module's package or top-level module ("__init__": dali_pipes itself);
    for another module its top package."""
    parts = module.split(".")
    return parts[0] if parts[0] != "dali_pipes" else parts[1] if len(parts) > 1 else "__init__"


def _upward(graph: dict[str, set[str]]) -> list[str]:
    """"module -> imported" for every import of a dali_pipes module from another unit of its
    own layer or of a higher one (a unit outside LAYERS, torch_bridge too, is above all)."""
    rank = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}
    return sorted(f"{m} -> {t}" for m, imported in graph.items() for t in imported
                  if m.split(".")[0] == "dali_pipes" and _unit(t) != _unit(m)
                  and rank.get(_unit(t), len(LAYERS)) >= rank.get(_unit(m), len(LAYERS)))


def test_the_layer_check_sees_an_import_upwards():
    assert _upward({"dali_pipes.formats.envi": {"dali_pipes.sources.image"},
                    "dali_pipes.sources.image": {"dali_pipes.stores.local",
                                                 "dali_pipes.sources.names"},
                    "dali_pipes.stores.local": {"dali_pipes.geometry.draws"},
                    "dali_pipes.schema": {"torch_bridge.registry"}}) == [
        "dali_pipes.formats.envi -> dali_pipes.sources.image",
        "dali_pipes.schema -> torch_bridge.registry",
        "dali_pipes.stores.local -> dali_pipes.geometry.draws"]


def test_dali_pipes_imports_only_downwards():
    graph = _import_graph()
    units = {_unit(m) for m in graph if m.split(".")[0] == "dali_pipes"}
    assert units == {unit for layer in LAYERS for unit in layer}  # a new one gets its place
    assert "dali_pipes.geometry.draws" in graph["dali_pipes.sources.hyperspectral"]
    assert _upward(graph) == []


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_imports(path: Path) -> list[str]:
    """Imports of a private module or name of the library (any depth of the code)."""
    return [" ".join((module, *names)) for module, names in _import_statements(path)
            if module.split(".")[0] in ("dali_pipes", "torch_bridge")
            and any(map(_private, (*module.split("."), *names)))]


def _attribute_read(node: ast.AST) -> tuple[ast.expr, str] | None:
    """(x, name) of `x.name`, or of getattr / setattr / hasattr(x, "name")."""
    if isinstance(node, ast.Attribute):
        return node.value, node.attr
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) > 1 \
            and node.func.id in ("getattr", "setattr", "hasattr") \
            and isinstance(node.args[1], ast.Constant):
        return node.args[0], str(node.args[1].value)
    return None


def _private_reads(path: Path) -> list[str]:
    """Reads of a private attribute whose owner is not the file's own object (self, cls,
    super()) nor a module from outside the repository (os._exit): the library's objects."""
    tree = ast.parse(path.read_text(), str(path))
    own = {"self", "cls"} | {a.asname or a.name.split(".")[0] for node in ast.walk(tree)
                             if isinstance(node, ast.Import) for a in node.names
                             if a.name.split(".")[0] not in ("dali_pipes", "torch_bridge",
                                                              "bench", "tests")}
    found = []
    for node in ast.walk(tree):
        owner, name = _attribute_read(node) or (None, "")
        super_call = isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) \
            and owner.func.id == "super"
        if _private(name) and not super_call and not (isinstance(owner, ast.Name)
                                                      and owner.id in own):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return sorted(found)


def test_bench_uses_only_public_names_of_the_library():
    """An internal rename of the library never breaks a benchmark: bench imports no private
    module or name and reads no private attribute (its own private helpers are its own)."""
    found = {str(p.relative_to(ROOT)): _private_imports(p) + _private_reads(p)
             for p in (ROOT / "bench").rglob("*.py")}
    assert len(found) > 50 and "bench/stages.py" in found
    assert {path: names for path, names in found.items() if names} == {}


def test_the_bench_check_sees_private_names(tmp_path):
    study = tmp_path / "study.py"
    study.write_text(
        "import os\nfrom torch_bridge.engines._feeders import PlanBatch\n"
        "from dali_pipes.schema import _scalars, Input\n\n\nclass Probe:\n"
        "    def run(self, loader):\n        from dali_pipes import _private\n"
        "        self._seen = super()._parts\n        os._exit(0)\n"
        "        return loader._engine, getattr(loader, '_stats'), loader.engine.modality\n")
    assert _private_imports(study) == ["torch_bridge.engines._feeders PlanBatch",
                                       "dali_pipes.schema _scalars Input",
                                       "dali_pipes _private"]
    assert _private_reads(study) == ["11: getattr(loader, '_stats')", "11: loader._engine"]

"""How wide the library's contracts may be (docs/design.md, "Options as objects"): no
function or constructor of dali_pipes/ or torch_bridge/ over 12 parameters (`self` / `cls`
not counted, `*args` and `**options` counted), `make_loader` at most 16, and no option object
over 12 fields. The scan reads the source (every `def`, every dataclass); the option objects
are also checked as classes, with their inherited and nested fields.

Option objects are the dataclasses users pass or the library validates options into: every
modality's `option_groups` and the groups nested in them, the decode preset, the backend
and sampling values, the store options. Data records (a parsed file header, a report) are
as wide as what they describe and are listed in DATA_RECORDS with the reason.
"""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("dali_pipes", "torch_bridge")
MAX_PARAMETERS, MAX_FIELDS = 12, 12
WIDER = {"torch_bridge/factory.py:make_loader": 16}  # the one entrance
DATA_RECORDS = {
    "dali_pipes/formats/coco.py:CocoDataset": "a parsed COCO instances file",
    "dali_pipes/formats/envi.py:EnviHeader": "a parsed ENVI header",
    "dali_pipes/formats/video.py:VideoInfo": "a probed video file's stream facts",
    "torch_bridge/tools/doctor.py:Env": "the doctor's report of the machine",
}


def parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The parameters of a def, without a leading `self` / `cls`."""
    a = node.args
    names = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    names += [f"*{a.vararg.arg}"] if a.vararg else []
    names += [f"**{a.kwarg.arg}"] if a.kwarg else []
    return names[1:] if names[:1] in (["self"], ["cls"]) else names


def _is_dataclass(node: ast.ClassDef) -> bool:
    return any("dataclass" in ast.unparse(d) for d in node.decorator_list)


def fields(node: ast.ClassDef) -> list[str]:
    """The fields a dataclass declares itself (annotated names, not ClassVar)."""
    return [s.target.id for s in node.body if isinstance(s, ast.AnnAssign)
            and isinstance(s.target, ast.Name) and "ClassVar" not in ast.unparse(s.annotation)]


def scan(text: str, where: str) -> tuple[dict[str, int], dict[str, int]]:
    """(`where:function` -> parameters, `where:Class` -> fields of each dataclass) of a
    module's source, at any depth."""
    defs, classes = {}, {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            key = f"{where}:{node.name}"
            defs[key] = max(defs.get(key, 0), len(parameters(node)))
        elif isinstance(node, ast.ClassDef) and _is_dataclass(node):
            classes[f"{where}:{node.name}"] = len(fields(node))
    return defs, classes


def _library() -> tuple[dict[str, int], dict[str, int]]:
    defs, classes = {}, {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found = scan(path.read_text(), str(path.relative_to(ROOT)))
            defs.update(found[0])
            classes.update(found[1])
    return defs, classes


DEFS, CLASSES = _library()


def test_no_function_or_constructor_is_wider_than_the_rule():
    wide = {name: n for name, n in DEFS.items() if n > WIDER.get(name, MAX_PARAMETERS)}
    assert not wide, f"over {MAX_PARAMETERS} parameters (group them into an options object)"
    assert DEFS["torch_bridge/factory.py:make_loader"] <= 16


def test_no_dataclass_but_a_data_record_is_wider_than_the_rule():
    wide = {name: n for name, n in CLASSES.items()
            if n > MAX_FIELDS and name not in DATA_RECORDS}
    assert not wide, f"over {MAX_FIELDS} fields (split it into nested groups)"
    # every listed record exists and needs the exception
    assert all(CLASSES.get(name, 0) > MAX_FIELDS for name in DATA_RECORDS)


def _option_objects() -> set[type]:
    """Every option dataclass: the registry's groups (nested ones too) and make_loader's
    values."""
    from dali_pipes.option_groups import nested
    from dali_pipes.pipelines.config import PipelineConfig
    from dali_pipes.stores.options import StoreOptions
    from torch_bridge import registry
    from torch_bridge.backends import DaliBackend, TorchBackend
    from torch_bridge.order.options import Sampling
    todo = [PipelineConfig, StoreOptions, DaliBackend, TorchBackend, Sampling]
    todo += [group for spec in registry.REGISTRY.values() for kind in spec.kinds
             for group in kind.modality_class().option_groups]
    seen: set[type] = set()
    while todo:
        group = todo.pop()
        if group not in seen:
            seen.add(group)
            todo += nested(group).values()
    return seen


def test_option_objects_are_narrow_with_inherited_and_nested_fields():
    from dali_pipes.geometry.detection_options import DetectionCrop, DetectionOptions
    from dali_pipes.recipes import ImageRecipe, Mixing
    groups = _option_objects()
    assert {ImageRecipe, Mixing, DetectionOptions, DetectionCrop} <= groups
    wide = {g.__name__: len(dataclasses.fields(g)) for g in groups
            if len(dataclasses.fields(g)) > MAX_FIELDS}
    assert not wide
    records = {name.rsplit(":", 1)[1] for name in DATA_RECORDS}
    assert not records & {g.__name__ for g in groups}


@pytest.mark.parametrize("source,expected", [
    ("def f(a, b, *c, d=1, **e): pass", {"m:f": 5}),
    ("class A:\n    def __init__(self, a, b): pass\n"
     "    @classmethod\n    def make(cls, a): pass", {"m:__init__": 2, "m:make": 1}),
])
def test_the_scan_counts_parameters(source, expected):
    assert scan(source, "m")[0] == expected


def test_the_scan_sees_a_wide_function_and_a_wide_option_object():
    """The same rules on code that breaks them report it (the checks can fail)."""
    wide_def = f"def wide({', '.join(f'a{i}' for i in range(13))}): pass"
    wide_class = ("from dataclasses import dataclass\nfrom typing import ClassVar\n"
                  "@dataclass(frozen=True)\nclass Wide:\n    name: ClassVar[str] = 'x'\n"
                  + "".join(f"    f{i}: int = 0\n" for i in range(13)))
    defs, classes = scan(wide_def + "\n" + wide_class, "m")
    assert defs["m:wide"] == 13 > MAX_PARAMETERS
    assert classes["m:Wide"] == 13 > MAX_FIELDS

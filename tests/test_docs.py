"""The documentation stays inside the repository and in step with the code: docs/api.md
and docs/schema.md are what `python -m torch_bridge.tools.apidoc --write` writes (without
--write it only compares), nothing points to files outside the repository, and
`python -m torch_bridge` names the tools."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from torch_bridge.tools import apidoc

REPO = Path(__file__).resolve().parent.parent
OUTSIDE = re.compile(r"shared/|CONTRACT\.md|DESIGN\.md|DALI_NOTES|PERF_NOTES")


@pytest.mark.parametrize("name", sorted(apidoc.DOCS))
def test_generated_docs_are_up_to_date(name):
    assert (REPO / "docs" / name).read_text() == apidoc.DOCS[name](), \
        f"docs/{name} is stale: run python -m torch_bridge.tools.apidoc --write"


def test_apidoc_compares_by_default_and_writes_only_with_write(tmp_path, monkeypatch, capsys):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "api.md").write_text("old\n")
    monkeypatch.setattr(apidoc, "REPO", tmp_path)
    monkeypatch.setattr(apidoc, "DOCS", {"api.md": lambda: "new\n", "schema.md": lambda: "s\n"})
    assert apidoc.main([]) == 1
    assert "docs/api.md, docs/schema.md: out of date" in capsys.readouterr().err
    assert (tmp_path / "docs" / "api.md").read_text() == "old\n"
    assert not (tmp_path / "docs" / "schema.md").exists()
    assert apidoc.main(["--write"]) == 0
    assert (tmp_path / "docs" / "api.md").read_text() == "new\n"
    assert apidoc.main([]) == 0 and "docs up to date" in capsys.readouterr().out


def test_api_reference_covers_every_option():
    from torch_bridge import registry
    text = (REPO / "docs" / "api.md").read_text()
    options = ["backend", "batch_size", "device", "shuffle", "seed", "drop_last", "rank",
               "world_size", "on_error", "config", "reference", "sampling", "min_per_source"]
    for spec in registry.REGISTRY.values():
        options += list(spec.options())
    missing = [name for name in options if f"`{name}`" not in text]
    assert not missing


def _docstrings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    nodes = [tree, *(n for n in ast.walk(tree)
                     if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)))]
    return [doc for doc in map(ast.get_docstring, nodes) if doc]


def test_no_pointers_outside_the_repository():
    texts = {p: p.read_text() for p in [REPO / "README.md", *(REPO / "docs").glob("*.md")]}
    for package in ("dali_pipes", "torch_bridge", "bench", "tests"):
        for path in (REPO / package).rglob("*.py"):
            if path.name != "test_docs.py":
                texts[path] = "\n".join(_docstrings(path))
    bad = [f"{path.relative_to(REPO)}: {m.group(0)}" for path, text in texts.items()
           for m in OUTSIDE.finditer(text)]
    assert not bad


def test_readme_links_resolve():
    text = (REPO / "README.md").read_text()
    links = re.findall(r"\]\((docs/[^)#]+)", text) + re.findall(r"`(docs/[\w./]+\.md)`", text)
    assert links and [link for link in links if not (REPO / link).is_file()] == []


def test_main_prints_version_and_tools():
    out = subprocess.run([sys.executable, "-m", "torch_bridge"], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    assert re.match(r"dali-pipes \S+", out)
    for tool in ("torch_bridge.doctor", "torch_bridge.check", "bench/compare.py",
                 "bench/diagnose.py", "bench/tune.py", "dali_pipes.frames extract"):
        assert tool in out

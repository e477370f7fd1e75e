"""Every fenced code block of README.md and docs/*.md runs, or is checked, here.

- ```python: run as a script in a fresh process (forked from tests/doc_runner.py, which has
  imported torch, DALI and the project once), in an empty folder of its own. Only the data
  paths the docs use are substituted (PATHS: each quoted path string of the docs -> tiny
  data written once per session with dali_pipes.sample_data's writers); nothing else of the
  block changes. `<!-- doc-test: continues -->` before a fence runs the block after the
  previous python block of the same file (for fragments that use its names).
- ```bash: each command (continuation lines joined, comments dropped) by COMMAND_RULES:
  `python -m X`, `python bench/...`, `python examples/...` get `--help` run, and every
  `--option` of the line must be one the command's parser lists there. Not run, each with its
  reason: `pip install` (installs), `git clone` (network), `torchrun` (several processes,
  GPUs), `python -m pytest` (the suite itself), `python -c` one-liners, and shell utilities
  (sed, printf, ...) that only prepare files for the commands checked.
- ```toml: loaded by the library's own loaders (a preset by `load_config`, else a recipe by
  `load_recipe`), so an unknown key fails.
- NOT_RUN languages, with the reason. Generated pages (apidoc.DOCS: api.md, schema.md) hold
  signatures, checked by tests/test_docs.py.
- `<!-- doc-test: skip (reason) -->` on the line before a fence skips it; SKIPS counts them.
"""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from torch_bridge.tools import apidoc

REPO = Path(__file__).resolve().parent.parent
NOT_RUN = {"text": "diagrams, layouts and output, not code"}
MARK = re.compile(r"<!--\s*doc-test:\s*(skip|continues)\s*(?:\((.*)\))?\s*-->")
FENCE = re.compile(r"^```(\S*)\s*$")
BLOCK_TIMEOUT = 60.0


@dataclass
class Block:
    file: str
    line: int
    lang: str
    code: str
    mark: str | None = None
    reason: str = ""
    before: str = ""          # the previous python block of the file, for "continues"

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}"


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def extract(path: Path) -> list[Block]:
    """The fenced blocks of one markdown file, each with the mark on the line before it."""
    lines = path.read_text().splitlines()
    blocks: list[Block] = []
    i, last_python = 0, ""
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        mark = MARK.search(lines[i - 1]) if i else None
        block = Block(str(path.relative_to(REPO)), i + 1, m.group(1),
                      "\n".join(lines[i + 1:end]) + "\n",
                      mark.group(1) if mark else None, (mark.group(2) or "") if mark else "")
        if block.lang == "python":
            block.before = last_python
            last_python = block.before + block.code if block.mark == "continues" else block.code
        blocks.append(block)
        i = end + 1
    return blocks


BLOCKS = [b for p in doc_files() for b in extract(p)]
GENERATED = {f"docs/{name}" for name in apidoc.DOCS}
RUN = [b for b in BLOCKS if b.mark != "skip" and b.file not in GENERATED]
SKIPS = [b for b in BLOCKS if b.mark == "skip"]


# --- data -------------------------------------------------------------------------------

def _write_data(root: Path, runner) -> dict[str, str]:
    """Tiny data sets under root, and the doc path strings that name each of them."""
    from dali_pipes.sample_data import sample_detection, tiny_data
    img = tiny_data.image(root / "img", 0)
    img_b = tiny_data.image(root / "img_b", 1)
    video = tiny_data.video(root / "video", 0)
    frames = tiny_data.frames(root / "frames", 0)
    fusion = tiny_data.fusion(root / "fusion", 0)
    hyper = tiny_data.hyperspectral(root / "hyper", 0)
    det = sample_detection.tiny(root / "det", 0)
    shards = root / "shards"
    rc, log = runner.run("module", "dali_pipes.pack",
                         [str(img), str(shards), "--shard-size", "4000"], root)
    assert rc == 0, log
    tars = sorted(str(t) for t in shards.glob("*.tar"))
    assert len(tars) >= 2, tars
    video_shards = root / "video_shards"
    rc, log = runner.run("module", "dali_pipes.pack",
                         [str(video), str(video_shards), "--modality", "video"], root)
    assert rc == 0, log
    import datasets
    files = sorted(img.rglob("*.jpg"))
    datasets.Dataset.from_dict({
        "image": [f.read_bytes() for f in files],
        "label": [int(f.parent.name.split("_")[1]) for f in files],
    }).to_parquet(str(root / "train.parquet"))
    pattern = re.sub(r"\d{6}\.tar$", "", tars[0]) + f"{{000000..{len(tars) - 1:06d}}}.tar"
    as_img = ["data/train", "/data/imagenet/train", "/data/train", "/data/train/", "train/",
              "/data/val", "/data/set_a/", "/data/images"]
    paths = {p: str(img) for p in as_img}
    paths.update({
        "/data/set_b/": str(img_b),
        "/data/ucf101/train": str(video), "/data/kinetics/val": str(video),
        "/data/video": str(video), "/data/frames": str(frames), "/data/fusion": str(fusion),
        "/data/scenes": str(hyper),
        "/data/coco/train2017": str(det), "/data/coco/val2017": str(det),
        "/data/coco/annotations/instances_train2017.json": str(det / "instances.json"),
        "/data/coco/annotations/instances_val2017.json": str(det / "instances.json"),
        "/data/train-{000000..000127}.tar": pattern, "/data/shards/": str(shards),
        "/data/a.tar": tars[0], "/data/b.tar": tars[1],
        "shards/train-{000000..000003}.tar": str(video_shards),
        "train.parquet": str(root / "train.parquet"),
    })
    return paths


def substitute(code: str, paths: dict[str, str]) -> str:
    """Each quoted path string of PATHS replaced by its tiny data; nothing else changes."""
    for doc_path, local in sorted(paths.items(), key=lambda kv: -len(kv[0])):
        for q in ('"', "'"):
            code = code.replace(f"{q}{doc_path}{q}", f"{q}{local}{q}")
    return code


class Runner:
    def __init__(self, tmp: Path):
        self.tmp, self.n = tmp, 0
        self.proc = subprocess.Popen(
            [sys.executable, str(REPO / "tests" / "doc_runner.py")], cwd=REPO, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
        assert json.loads(self.proc.stdout.readline()) == {"ready": True}

    def run(self, kind: str, target: str, args: list[str], cwd: Path,
            timeout: float = BLOCK_TIMEOUT) -> tuple[int, str]:
        self.n += 1
        log = self.tmp / f"log_{self.n}.txt"
        req = {"kind": kind, "target": target, "argv": [target, *args], "cwd": str(cwd),
               "log": str(log), "env": {}, "timeout": timeout}
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        rc = json.loads(self.proc.stdout.readline())["rc"]
        return rc, log.read_text() if log.exists() else ""

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    r = Runner(tmp_path_factory.mktemp("doc_runner"))
    yield r
    r.close()


@pytest.fixture(scope="module")
def paths(runner, tmp_path_factory):
    return _write_data(tmp_path_factory.mktemp("doc_data"), runner)


# --- python -----------------------------------------------------------------------------

@pytest.mark.parametrize("block", [b for b in RUN if b.lang == "python"], ids=lambda b: b.id)
def test_python_block_runs(block, runner, paths, tmp_path):
    script = tmp_path / "block.py"
    script.write_text(substitute(block.before + block.code if block.mark == "continues"
                                 else block.code, paths))
    rc, log = runner.run("path", str(script), [], tmp_path)
    assert rc == 0, f"{block.id} failed:\n{log[-4000:]}"


# --- shell ------------------------------------------------------------------------------

NOT_CHECKED = {  # command word(s) -> why the line is not run
    "pip install": "installs packages",
    "git clone": "needs the network",
    "torchrun": "starts several processes, on GPUs",
    "python -m pytest": "the test suite itself",
    "python -c": "a one-liner whose code is the documented part",
    "sed": "a shell utility preparing a file for the commands checked",
    "printf": "a shell utility preparing a file for the commands checked",
}
ENV = re.compile(r"^(\w+=\S+\s+)+")
SUBSTITUTED = re.compile(r"^\w+=\$\((.*)\)$")


def commands(code: str) -> list[str]:
    """The block's commands: continuation lines joined, comments dropped, `&&` split."""
    joined = re.sub(r"\\\n\s*", " ", code)
    out = []
    for line in joined.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        out += [part.strip() for part in line.split("&&") if part.strip()]
    return out


def target_of(command: str) -> tuple[str, str, list[str]] | None:
    """("module" | "path", target, the rest) of a python command, None for a rule's skip;
    `NAME=$(command)` is its command."""
    command = SUBSTITUTED.sub(r"\1", command)
    words = shlex.split(ENV.sub("", command).replace("[", " ").replace("]", " "))
    for rule in NOT_CHECKED:
        if words[:len(rule.split())] == rule.split():
            return None
    assert words[0] == "python", f"{command!r}: no rule for {words[0]!r} (add one)"
    if words[1] == "-m":
        return "module", words[2], words[3:]
    return "path", str(REPO / words[1]), words[2:]


_HELP: dict[tuple[str, str], str] = {}


def _help(runner, kind: str, target: str, cwd: Path) -> str:
    if (kind, target) not in _HELP:
        rc, log = runner.run(kind, target, ["--help"], cwd)
        assert rc == 0, f"{target} --help failed:\n{log[-3000:]}"
        _HELP[kind, target] = log
    return _HELP[kind, target]


SHELL = [b for b in RUN if b.lang in ("bash", "sh", "console")]


@pytest.mark.parametrize("block", SHELL, ids=lambda b: b.id)
def test_shell_commands_parse(block, runner, tmp_path):
    checked = 0
    for command in commands(block.code):
        found = target_of(command)
        if found is None:
            continue
        kind, target, rest = found
        help_text = _help(runner, kind, target, REPO)
        options = {w.split("=")[0] for w in rest if w.startswith("--")}
        unknown = [o for o in sorted(options)
                   if not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", help_text)]
        assert not unknown, f"{block.id}: {command!r}: {target} has no {unknown}"
        checked += 1
    if checked == 0:
        pytest.skip(f"{block.id}: every command is in NOT_CHECKED")


# --- toml -------------------------------------------------------------------------------

@pytest.mark.parametrize("block", [b for b in RUN if b.lang == "toml"], ids=lambda b: b.id)
def test_toml_block_loads(block, tmp_path):
    from dali_pipes.pipelines.config import load_config
    from dali_pipes.recipes.files import load_recipe
    path = tmp_path / "block.toml"
    path.write_text(block.code)
    try:
        load_config(path)
    except (ValueError, TypeError) as as_preset:
        try:
            load_recipe(path, train=True)
        except (ValueError, TypeError) as as_recipe:
            raise AssertionError(f"{block.id}: neither a preset ({as_preset}) nor a recipe "
                                 f"({as_recipe})") from as_recipe


# --- every block is accounted for -------------------------------------------------------

def test_every_language_has_a_rule():
    known = {"python", "bash", "sh", "console", "toml", *NOT_RUN}
    bad = [f"{b.id}: ```{b.lang or '(none)'}" for b in BLOCKS
           if b.file not in GENERATED and b.mark != "skip" and b.lang not in known]
    assert not bad, "give each fence a language with a rule (or NOT_RUN with a reason)"


def test_skips_are_few_and_say_why():
    print(f"\n{len(SKIPS)} documentation blocks skipped:")
    for b in SKIPS:
        print(f"  {b.id}: {b.reason}")
    assert all(b.reason for b in SKIPS)
    assert len(SKIPS) <= 12

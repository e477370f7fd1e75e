"""Graphs with conditionals (pipeline_def(enable_conditionals=True)) are traced by DALI's
AutoGraph, which converts every function the graph code calls. The native operators are
asked for while such a graph is defined: their build and load must run as they are written
(converted, the build failed and the graph silently fell back to DALI's operators, and
AutoGraph printed a warning per helper it could not convert)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
from dali_pipes import native
from dali_pipes.pipelines.config import PipelineConfig
from dali_pipes.pipelines.video import build_video_pipeline
pipe = build_video_pipeline(device="cpu", batch_size=2, size=(32, 40), config=PipelineConfig())
print("LIBRARY", native.library("resize_op"), native.why_not("resize_op"))
"""


def test_a_traced_graph_loads_the_native_resize_without_autograph_warnings(native_ops):
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         timeout=600, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "AutoGraph could not transform" not in run.stderr, run.stderr[-3000:]
    line = next(x for x in run.stdout.splitlines() if x.startswith("LIBRARY"))
    assert line.endswith("libresize_op.so None"), (line, run.stderr[-2000:])

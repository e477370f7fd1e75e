"""A graph traced with DALI's conditionals (AutoGraph) asks for native libraries while it is
traced: the answer must be the one a plain call gives (AutoGraph once rewrote the build and
verify code into a NameError, turning every native operator off)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PLAIN = """
from dali_pipes import native
print(repr((native.library("resize_op") is not None, native.why_not("resize_op"))))
"""

TRACED = """
from nvidia.dali import fn, pipeline_def
from dali_pipes import native

@pipeline_def(batch_size=1, num_threads=1, device_id=None, enable_conditionals=True)
def graph():
    native.library("resize_op")
    return fn.random.uniform(range=(0.0, 1.0))

graph().build()
print(repr((native.library("resize_op") is not None, native.why_not("resize_op"))))
"""


def _run(code: str, folder) -> str:
    script = folder / "probe.py"  # AutoGraph reads the graph's source: a file, not -c
    script.write_text(code)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout, not an installed copy
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=600, check=True, env=env, cwd=ROOT)
    return done.stdout.strip().splitlines()[-1]


def test_a_traced_graph_gets_the_library_a_plain_call_gets(tmp_path):
    plain = _run(PLAIN, tmp_path)
    assert _run(TRACED, tmp_path) == plain
    assert "NameError" not in plain

"""The measuring processes of compare.py, forked from one server that has imported torch,
torchvision and DALI: each round of each backend still runs in a process of its own (its
CPU, memory and workers apart from the others'), without paying those imports again
(docs/measurements.md has the time it saves).

The server is multiprocessing's forkserver, started on first use with those modules
preloaded (bench/_preload.py: a module that fails to import is left to the child, which
then fails with its own error); it never runs a loader or touches CUDA, so every child
starts clean. A server that cannot start or answer makes the round run in a fresh
interpreter instead. A child's stdout and stderr go to files, which the parent follows
while the child lives: there is no pipe for a chatty child to fill, and the wait ends when
the child does.

A round that writes nothing, to stdout or stderr, for `STALL_S` seconds (no step, no
progress line) is taken for a hang: it is killed and fails with a line saying so, and the
benchmark goes on with the other rows.
"""
from __future__ import annotations

import codecs
import importlib
import importlib.util
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

PRELOAD = ["torch", "torchvision", "nvidia.dali", "bench.run_one"]
POLL_S = 0.05
STALL_S = 600.0  # silence, in seconds, after which a round is stopped
STALLED = 124  # the exit code of a stopped round (as timeout(1) has it)


def broken_environment() -> str | None:
    """None when torch, torchvision and DALI import and run here; else a few lines naming
    the package that does not, its error and the pip command that fixes it. A benchmark
    stops with them before it forks anything (the server imports those packages)."""
    from torch_bridge.tools.doctor import environment_problem
    row = environment_problem()
    if row is None:
        return None
    return (f"{row.name}: {row.detail}\nfix: {row.advice}\n"
            f"(python -m torch_bridge.doctor checks the whole environment)")


def stalled_line(seconds: float) -> str:
    """The line a stopped round's stderr ends with."""
    return f"stopped: no output for {seconds:.0f} s (a hang?)"


def _context():
    """The forkserver context with PRELOAD, or None where there is none (not Linux)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return None
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["bench._preload"])
    return context


def as_fresh_interpreter() -> None:
    """The default start method again, as a fresh interpreter has it."""
    multiprocessing.set_start_method(None, force=True)


def _child(entry: str, argv: list[str], out: str, err: str) -> None:
    """In the forked process: stdout and stderr to the files, the start method a fresh
    interpreter has (a forkserver's child inherits "forkserver", which would start the
    loaders' workers from a bare server that imports torch again), then `entry`'s main."""
    as_fresh_interpreter()
    for fd, path in ((1, out), (2, err)):
        handle = os.open(path, os.O_WRONLY | os.O_APPEND)
        os.dup2(handle, fd)
        os.close(handle)
    code = 1
    try:
        code = importlib.import_module(entry).main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    except BaseException:  # noqa: B036  (printed as a fresh interpreter would)
        traceback.print_exc()
    finally:  # the measure is taken: end the loaders' workers, then this process at once
        for worker in multiprocessing.active_children():
            worker.terminate()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _events(lines: list[str], on_step, found: dict) -> None:
    """run_one's JSON lines: each step event to `on_step`, the result into found["result"]."""
    for line in lines:
        if not line.startswith("{"):
            continue
        event = json.loads(line)
        if event["event"] == "step":
            on_step(event["done"])
        elif event["event"] == "result":
            found["result"] = event


def run_measure(argv: list[str], on_step, entry: str = "bench.run_one",
                stall_s: float = STALL_S) -> tuple[dict | None, int, str] | None:
    """Run `main(argv)` of the module `entry` (run_one's by default) in a process forked
    from the server; return (its result event, exit code, stderr text), or None where there
    is no fork server (the caller then starts a fresh interpreter). `on_step(done)` follows
    the child's step events; a child silent for `stall_s` seconds is killed (exit code
    STALLED)."""
    context = _context()
    if context is None:
        return None
    with tempfile.TemporaryDirectory(prefix="compare-") as tmp:
        out, err = Path(tmp, "stdout"), Path(tmp, "stderr")
        out.touch()
        err.touch()
        proc = context.Process(target=_child, args=(entry, argv, str(out), str(err)), daemon=False)
        try:
            proc.start()
        except (OSError, EOFError):  # no server here, or it died: a fresh interpreter
            return None
        found: dict = {}
        partial = ""
        heard, size = time.monotonic(), -1
        with open(out) as stream:
            while True:
                alive = proc.is_alive()  # before reading: nothing written after is missed
                chunk = stream.read()
                partial += chunk
                *lines, partial = partial.split("\n")
                _events(lines, on_step, found)
                if not alive:
                    break
                now = err.stat().st_size
                if chunk or now != size:
                    heard, size = time.monotonic(), now
                elif time.monotonic() - heard > stall_s:
                    proc.kill()
                    proc.join()
                    return found.get("result"), STALLED, (
                        err.read_text(errors="replace") + "\n" + stalled_line(stall_s))
                time.sleep(POLL_S)
        _events([partial], on_step, found)
        proc.join()
        return found.get("result"), proc.exitcode, err.read_text(errors="replace")


def run_round(argv: list[str], on_step, entry: str = "bench.run_one",
              stall_s: float = STALL_S) -> tuple[dict | None, int, str]:
    """One measuring round of the script `entry` (run_one's by default) with `argv`: forked
    from the server where there is one, else the script in a fresh interpreter. Returns (its
    result event, exit code, stderr text); a round silent for `stall_s` seconds is stopped."""
    launched = run_measure(argv, on_step, entry, stall_s)
    if launched is not None:
        return launched
    script = importlib.util.find_spec(entry).origin
    return run_child([sys.executable, str(script), *argv], on_step, stall_s)


def run_child(cmd: list[str], on_step, stall_s: float = STALL_S
              ) -> tuple[dict | None, int, str]:
    """Run one measuring process; return (its result event, exit code, stderr text).

    stderr is drained by a thread while stdout is read, so a child that writes a lot to
    stderr (warnings, a traceback per bad sample) cannot fill the pipe and block. A child
    silent on both for `stall_s` seconds is killed (exit code STALLED).
    """
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err_chunks: list[str] = []
    heard = [time.monotonic()]

    def drain() -> None:  # what has arrived, as it arrives (a progress line has no newline)
        decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
        for chunk in iter(lambda: proc.stderr.buffer.read1(65536), b""):
            err_chunks.append(decode(chunk))
            heard[0] = time.monotonic()

    def watch() -> None:
        while proc.poll() is None:
            if time.monotonic() - heard[0] > stall_s:
                stopped.set()
                proc.kill()
                return
            time.sleep(POLL_S)

    stopped = threading.Event()
    threads = [threading.Thread(target=f, daemon=True) for f in (drain, watch)]
    for thread in threads:
        thread.start()
    found: dict = {}
    for line in proc.stdout:
        heard[0] = time.monotonic()
        _events([line], on_step, found)
    code = proc.wait()
    threads[0].join()
    if stopped.is_set():
        return found.get("result"), STALLED, "".join(err_chunks) + "\n" + stalled_line(stall_s)
    return found.get("result"), code, "".join(err_chunks)

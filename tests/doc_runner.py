"""A fork server for tests/test_doc_blocks.py: imports torch, DALI and the project once, then
runs each request (a script file or a module, with its argv) in a fresh forked process, so a
documentation block costs its own work, not the imports. One JSON request per stdin line:
{"kind": "path" | "module", "target", "argv", "cwd", "log", "env", "timeout"}; one JSON
answer per line: {"rc": exit status, or -9 when the timeout killed it}."""
from __future__ import annotations

import json
import os
import runpy
import signal
import sys
import time
import traceback


def _child(req: dict) -> None:
    code = 1
    try:
        os.setpgid(0, 0)
        os.chdir(req["cwd"])
        fd = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.environ.update(req.get("env", {}))
        sys.argv = list(req["argv"])
        if req["kind"] == "module":
            runpy.run_module(req["target"], run_name="__main__", alter_sys=True)
        else:
            sys.path.insert(0, os.path.dirname(os.path.abspath(req["target"])))
            runpy.run_path(req["target"], run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: B036  (everything a block raises is its failure)
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _wait(pid: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)
    return -9


def main() -> None:
    import nvidia.dali  # noqa: F401  (the imports every block pays for, once)
    import torch  # noqa: F401
    import torchvision  # noqa: F401

    import dali_pipes  # noqa: F401
    import torch_bridge  # noqa: F401
    sys.stdout.write(json.dumps({"ready": True}) + "\n")
    sys.stdout.flush()
    for line in sys.stdin:
        req = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(req)
        sys.stdout.write(json.dumps({"rc": _wait(pid, req["timeout"])}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()

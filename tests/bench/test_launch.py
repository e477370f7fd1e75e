"""bench/launch.py: compare.py's measuring processes forked from a server with torch and
DALI imported; each still its own process, starting its loaders' workers as a fresh
interpreter would; a round silent past its bound is stopped, on both paths."""
import multiprocessing
import sys

import pytest

from bench.launch import as_fresh_interpreter, run_measure
from tests.conftest import write_image_folder


def _argv(backend: str, data, steps: int = 2) -> list[str]:
    return ["--backend", backend, "--modality", "image", "--data", str(data),
            "--batch-size", "4", "--steps", str(steps), "--warmup", "1", "--device", "cpu",
            "--size", "32", "--workers", "1", "--prebuilt"]


def test_a_round_reports_its_steps_and_result_and_a_failure_its_cause(tmp_path):
    data = write_image_folder(tmp_path / "d", n_images=12, n_classes=2)
    steps: list[int] = []
    result, code, err = run_measure(_argv("classic", data, steps=6), steps.append)
    assert code == 0, err[-2000:]
    assert steps == [5, 6]  # every fifth step and the last (run_one's events)
    assert result["event"] == "result" and result["samples"] == 24
    assert result["cpu_ms_per_sample"] > 0
    result, code, err = run_measure(_argv("torch", tmp_path / "empty"), steps.append)
    assert result is None and code == 1
    assert "Traceback" in err and err.rstrip().splitlines()[-1].endswith("does not exist")


def _start_method(queue) -> None:
    inherited = multiprocessing.get_start_method()
    as_fresh_interpreter()
    queue.put((inherited, multiprocessing.get_start_method()))


def test_a_forked_round_starts_workers_as_a_fresh_interpreter():
    """A forkserver's child inherits "forkserver" as its default start method: its
    DataLoader workers would start from a bare server, importing torch again (seconds each
    round, and a different set-up from a user's script)."""
    context = multiprocessing.get_context("forkserver")
    queue = context.Queue()
    process = context.Process(target=_start_method, args=(queue,))
    process.start()
    inherited, fresh = queue.get(timeout=120)
    process.join(timeout=60)
    assert inherited == "forkserver"
    assert fresh == multiprocessing.get_all_start_methods()[0]  # the platform's default


def test_without_a_fork_server_a_round_runs_the_script_in_a_fresh_interpreter(
        tmp_path, monkeypatch):
    from bench import launch
    monkeypatch.setattr(launch, "_context", lambda: None)  # as where there is no forkserver
    data = write_image_folder(tmp_path / "d", n_images=8, n_classes=2)
    steps: list[int] = []
    result, code, err = launch.run_round(_argv("classic", data), steps.append)
    assert code == 0, err[-2000:]
    assert steps == [2] and result["samples"] == 8


def _quiet(seconds: float, every: float, forked: bool, stall_s: float):
    """quiet_main's round, forked from the server or in a fresh interpreter."""
    from bench import launch
    argv = [str(seconds), str(every)]
    if forked:
        return launch.run_measure(argv, lambda done: None, "tests.bench.quiet_main", stall_s)
    return launch.run_child([sys.executable, "-m", "tests.bench.quiet_main", *argv],
                            lambda done: None, stall_s)


@pytest.mark.parametrize("forked", [True, False])
def test_a_silent_round_is_stopped_and_a_working_one_is_not(forked):
    from bench.launch import STALLED, stalled_line
    result, code, err = _quiet(60, 0, forked, stall_s=1.5)  # silent: a hang
    assert result is None and code == STALLED
    assert err.rstrip().endswith(stalled_line(1.5))
    result, code, err = _quiet(3, 0.3, forked, stall_s=1.5)  # a progress line, no newline
    assert code == 0 and "working" in err and "stopped" not in err

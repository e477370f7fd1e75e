"""Shared fixtures: small real data sets written into temporary folders, the backends.

The modality kinds, their tiny data writers and the options that keep their batches small
come from `torch_bridge.registry`, the tiny data sets from `torch_bridge.testing.tiny` (the
loader contract's own, so both write each once); `backend` runs a test once per entry of
BACKENDS."""
from __future__ import annotations

import faulthandler
import functools
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from dali_pipes.sample_data.tiny_data import write_image_folder  # noqa: F401  (tests import it from here)
from torch_bridge import registry
from torch_bridge.testing.tiny import BACKENDS, TinyData, tiny_data_set  # noqa: F401  (as above)

try:
    import torch
    HAS_CUDA = torch.cuda.is_available()
except ImportError:  # pragma: no cover
    HAS_CUDA = False


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    """Each backend of make_loader in turn."""
    return request.param


@pytest.fixture
def native_ops(request) -> None:
    """For a test parametrized with `fused`: where it is True, the native operators must be
    built and loaded (dali_pipes.native), unless DALI_PIPES_NATIVE=0 turned them off (then
    the test is skipped). A machine without a compiler fails here, saying why."""
    from dali_pipes import native

    params = getattr(getattr(request.node, "callspec", None), "params", {})
    if not params.get("fused", True):
        return
    if not native.enabled():
        pytest.skip("DALI_PIPES_NATIVE is off")
    for name in native.OPERATORS:
        if (native.library(name) is None and name == "decode_crop_op"
                and "jpeglib.h" in (native.why_not(name) or "")):
            continue  # libjpeg-turbo's headers missing: its own tests skip, saying so
        assert native.library(name), native.why_not(name)


MAX_WORKERS = 4  # pytest-xdist processes for the whole suite, at most


def suite_workers() -> int:
    """One worker per core and one more, up to MAX_WORKERS: many tests wait on child
    processes, local servers and workers settling, which left about a fifth of two cores
    idle with one worker per core."""
    return min(MAX_WORKERS, len(os.sched_getaffinity(0)) + 1)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """The whole suite (`python -m pytest`, no paths: the README's and CI's command) runs in
    parallel, `suite_workers()` pytest-xdist workers, idle workers taking queued
    tests from busy ones (worksteal). Runs of chosen files stay in one process: starting
    the workers costs more than such a run. `-n N` (`-n 0`: one process) always wins, and
    without pytest-xdist the suite runs in one process."""
    option = config.option
    if (getattr(option, "numprocesses", 0) is None and not hasattr(config, "workerinput")
            and config.args_source is pytest.Config.ArgsSource.TESTPATHS):
        option.numprocesses = suite_workers()
        if option.dist == "no":
            option.dist = "worksteal"


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's
def pytest_xdist_setupnodes(config, specs):
    """Before the pytest-xdist workers start: the native operators missing from the cache
    are compiled once, here (dali_pipes.native.prebuild). Builds take no lock, so workers
    that each found the cache without them would each compile every operator, at the same
    time, inside whichever test came first; cached, this takes well under a second."""
    from dali_pipes.native.prebuild import prebuild

    reporter = config.pluginmanager.get_plugin("terminalreporter")
    prebuild(say=reporter.write_line if reporter is not None else print)


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords and not HAS_CUDA:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def image_folder(tmp_path_factory) -> Path:
    """37 JPEGs in 3 classes: not a multiple of the batch sizes the tests use."""
    return write_image_folder(tmp_path_factory.mktemp("images"), n_images=37, n_classes=3)


@contextmanager
def bounded(seconds: float) -> Iterator[None]:
    """A bound on a script's main run in the test process (where a subprocess would have had
    a timeout): past `seconds`, every thread's traceback is printed and the process exits,
    which fails the test (pytest-xdist reports its worker as crashed) instead of hanging."""
    # the process's own stderr: pytest's capture replaces sys.stderr with a file without a fd
    faulthandler.dump_traceback_later(seconds, exit=True, file=sys.__stderr__)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def undefined_quant_table(data: bytes) -> bytes:
    """A JPEG whose header passes cheap checks but that every decoder rejects: its frame
    header names quantization table 9, which is never defined."""
    out = bytearray(data)
    sof = out.index(b"\xff\xc0")
    out[sof + 12] = 9
    return bytes(out)


# Every modality kind on tiny data, for checks run over all of them (resume, fingerprint, bad
# input, soak). "frames" is the video modality over extracted frame folders.
MODALITY_KINDS = tuple(registry.KINDS)


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    """`tiny_data(kind)` -> TinyData for kind in MODALITY_KINDS, written once per session."""
    return functools.partial(tiny_data_set, tmp_path_factory)

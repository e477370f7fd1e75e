"""What the fork server of bench/launch.py imports before it forks any measuring process:
each module of `bench.launch.PRELOAD`, once. multiprocessing's server survives only an
ImportError of a module it preloads; any other error (a torchvision built for another torch
raises RuntimeError) would end it, and every fork after it with an EOFError. Here a module
that fails is left out instead: each measuring process then imports it itself and fails with
its own error, in its own stderr, which the benchmark reports in one line."""
import contextlib
import importlib

from bench.launch import PRELOAD

for _name in PRELOAD:
    with contextlib.suppress(Exception):  # the measuring process reports it (see above)
        importlib.import_module(_name)

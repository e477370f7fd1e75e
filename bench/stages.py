"""Per-stage timing for `compare.py --stages` / `run_one.py --stages` (read, decode+augment,
transfer), measured from outside the library: the benchmark child wraps a few methods of
the loader it built and never changes what they do.

Our DALI backend (all in the consumer's process):
  read_ms           time in the modality's `feeds()` per batch: reading the files, header
                    checks and the per-sample parameters (main thread, wall time)
  decode_augment_ms time the consumer blocks in DALI's `pipe.outputs()` per batch. DALI
                    decodes and augments in its own threads while the consumer does other
                    work, so this is the part of decode+augment NOT hidden behind the rest;
                    DALI 2.4 reports no per-operator times (`executor_statistics()` holds
                    memory statistics only, and is empty on the CPU backend)
  transfer_ms       time in `dali_to_torch` + `attach_meta` per batch

The torch reference backend (DataLoader workers, image modality split further):
  read_ms           worker time in the image source's `read` per batch (file read and
                    header checks), summed over the samples of a batch (images only)
  decode_ms         worker time in torchvision's `decode_image` per batch (images only)
  augment_ms        the rest of the worker's `load()` per batch: crop parameters, resized
                    crop and flip (images only)
  decode_augment_ms decode_ms + augment_ms (other modalities: all of `load()`, read included)
  transfer_ms       consumer time in next(loader) per batch: worker-to-main transfer, the
                    batch-level normalization and any wait for a worker; nothing finer is
                    measurable from outside DataLoader
Worker times are CPU work summed over the samples of a batch; with N workers running in
parallel the wall time per batch can be up to N times smaller.

Every other backend gets the same keys with None.
"""
from __future__ import annotations

import functools
import multiprocessing
import time
import weakref

STAGE_KEYS = ("read_ms", "decode_augment_ms", "transfer_ms")
_TORCH_SLOTS = ("read", "decode", "load", "samples")


def empty_stages() -> dict:
    """The stages dict of a backend where nothing could be measured."""
    return {**{key: None for key in STAGE_KEYS}, "decode_ms": None, "augment_ms": None}


def _timed(fn, add):
    """fn, with its wall time handed to add(seconds)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            add(time.perf_counter() - t0)
    return wrapper


class _Totals:
    """Seconds and call counts per stage, in this process."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def adder(self, name: str):
        def add(seconds: float) -> None:
            self.seconds[name] = self.seconds.get(name, 0.0) + seconds
            self.calls[name] = self.calls.get(name, 0) + 1
        return add

    def per_call_ms(self, name: str) -> float | None:
        calls = self.calls.get(name, 0)
        return self.seconds[name] / calls * 1e3 if calls else None


class DaliStages:
    """Wraps feeds(), pipe.outputs(), dali_to_torch and attach_meta of a DaliEngine."""

    def __init__(self, loader):
        import torch_bridge.engines.dali as engine_module

        engine = loader.engine
        self.totals = _Totals()
        self.batches = 0
        modality = engine.modality
        modality.feeds = _timed(modality.feeds, self.totals.adder("read"))
        transfer = self.totals.adder("transfer")

        def add_transfer(seconds: float) -> None:  # one batch = several calls: sum them
            transfer(seconds)
            self.totals.calls["transfer"] -= 1
        engine_module.dali_to_torch = _timed(engine_module.dali_to_torch, add_transfer)
        engine_module.attach_meta = _timed(engine_module.attach_meta, add_transfer)
        build, outputs_add = engine.build, self.totals.adder("outputs")
        timed: weakref.WeakSet = weakref.WeakSet()  # the pipelines whose outputs() are wrapped

        def build_timed():
            pipe = build()
            if pipe not in timed:  # a new pipeline after a failure
                pipe.outputs = _timed(pipe.outputs, outputs_add)
                timed.add(pipe)
            return pipe
        engine.build = build_timed

    def reset(self) -> None:
        self.totals.reset()

    def summary(self, steps: int, samples: int, waits_s: list[float]) -> dict:
        t = self.totals
        transfer = t.seconds.get("transfer")
        return {**empty_stages(), "read_ms": t.per_call_ms("read"),
                "decode_augment_ms": t.per_call_ms("outputs"),
                "transfer_ms": transfer / steps * 1e3 if transfer is not None and steps
                else None}


class TorchStages:
    """Times the workers' read / decode / load through memory shared with the forked
    workers; must be set up before the first batch is asked for (workers start then)."""

    def __init__(self, loader):
        engine = loader.engine
        self.shared = multiprocessing.get_context("fork").Array("d", len(_TORCH_SLOTS))
        dataset = engine.loader.dataset
        modality = dataset.modality
        source = getattr(modality, "source", None)
        self.has_read = getattr(source, "data_kind", None) == "image"
        if self.has_read:
            source.read = _timed(source.read, self._adder("read"))
        import torchvision.io  # decode_rgb imports decode_image from here per call
        torchvision.io.decode_image = _timed(torchvision.io.decode_image, self._adder("decode"))
        load_add, samples_add = self._adder("load"), self._adder("samples")
        load = modality.load

        def load_timed(*args):
            t0 = time.perf_counter()
            out = load(*args)
            load_add(time.perf_counter() - t0)
            samples_add(1.0)
            return out
        modality.load = load_timed

    def _adder(self, slot: str):
        i = _TORCH_SLOTS.index(slot)

        def add(value: float) -> None:
            with self.shared.get_lock():
                self.shared[i] += value
        return add

    def reset(self) -> None:
        with self.shared.get_lock():
            for i in range(len(_TORCH_SLOTS)):
                self.shared[i] = 0.0

    def summary(self, steps: int, samples: int, waits_s: list[float]) -> dict:
        with self.shared.get_lock():
            read, decode, load, loaded = self.shared[:]
        out = empty_stages()
        if waits_s:
            out["transfer_ms"] = sum(waits_s) / len(waits_s) * 1e3
        if not loaded or not steps:
            return out
        per_batch = samples / steps / loaded * 1e3  # seconds summed over samples -> ms/batch
        out["read_ms"] = read * per_batch if self.has_read else None
        out["decode_augment_ms"] = (load - read) * per_batch
        if decode:
            out["decode_ms"] = decode * per_batch
            out["augment_ms"] = (load - read - decode) * per_batch
        return out


def instrument(backend: str, loader):
    """A stage timer for this loader, or None where the backend is not instrumented."""
    if backend == "dali":
        return DaliStages(loader)
    if backend == "torch":
        return TorchStages(loader)
    return None


def median_stages(rounds: list[dict]) -> dict:
    """Each stage's median over the rounds of `compare.py --repeats` (None stays None)."""
    import numpy as np
    out = {}
    for key in rounds[0]:
        values = [r[key] for r in rounds if r.get(key) is not None]
        out[key] = float(np.median(values)) if values else None
    return out


def print_stages(report: dict) -> None:
    """The second table of `compare.py --stages`: ms per batch in each stage."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"stages per batch (ms, mean over {report['settings']['steps']} "
                        "timed steps; '-' not measured)")
    for name in ("backend", "read", "decode+augment", "decode", "augment", "transfer",
                 "wait p50"):
        table.add_column(name, justify="left" if name == "backend" else "right")
    for r in report["results"]:
        s = r.get("stages") or empty_stages()
        table.add_row(r["backend"], *(_fmt(s.get(key)) for key in (
            "read_ms", "decode_augment_ms", "decode_ms", "augment_ms", "transfer_ms")),
            _fmt(r.get("wait_ms_p50")))
    console = Console(width=None if Console().is_terminal else 120)
    console.print(table)
    console.print("dali: read = feeds() in the main thread; decode+augment = time blocked in "
                  "pipe.outputs() (DALI's threads overlap the rest); transfer = dali_to_torch "
                  "+ attach_meta.")
    console.print("torch: read / decode / augment = worker time summed over a batch's "
                  "samples (workers run in parallel); transfer = time in next(loader). "
                  "See bench/stages.py.")


def _fmt(value) -> str:
    return "-" if value is None else f"{value:,.2f}"

"""Your own Dataset, DALI's decoding: two ways to run our image graph on a user's Dataset.

  (a) adapter  integrations.adapter.dali_from_dataset: a DataLoader reads (bytes, label)
               items in workers; the main thread computes crop parameters for the whole
               batch and feeds the graph with feed_input/schedule_run (DaliEngine).
  (b) proxy    DALI 2.4's nvidia.dali.plugin.pytorch.experimental.proxy (DALIServer): each
               worker computes its sample's parameters and calls `server.proxy(...)`; the
               collated references are sent to a thread in the main process that feeds and
               runs the same graph; the proxy DataLoader swaps the references for outputs.

Both read the same Dataset (file bytes + label), with the same batch size, workers, DALI
threads and parameters (seed, epoch, index), so they return the same pixels; the run checks
that on the first batch. The built-in sample set is 640 JPEGs of 500x375.

    python bench/bench_adapter.py [--batch-size 64] [--workers 2] [--rounds 8] [--json PATH]

Epochs of (a) and (b) alternate after one warm-up epoch each (a busy machine slows both
alike); samples/s is the median over rounds, "cpu s/1k" the CPU seconds of the process and
its workers per 1000 samples.

Result on 2 CPU cores (DALI 2.4, batch 64, 2 workers): the two are level within noise
(about 650-710 samples/s each in three runs). (b) runs on a machine without a GPU; what it
saves is the output copy (it wraps DALI's output with DLPack, while DaliEngine's
dali_to_torch copies it; without that copy (a) measured about 7% faster than (b)).
(a) is kept as the public API because, at equal speed, it is the correct one to build on:
  - a batch that fails to decode is decoded again sample by sample (DaliEngine) and the
    error names the dataset index; (b) reports "Failed to decode sample #1" (a position
    in the batch) and its pipeline is left invalid ("Current pipeline object is no longer
    valid") for the rest of the run;
  - (b) needs the epoch inside the workers (here: (epoch, index) sampler keys), imports
    that rewrite torch's global default_collate_fn_map, and a server whose stop waits up
    to 5 s (its queue poll timeout);
  - (a) keeps DaliEngine's prefetch accounting, abandoned-pass draining and GPU path.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset, Sampler, SequentialSampler

from dali_pipes.formats.image_kind import prepare_image
from dali_pipes.geometry.draws import image_params
from dali_pipes.pipelines.config import load_config
from dali_pipes.pipelines.image import build_image_pipeline
from dali_pipes.sources import ImageFolderSource
from torch_bridge.integrations.adapter import as_jpeg_array, dali_from_dataset


class FileDataset(Dataset):
    """What a user already has: (encoded bytes, label) read from disk per item."""

    def __init__(self, files: list[str], labels: np.ndarray):
        self.files, self.labels = files, labels

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int):
        with open(self.files[index], "rb") as f:
            return f.read(), int(self.labels[index])


class _EpochSampler(Sampler):
    """Yields (epoch, index) keys so persistent proxy workers know the current epoch."""

    def __init__(self, sampler: Sampler):
        self.sampler, self.epoch = sampler, 0

    def __len__(self) -> int:
        return len(self.sampler)

    def __iter__(self):
        return ((self.epoch, index) for index in self.sampler)


class _ProxyItems(Dataset):
    """(b): one item = DALI output references for the sample, its label and index."""

    def __init__(self, dataset: Dataset, server, *, seed: int, size: int, train: bool):
        self.dataset, self.proxy = dataset, server.proxy
        self.seed, self.size, self.train = seed, size, train

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, key):
        epoch, index = key
        data, label = self.dataset[index]
        jpeg, (h, w) = prepare_image(as_jpeg_array(data), f"item {index}")
        window, flip = image_params(self.seed, epoch, np.array([index]), np.array([h]),
                                    np.array([w]), size=self.size, train=self.train)
        window = window[0].astype(np.int32)
        image = self.proxy(jpegs=jpeg, anchor=window[:2], shape=window[2:],
                           mirror=np.int32(flip[0]))
        return image, label, index


class ProxyLoader:
    """(b): DALIServer + its DataLoader yielding the adapter's batch schema."""

    def __init__(self, dataset: Dataset, *, batch_size: int, workers: int, seed: int = 0,
                 size: int = 224, train: bool = True, config=None):
        from nvidia.dali.plugin.pytorch.experimental import proxy as dali_proxy

        pipe = build_image_pipeline(device="cpu", batch_size=batch_size, size=size,
                                    config=load_config(config))
        pipe.build()
        self.server = dali_proxy.DALIServer(pipe)
        self.sampler = _EpochSampler(SequentialSampler(dataset))
        items = _ProxyItems(dataset, self.server, seed=seed, size=size, train=train)
        self.loader = dali_proxy.DataLoader(self.server, items, batch_size=batch_size,
                                            sampler=self.sampler, num_workers=workers,
                                            persistent_workers=workers > 0)
        self.server.start_thread()

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self):
        for image, label, index in self.loader:
            yield {"image": image, "label": label, "index": index}
        self.sampler.epoch += 1

    def close(self) -> None:
        self.server.stop_thread()  # waits up to 5 s: DALIServer polls its queue so long


def _cpu_seconds() -> float:
    """CPU time of this process and its live children (DataLoader workers)."""
    import psutil

    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.NoSuchProcess:
            pass
    return total


def _time_epoch(loader) -> tuple[int, float, float]:
    """(samples, wall seconds, CPU seconds) of one full epoch."""
    start, cpu, samples = time.perf_counter(), _cpu_seconds(), 0
    for batch in loader:
        samples += len(batch["index"])
    return samples, time.perf_counter() - start, _cpu_seconds() - cpu


def _warm_up(loader) -> dict:
    """One full epoch, not timed; returns its first batch for the output check."""
    first = None
    for batch in loader:
        first = first or {k: v.clone() for k, v in batch.items()}
    return first


def _same_output(a: dict, b: dict) -> bool:
    return (torch.equal(a["index"], b["index"]) and torch.equal(a["label"], b["label"])
            and torch.allclose(a["image"], b["image"], atol=1e-5))


def _build(name: str, dataset: Dataset, args):
    if name == "adapter":
        return dali_from_dataset(dataset, batch_size=args.batch_size,
                                 num_workers=args.workers, config=args.config)
    return ProxyLoader(dataset, batch_size=args.batch_size, workers=args.workers,
                       config=args.config)


def run(dataset: Dataset, args) -> list[dict]:
    """Warm both up, then alternate timed epochs; a result (or the error) per method."""
    loaders, results, firsts = {}, {}, {}
    for name in ("adapter", "proxy"):
        results[name] = {"method": name, "rates": [], "cpu": [], "error": None}
        try:
            loaders[name] = _build(name, dataset, args)
            firsts[name] = _warm_up(loaders[name])
        except Exception as exc:  # report why a method cannot run here, keep the other
            results[name]["error"] = f"{type(exc).__name__}: {exc}"
            if name in loaders:
                loaders.pop(name).close()  # (b)'s server thread would keep the process
    for _ in range(args.rounds):
        for name, loader in loaders.items():
            samples, seconds, cpu = _time_epoch(loader)
            results[name]["rates"].append(samples / seconds)
            results[name]["cpu"].append(cpu / samples * 1000)
    if len(firsts) == 2:
        results["proxy"]["same_as_adapter"] = _same_output(firsts["adapter"], firsts["proxy"])
    for loader in loaders.values():
        loader.close()
    return [_summary(r) for r in results.values()]


def _summary(result: dict) -> dict:
    rates, cpu = result.pop("rates"), result.pop("cpu")
    result["cpu_s_per_1000"] = statistics.median(cpu) if cpu else None
    result["samples_per_s"] = statistics.median(rates) if rates else None
    result["samples_per_s_min"] = min(rates) if rates else None
    result["samples_per_s_max"] = max(rates) if rates else None
    return result


def _table(results: list[dict]) -> str:
    lines = [f"{'method':<9} {'samples/s':>10} {'min':>8} {'max':>8} {'cpu s/1k':>9}  note"]
    for r in results:
        if r["error"]:
            lines.append(f"{r['method']:<9} {'-':>10} {'-':>8} {'-':>8} {'-':>9}  "
                         f"cannot run: {r['error']}")
            continue
        note = "" if "same_as_adapter" not in r else (
            "same pixels as adapter" if r["same_as_adapter"] else "OUTPUT DIFFERS from adapter")
        lines.append(f"{r['method']:<9} {r['samples_per_s']:>10.1f} "
                     f"{r['samples_per_s_min']:>8.1f} {r['samples_per_s_max']:>8.1f} "
                     f"{r['cpu_s_per_1000']:>9.2f}  {note}")
    return "\n".join(lines)


def _dali_version() -> str:
    import nvidia.dali

    return nvidia.dali.__version__


def _dataset(path: str | None) -> FileDataset:
    from dali_pipes.sample_data.sample_images import image_dataset

    source = ImageFolderSource(path or image_dataset())
    return FileDataset(list(source.files), source.labels)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="folder of class folders of JPEGs (default: sample set)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2, help="DataLoader worker processes")
    parser.add_argument("--rounds", type=int, default=8, help="timed epochs per method")
    parser.add_argument("--config", default=None, help="decode preset (default: default)")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    dataset = _dataset(args.data)
    results = run(dataset, args)
    print(f"{len(dataset)} images, batch {args.batch_size}, {args.workers} workers, "
          f"{load_config(args.config).threads()} DALI threads, CPU")
    print(_table(results))
    if args.json:
        report = {"device": "cpu", "batch_size": args.batch_size, "workers": args.workers,
                  "num_samples": len(dataset), "results": results,
                  "env": {"python": platform.python_version(), "torch": torch.__version__,
                          "dali": _dali_version(), "cpus": len(os.sched_getaffinity(0))}}
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

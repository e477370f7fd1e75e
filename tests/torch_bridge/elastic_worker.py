"""One rank of the elastic resume check, started by tests/torch_bridge/test_elastic.py under
`python -m torch.distributed.run --standalone --nproc_per_node=2` (CPU, gloo).

Not a test module. For every case of the JSON spec (one modality, two backends):

- "2->1": both ranks (rank and world size from torch.distributed) run a whole pass of the
  epoch, then its first batch, and save their states; after a barrier one rank makes a
  1-rank loader (rank=0, world_size=1), loads the other rank's state and yields the rest.
- "1->2": one rank runs a 1-rank loader the same way and saves; after the barrier both
  ranks load that state into 2-rank loaders and yield the rest.

The first backend of a case saves and resumes "2->1", the second "1->2". Each rank writes
`<out>/rank<r>.json`: per case and direction the (index, checksum) pairs of the whole pass
(first draws only), of the first batch and of the resumed rest, and the resumed `len()`.
"""
from __future__ import annotations

import argparse
import json
import sys
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

from torch_bridge import make_loader, registry  # noqa: E402


def _pairs(loader, limit: int | None = None) -> list[tuple[int, float]]:
    """(index, checksum of its main tensor, the graph's first output) of each sample of a
    pass (`limit` batches)."""
    name, out = registry.get(loader.modality).batch_schema.outputs[0], []
    for count, batch in enumerate(loader):
        sums = batch[name].to(torch.float64).flatten(1).sum(1).tolist()
        out += zip(batch["index"].tolist(), sums, strict=True)
        if count + 1 == limit:
            break
    return out


def _make(case: dict, backend: str, **layout):
    options = dict(case["options"], backend=backend, batch_size=case["batch_size"], seed=5,
                   device="cpu", **layout)
    if backend == "torch":
        options["reference"] = {"num_workers": 0}
    return make_loader(case["modality"], case["data"], **options)


def _save_head(loader, epoch: int, path: Path, rank: int, world: int) -> dict:
    """A whole pass (first draws: global position rank + world * t below num_samples),
    then the first batch again, its state saved to `path`."""
    loader.set_epoch(epoch)
    first = [p for t, p in enumerate(_pairs(loader))
             if rank + world * t < loader.plan.num_samples]
    loader.set_epoch(epoch)
    head = _pairs(loader, limit=1)
    torch.save(loader.state_dict(), path)
    loader.close()
    return {"first": first, "head": head, "num_samples": loader.plan.num_samples}


def _resume(loader, epoch: int, path: Path) -> dict:
    loader.load_state_dict(torch.load(path))
    loader.set_epoch(epoch)  # what a resumed training loop does; keeps the position
    result = {"len": len(loader), "rest": _pairs(loader),
              "num_samples": loader.plan.num_samples}
    loader.close()
    return result


def _run(spec: dict, out: Path, rank: int) -> dict:
    epoch, report = spec["epoch"], {}
    for k, case in enumerate(spec["cases"]):  # saving: 2 ranks, and 1 rank on one of them
        kind, (first, second) = case["kind"], case["backends"]
        report[kind] = {"2->1": _save_head(_make(case, first), epoch,
                                           out / f"{kind}-2-rank{rank}.pt", rank, 2),
                        "1->2": {}}
        if rank == k % 2:
            report[kind]["1->2"] = _save_head(_make(case, second, rank=0, world_size=1),
                                              epoch, out / f"{kind}-1.pt", 0, 1)
    dist.barrier()
    for k, case in enumerate(spec["cases"]):  # resuming: 2 ranks, and 1 rank on the other
        kind, (first, second) = case["kind"], case["backends"]
        report[kind]["1->2"].update(_resume(_make(case, second), epoch, out / f"{kind}-1.pt"))
        if rank == (k + 1) % 2:  # a state saved by the other rank
            report[kind]["2->1"].update(_resume(_make(case, first, rank=0, world_size=1),
                                                epoch, out / f"{kind}-2-rank{k % 2}.pt"))
    return report


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("spec", type=Path, help="JSON: {'epoch': int, 'cases': [...]}")
    parser.add_argument("out", type=Path, help="folder for rank<r>.json and saved states")
    args = parser.parse_args()
    spec = json.loads(args.spec.read_text())
    dist.init_process_group("gloo", timeout=timedelta(seconds=120))
    rank = dist.get_rank()
    report = _run(spec, args.out, rank)  # an exception exits non-zero with its traceback
    (args.out / f"rank{rank}.json").write_text(json.dumps(report))
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""One rank of the distributed loader check, started by tests/torch_bridge/test_distributed.py
under `python -m torch.distributed.run --standalone --nproc_per_node=N` (CPU, gloo).

Not a test module (pytest collects test_*.py only). For every case in the JSON spec and
every backend it runs, on this rank:

- a full pass of epoch `EPOCH` (indices, labels, source ids, a checksum of each sample's
  main tensor), with rank and world size left to make_loader (torch.distributed);
- a pass of the same epoch stopped after `stop_after` batches, its state_dict saved with
  torch.save, and a fresh loader that loads it and yields the rest.

Each rank writes `<out>/rank<r>.json`; the test compares the ranks. Any failure exits
non-zero with a traceback naming the case, so the test can print it.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

from torch_bridge import make_loader, registry  # noqa: E402

EPOCH = 1  # not the default epoch, so set_epoch is exercised
def _records(loader, modality: str, limit: int | None = None) -> dict:
    """Per batch: indices, labels, source ids (when present) and per-sample checksums."""
    out = {"index": [], "label": [], "source_id": [], "checksum": []}
    for count, batch in enumerate(loader):
        out["index"].append(batch["index"].tolist())
        out["label"].append(batch["label"].tolist())
        if "source_id" in batch:
            out["source_id"].append(batch["source_id"].tolist())
        main = batch[registry.get(modality).batch_schema.outputs[0]].to(torch.float64)
        out["checksum"].append(main.flatten(1).sum(1).tolist())
        if limit is not None and count + 1 == limit:
            break  # stop mid-epoch, as a job that is pre-empted would
    return out


def _run_case(case: dict, backend: str, state_dir: Path) -> dict:
    modality, data = case["modality"], case["data"]
    options = dict(case["options"], backend=backend, batch_size=case["batch_size"],
                   seed=case["seed"], device="cpu")
    if backend == "torch":
        options["reference"] = {"num_workers": 0}

    loader = make_loader(modality, data, **options)
    loader.set_epoch(EPOCH)
    full = _records(loader, modality)
    result = {"len": len(loader), "plan_rank": loader.plan.rank,
              "plan_world_size": loader.plan.world_size, "full": full,
              "epoch_after_pass": loader.epoch}

    stop = case["stop_after"]
    loader.set_epoch(EPOCH)
    head = _records(loader, modality, limit=stop)
    state_path = state_dir / f"{case['name']}-{backend}-rank{dist.get_rank()}.pt"
    torch.save(loader.state_dict(), state_path)
    loader.close()

    fresh = make_loader(modality, data, **options)
    fresh.load_state_dict(torch.load(state_path))
    fresh.set_epoch(EPOCH)  # what a resumed training loop does; keeps the position
    result.update(head=head, tail=_records(fresh, modality),
                  state=_plain(torch.load(state_path)), resumed_len=len(fresh))
    fresh.close()
    return result


def _plain(state: dict) -> dict:
    return {k: v for k, v in state.items() if isinstance(v, (int, float, str, bool))}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("spec", type=Path, help="JSON: {'cases': [...], 'backends': [...]}")
    parser.add_argument("out", type=Path, help="folder for rank<r>.json and saved states")
    args = parser.parse_args()
    spec = json.loads(args.spec.read_text())

    dist.init_process_group("gloo", timeout=timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    env = {k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    # Mislead the environment fallback: the loader must take rank and world size from
    # torch.distributed, which is initialised, not from RANK / WORLD_SIZE.
    os.environ["RANK"], os.environ["WORLD_SIZE"] = "0", "1"

    report = {"rank": rank, "world_size": world, "env": env, "cases": {}}
    status = 0
    for case in spec["cases"]:
        for backend in spec["backends"]:
            key = f"{case['name']}/{backend}"
            try:
                report["cases"][key] = _run_case(case, backend, args.out)
            except Exception:  # reported in the JSON and on stderr; the other cases go on
                report["cases"][key] = {"error": traceback.format_exc()}
                print(f"rank {rank}: case {key} failed:\n{traceback.format_exc()}",
                      file=sys.stderr)
                status = 1
    (args.out / f"rank{rank}.json").write_text(json.dumps(report))
    dist.barrier()
    dist.destroy_process_group()
    return status


if __name__ == "__main__":
    sys.exit(main())

"""Train a torchvision classifier with our loader: AMP, channels_last, DDP under torchrun,
checkpoints with the loader's state (exact mid-epoch resume), any recipe preset.

    python examples/train_classifier.py DATA [--backend dali|torch] [--recipe timm-rand-m9]
        [--model resnet18] [--epochs 1] [--steps N] [--batch-size 64] [--size 224]
        [--device cpu|cuda] [--checkpoint ckpt.pt] [--resume]
    torchrun --nproc-per-node 2 examples/train_classifier.py DATA --device cuda ...

DATA is a folder of class folders of images. With no DATA (`-`) the built-in sample set is
used. `--steps` stops after that many optimizer steps in all (for smoke tests); the
checkpoint is written every `--save-every` steps and at the end, and `--resume` continues
from it exactly (model, optimizer, scaler and loader position).
"""
from __future__ import annotations

import argparse
import os
import time

import torch
import torch.nn.functional as F


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()),
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("data", help="a folder of class folders of images; - for the built-in "
                                "sample set")
    p.add_argument("--backend", choices=("dali", "torch"), default="dali",
                   help="the loader's backend")
    p.add_argument("--recipe", default=None,
                   help="a recipe preset (timm-rand-m9, torchvision-v2, ffcv-rn50) or a TOML")
    p.add_argument("--model", default="resnet18", help="a torchvision model name")
    p.add_argument("--epochs", type=int, default=1, help="epochs to train")
    p.add_argument("--steps", type=int, default=None,
                   help="stop after this many optimizer steps in all (None: every epoch)")
    p.add_argument("--batch-size", type=int, default=64, help="samples per batch and rank")
    p.add_argument("--size", type=int, default=224, help="output image side in pixels")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                   help="cpu, cuda or cuda:N")
    p.add_argument("--lr", type=float, default=0.1, help="SGD learning rate")
    p.add_argument("--seed", type=int, default=0, help="seed of the order and augmentation")
    p.add_argument("--checkpoint", default="checkpoint.pt", help="checkpoint file")
    p.add_argument("--save-every", type=int, default=100,
                   help="write the checkpoint every N steps (and at the end)")
    p.add_argument("--log-every", type=int, default=10,
                   help="print progress every N steps (0: once per epoch)")
    p.add_argument("--resume", action="store_true",
                   help="continue exactly from --checkpoint (model, optimizer, loader)")
    return p.parse_args(argv)


def setup(args):
    """(device, rank, world size); initialises the process group under torchrun."""
    world = int(os.environ.get("WORLD_SIZE", 1))
    if world > 1 and not torch.distributed.is_initialized():
        torch.distributed.init_process_group("nccl" if args.device.startswith("cuda")
                                             else "gloo")
    rank = torch.distributed.get_rank() if world > 1 else 0
    device = args.device
    if device == "cuda":
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}"
    return torch.device(device), rank, world


def build(args, device, world):
    """(loader, model, optimizer, scaler, number of classes)."""
    import torchvision

    from torch_bridge import make_loader

    data = args.data
    if data == "-":
        from dali_pipes.sample_data.sample_images import image_dataset
        data = image_dataset()
    loader = make_loader("image", data, backend=args.backend, batch_size=args.batch_size,
                         device=str(device), size=args.size, recipe=args.recipe,
                         memory_format="channels_last", drop_last=True, seed=args.seed)
    classes = len(loader.classes)
    torch.manual_seed(args.seed)  # the same initial weights on every rank and run
    model = torchvision.models.get_model(args.model, num_classes=classes)
    model = model.to(device, memory_format=torch.channels_last)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-5)
    scaler = torch.amp.GradScaler(device.type, enabled=device.type == "cuda")
    return loader, model, opt, scaler, classes


def save(path, model, opt, scaler, loader, step) -> None:
    core = model.module if hasattr(model, "module") else model
    torch.save({"model": core.state_dict(), "opt": opt.state_dict(),
                "scaler": scaler.state_dict(), "loader": loader.state_dict(), "step": step},
               path)


def load(path, model, opt, scaler, loader) -> int:
    state = torch.load(path, map_location="cpu", weights_only=False)
    (model.module if hasattr(model, "module") else model).load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    scaler.load_state_dict(state["scaler"])
    loader.load_state_dict(state["loader"])
    return state["step"]


def train_step(model, opt, scaler, batch, classes, device) -> float:
    amp = torch.float16 if device.type == "cuda" else torch.bfloat16
    with torch.autocast(device.type, dtype=amp):
        logits = model(batch["image"])
        target = batch.get("target")
        loss = F.cross_entropy(logits.float(), target if target is not None else batch["label"])
    opt.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    return float(loss.detach())


def _progress(epoch: int, batch: int, batches: int, loss: float, seen: int, start: float,
              done: bool = False) -> None:
    """One line of progress: epoch, batch of the epoch, loss, samples/s of all ranks."""
    rate = seen / max(time.perf_counter() - start, 1e-9)
    what = "done" if done else f"batch {batch}/{batches}"
    print(f"epoch {epoch} {what}: loss {loss:.4f}, {rate:,.0f} samples/s", flush=True)


def main(argv=None) -> list[float]:
    """Train; returns the losses of the steps run (for tests)."""
    args = parse(argv)
    device, rank, world = setup(args)
    loader, model, opt, scaler, classes = build(args, device, world)
    step = load(args.checkpoint, model, opt, scaler, loader) if args.resume else 0
    losses: list[float] = []
    while loader.epoch < args.epochs and (args.steps is None or step < args.steps):
        epoch, start, seen = loader.epoch, time.perf_counter(), 0
        loader.set_epoch(epoch)
        for i, batch in enumerate(loader):
            losses.append(train_step(model, opt, scaler, batch, classes, device))
            step, seen = step + 1, seen + len(batch["label"]) * world
            if rank == 0 and step % args.save_every == 0:
                save(args.checkpoint, model, opt, scaler, loader, step)
            if rank == 0 and args.log_every and step % args.log_every == 0:
                _progress(epoch, i + 1, len(loader), losses[-1], seen, start)
            if args.steps is not None and step >= args.steps:
                break
        if rank == 0 and losses and loader.epoch > epoch:  # the pass ended (not --steps)
            _progress(epoch, len(loader), len(loader), losses[-1], seen, start, done=True)
    if rank == 0:
        save(args.checkpoint, model, opt, scaler, loader, step)
    loader.close()
    return losses


if __name__ == "__main__":
    main()

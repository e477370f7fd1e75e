"""Run by tests/integrations/test_lightning.py: a 2-process CPU DDP fit (gloo) of a tiny
model on a DaliDataModule; each rank writes what its training steps saw to OUT/rank<r>.json.

Usage: python lightning_ddp.py DATA OUT BACKEND [BACKEND ...]; one launch fits once per
backend (the second fit reuses the processes and the process group).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import lightning as L
import torch

from torch_bridge.integrations.lightning import DaliDataModule

EPOCHS = 2


class Recorder(L.LightningModule):
    """Cross-entropy of a linear layer on channel means; remembers every batch's indices."""

    def __init__(self) -> None:
        super().__init__()
        self.head = torch.nn.Linear(3, 3)
        self.seen: list[tuple[int, list[int]]] = []

    def training_step(self, batch, batch_idx):
        self.seen.append((self.current_epoch, batch["index"].tolist()))
        logits = self.head(batch["image"].mean(dim=(2, 3)))
        return torch.nn.functional.cross_entropy(logits, batch["label"])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def fit(data: str, out: str, backend: str) -> None:
    options = dict(modality="image", data=data, backend=backend, batch_size=4, size=16)
    if backend == "torch":
        options["reference"] = {"num_workers": 0}
    model, datamodule = Recorder(), DaliDataModule(train=options)
    trainer = L.Trainer(max_epochs=EPOCHS, accelerator="cpu", devices=2, strategy="ddp",
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=out)
    trainer.fit(model, datamodule)
    report = {"rank": trainer.global_rank, "world_size": trainer.world_size,
              "batches_per_epoch": trainer.num_training_batches, "seen": model.seen}
    Path(out, f"{backend}_rank{trainer.global_rank}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    for name in sys.argv[3:]:
        fit(sys.argv[1], sys.argv[2], name)

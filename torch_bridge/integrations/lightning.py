"""Lightning integration: a LightningDataModule whose loaders come from make_loader().

Importing this module imports `lightning`; `import torch_bridge` does not.

What Lightning 2.x does with a loader that is not a torch DataLoader, and how the
DataModule fits it (docs/lightning.md has the details and the sources read):

- It calls `set_epoch` only on `loader.sampler` (or `loader.batch_sampler.sampler`), and it
  stops taking batches once it has taken `len(loader)`, so a Loader never reaches the end of
  its pass and would not move to the next epoch by itself. Each loader is therefore handed
  to Lightning as a `LightningLoader`, whose `sampler.set_epoch` is the Loader's.
- It saves `state_dict()` of every train loader that has `state_dict`/`load_state_dict` in
  the fit loop's checkpoint state and loads it before the resumed pass starts.
- It fetches one batch ahead only from loaders without a length; ours have one. Should a
  batch be fetched ahead anyway, `LightningLoader.state_dict()` still describes the batches
  the training step received: the DataModule's `on_before_batch_transfer` hook tells it
  which batch the step takes, and it answers with the Loader's state after that batch.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any

import lightning as L
import torch

from torch_bridge.factory import make_loader
from torch_bridge.loader import Loader

STAGES = ("train", "val", "test", "predict")
_BUILT_FOR = {"fit": ("train", "val"), "validate": ("val",), "test": ("test",),
              "predict": ("predict",)}


class _EpochSetter:
    """The object Lightning calls `set_epoch(epoch)` on (it looks for `loader.sampler`)."""

    def __init__(self, loader: LightningLoader):
        self.set_epoch = loader.set_epoch


class LightningLoader:
    """A Loader as Lightning takes it: same batches and length, plus `sampler.set_epoch` and
    a state that counts the batches the training step received.

    Other attributes (`skipped`, `plan`, `close`, ...) are the wrapped Loader's.
    """

    batch_sampler = None  # Lightning reads it wherever a loader has a `sampler`

    def __init__(self, loader: Loader):
        self.loader = loader
        self.sampler = _EpochSetter(self)
        self._after: deque[dict[str, Any]] = deque()  # state after each batch not yet taken
        self._taken: dict[str, Any] | None = None  # state after the last batch taken
        self._counting = False  # whether takes are reported in this pass

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[dict[str, torch.Tensor] | tuple[torch.Tensor, ...]]:
        self._after.clear()
        self._counting, self._taken = False, self.loader.state_dict()
        for batch in self.loader:
            self._after.append(self.loader.state_dict())
            yield batch
        self._counting = False  # the pass is over: the Loader's own state is exact

    def __getattr__(self, name: str) -> Any:
        if name == "loader":  # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.loader, name)

    def set_epoch(self, epoch: int) -> None:
        """Loader.set_epoch; another epoch than the state's also ends the count of batches
        taken (the state is then the Loader's: that epoch, batch 0)."""
        if epoch != self.state_dict()["epoch"]:
            self._after.clear()
            self._counting = False
        self.loader.set_epoch(epoch)

    def taken(self) -> None:
        """Record that the training step received the oldest batch it had not yet taken."""
        self._counting = True
        if self._after:
            self._taken = self._after.popleft()

    def state_dict(self) -> dict[str, Any]:
        """The Loader's state after the last batch the training step received (when takes
        are reported, else after the last batch yielded; the two are the same when nothing
        is fetched ahead)."""
        if self._counting and self._taken is not None:
            return dict(self._taken)
        return self.loader.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue where `state` stopped (Loader.load_state_dict)."""
        self._after.clear()
        self._counting, self._taken = False, None
        self.loader.load_state_dict(state)


class DaliDataModule(L.LightningDataModule):
    """Train / val / test / predict loaders from make_loader() options, built in `setup()`.

    Args:
        train: make_loader arguments of the training loader, e.g. `dict(modality="image",
            data="/data/train", backend="dali", batch_size=64, size=224)`.
        val: the same for validation; `shuffle` defaults to False here.
        test: the same for `trainer.test`; `shuffle` defaults to False.
        predict: the same for `trainer.predict`; `shuffle` defaults to False.

    `device` defaults to the Trainer's device (its GPU when it trains on one, so DALI
    decodes there). `rank`/`world_size` default to the Trainer's process group, which is
    up when `setup()` runs. Lightning checkpoints the train loader's position with the fit
    loop, so `trainer.fit(model, dm, ckpt_path=...)` resumes mid-epoch exactly.
    """

    def __init__(self, *, train: Mapping[str, Any] | None = None,
                 val: Mapping[str, Any] | None = None,
                 test: Mapping[str, Any] | None = None,
                 predict: Mapping[str, Any] | None = None):
        super().__init__()
        given = {"train": train, "val": val, "test": test, "predict": predict}
        self.options = {stage: _checked(stage, opts) for stage, opts in given.items()
                        if opts is not None}
        self.loaders: dict[str, LightningLoader] = {}
        for stage in STAGES:
            if stage not in self.options:  # Lightning takes a None hook as "no such loader"
                setattr(self, f"{stage}_dataloader", None)

    def setup(self, stage: str) -> None:
        """Build the loaders `stage` needs ("fit": train and val), once."""
        for name in _BUILT_FOR.get(stage, ()):
            if name in self.options and name not in self.loaders:
                self.loaders[name] = LightningLoader(self._build(name))

    def _build(self, name: str) -> Loader:
        opts = dict(self.options[name])
        if name != "train":
            opts.setdefault("shuffle", False)
        opts.setdefault("device", self._trainer_device())
        try:
            return make_loader(**opts)
        except Exception as exc:  # same type, so callers' except clauses still match
            if hasattr(exc, "add_note"):  # Python 3.11+
                exc.add_note(f"while building the loader of DaliDataModule({name}=...)")
            raise

    def _trainer_device(self) -> str:
        trainer = self.trainer
        device = trainer.strategy.root_device if trainer is not None else torch.device("cpu")
        return str(device) if device.type == "cuda" else "cpu"

    def teardown(self, stage: str) -> None:
        """Close the loaders `stage` built (pipelines, workers, open files)."""
        for name in _BUILT_FOR.get(stage, ()):
            loader = self.loaders.pop(name, None)
            if loader is not None:
                loader.close()

    def train_dataloader(self) -> LightningLoader:
        """The train loader (built by setup("fit"), or now)."""
        return self._loader("train")

    def val_dataloader(self) -> LightningLoader:
        """The validation loader (built by setup("fit" or "validate"), or now)."""
        return self._loader("val")

    def test_dataloader(self) -> LightningLoader:
        """The test loader (built by setup("test"), or now)."""
        return self._loader("test")

    def predict_dataloader(self) -> LightningLoader:
        """The predict loader (built by setup("predict"), or now)."""
        return self._loader("predict")

    def _loader(self, name: str) -> LightningLoader:
        if name not in self.loaders:
            if name not in self.options:
                raise ValueError(f"DaliDataModule has no {name} loader: pass "
                                 f"{name}=dict(modality=..., data=..., ...)")
            self.setup({"train": "fit", "val": "validate"}.get(name, name))
        return self.loaders[name]

    def on_before_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        """Tell the train loader that the training step takes its next batch."""
        trainer = self.trainer
        if trainer is not None and trainer.training and "train" in self.loaders:
            self.loaders["train"].taken()
        return batch


def _checked(stage: str, options: Any) -> dict[str, Any]:
    """A copy of one stage's make_loader arguments; TypeError / ValueError naming what is
    wrong."""
    if not isinstance(options, Mapping):
        raise TypeError(f"DaliDataModule({stage}=...) must be a dict of make_loader "
                        f"arguments, got {type(options).__name__}")
    missing = [key for key in ("modality", "data") if key not in options]
    if missing:
        raise ValueError(f"DaliDataModule({stage}=...) lacks {' and '.join(missing)}; it "
                         f"holds make_loader arguments: modality, data, backend, ...")
    return dict(options)

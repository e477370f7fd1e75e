"""DaliDataModule under a real lightning Trainer on CPU, both backends.

One uninterrupted 2-epoch fit per backend (module fixture) checkpoints after every step;
the tests compare what its training steps saw with the plan, with a resumed fit from a
mid-epoch and an end-of-epoch checkpoint, and with a fit in which Lightning fetches one
batch ahead. A 2-process DDP fit (gloo) runs in a subprocess (lightning_ddp.py).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import BACKENDS, write_image_folder
from torch_bridge import make_loader

L = pytest.importorskip("lightning")

# skip the module before torch_bridge.integrations.lightning imports lightning
from torch_bridge.integrations.lightning import DaliDataModule, LightningLoader  # noqa: E402

pytestmark = [  # Lightning's notes on what these small fits leave out on purpose
    pytest.mark.filterwarnings("ignore:.*LeafSpec"),
    pytest.mark.filterwarnings("ignore:.*Skipping val loop"),
    pytest.mark.filterwarnings("ignore:Be aware that when using `ckpt_path`"),
]

N_IMAGES, BATCH, EPOCHS = 22, 4, 2
BATCHES = -(-N_IMAGES // BATCH)  # 6 per epoch, the last one of 2 samples
REPO = Path(__file__).resolve().parents[2]
DDP_SCRIPT = Path(__file__).with_name("lightning_ddp.py")


class Recorder(L.LightningModule):
    """A linear layer on channel means; records the indices of every train and val batch
    and keeps the first batch of each epoch (with a copy made when it arrived)."""

    def __init__(self) -> None:
        super().__init__()
        self.head = torch.nn.Linear(3, 3)
        self.seen: list[tuple[int, list[int]]] = []
        self.val_seen: list[list[int]] = []
        self.held: list[tuple[dict, dict]] = []

    def training_step(self, batch, batch_idx):
        if batch_idx == 0:
            self.held.append((batch, {k: v.clone() for k, v in batch.items()}))
        self.seen.append((self.current_epoch, batch["index"].tolist()))
        return self._loss(batch)

    def validation_step(self, batch, batch_idx):
        self.val_seen.append(batch["index"].tolist())
        return self._loss(batch)

    def test_step(self, batch, batch_idx):
        self.val_seen.append(batch["index"].tolist())

    def predict_step(self, batch, batch_idx):
        return batch["index"]

    def _loss(self, batch):
        logits = self.head(batch["image"].mean(dim=(2, 3)))
        return torch.nn.functional.cross_entropy(logits, batch["label"])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _options(data: Path, backend: str) -> dict:
    options = dict(modality="image", data=data, backend=backend, batch_size=BATCH, size=16)
    if backend == "torch":
        options["reference"] = {"num_workers": 0}
    return options


def _trainer(root: Path, *callbacks, **overrides) -> L.Trainer:
    settings = dict(max_epochs=EPOCHS, accelerator="cpu", devices=1, logger=False,
                    enable_checkpointing=bool(callbacks), enable_progress_bar=False,
                    enable_model_summary=False, default_root_dir=root, callbacks=list(callbacks))
    settings.update(overrides)
    return L.Trainer(**settings)


def _every_step(folder: Path):
    return L.pytorch.callbacks.ModelCheckpoint(dirpath=folder, every_n_train_steps=1,
                                               save_top_k=-1, filename="{step}")


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> Path:
    return write_image_folder(tmp_path_factory.mktemp("lightning_images"),
                              n_images=N_IMAGES, n_classes=3)


@pytest.fixture(scope="module", params=BACKENDS)
def uninterrupted(request, images, tmp_path_factory):
    """(backend, model, checkpoint folder) of a 2-epoch fit checkpointed after each step."""
    backend, root = request.param, tmp_path_factory.mktemp(f"fit_{request.param}")
    model = Recorder()
    dm = DaliDataModule(train=_options(images, backend), val=_options(images, backend))
    _trainer(root, _every_step(root / "ckpt")).fit(model, dm)
    return backend, model, root / "ckpt"


def _plan_epochs(images: Path, backend: str) -> list[list[list[int]]]:
    """The indices of each batch of each epoch, from a loader used without Lightning."""
    with make_loader(**_options(images, backend)) as loader:
        epochs = []
        for epoch in range(EPOCHS):
            loader.set_epoch(epoch)
            epochs.append([batch["index"].tolist() for batch in loader])
    return epochs


def test_fit_sees_every_sample_once_per_epoch_in_the_plans_order(uninterrupted, images):
    backend, model, _ = uninterrupted
    per_epoch = [[b for e, b in model.seen if e == epoch] for epoch in range(EPOCHS)]
    for batches in per_epoch:
        assert len(batches) == BATCHES
        assert sorted(sum(batches, [])) == list(range(N_IMAGES))
    assert per_epoch == _plan_epochs(images, backend)  # set_epoch reached the loader
    assert per_epoch[0] != per_epoch[1]


def test_validation_passes_are_whole_and_unshuffled(uninterrupted):
    _, model, _ = uninterrupted
    sanity, passes = model.val_seen[:2], model.val_seen[2:]  # 2 sanity-check batches first
    whole = [list(range(i, min(i + BATCH, N_IMAGES))) for i in range(0, N_IMAGES, BATCH)]
    assert sanity == whole[:2]
    assert passes == whole * EPOCHS


def test_a_batch_held_across_steps_is_unchanged(uninterrupted):
    """DALI's CPU outputs are views of its buffers: later batches must not overwrite them."""
    _, model, _ = uninterrupted
    assert len(model.held) == EPOCHS
    for batch, copy in model.held:
        assert batch.keys() == copy.keys()
        for key in batch:
            assert torch.equal(batch[key], copy[key]), key


@pytest.mark.parametrize("step", [2, BATCHES, BATCHES + 3])
def test_resume_from_a_checkpoint_sees_exactly_the_remaining_batches(uninterrupted, images,
                                                                      tmp_path, step):
    backend, model, ckpt_dir = uninterrupted
    ckpt = ckpt_dir / f"step={step}.ckpt"
    saved = torch.load(ckpt, weights_only=False)["loops"]["fit_loop"]["state_dict"]
    (state,) = saved["combined_loader"]  # Lightning's own record of the train loader
    # after a step the state counts that step's batch (the last one of an epoch included)
    expected = (0, BATCHES) if step == BATCHES else divmod(step, BATCHES)
    assert (state["epoch"], state["batches_consumed"]) == expected
    resumed = Recorder()
    dm = DaliDataModule(train=_options(images, backend))
    _trainer(tmp_path).fit(resumed, dm, ckpt_path=ckpt)
    assert resumed.seen == model.seen[step:]


class _Unsized:
    """The train loader without len(): Lightning then fetches one batch ahead."""

    batch_sampler = None

    def __init__(self, inner: LightningLoader):
        self.inner, self.sampler = inner, inner.sampler

    def __iter__(self):
        return iter(self.inner)

    def state_dict(self):
        return self.inner.state_dict()

    def load_state_dict(self, state):
        self.inner.load_state_dict(state)


class _PrefetchedModule(DaliDataModule):
    def train_dataloader(self):
        return _Unsized(super().train_dataloader())


def test_state_counts_batches_given_to_the_step_when_lightning_fetches_ahead(images,
                                                                             tmp_path):
    step, options = 3, _options(images, "dali")
    model = Recorder()
    _trainer(tmp_path, _every_step(tmp_path / "ckpt"), max_epochs=1).fit(
        model, _PrefetchedModule(train=options))
    saved = torch.load(tmp_path / "ckpt" / f"step={step}.ckpt", weights_only=False)
    (state,) = saved["loops"]["fit_loop"]["state_dict"]["combined_loader"]
    assert state["batches_consumed"] == step  # not step + 1, the batch fetched ahead
    resumed = Recorder()
    _trainer(tmp_path, max_epochs=1).fit(resumed, _PrefetchedModule(train=options),
                                         ckpt_path=tmp_path / "ckpt" / f"step={step}.ckpt")
    assert resumed.seen == model.seen[step:]


def test_lightning_loader_state_without_reported_takes_is_the_loaders(images):
    """Without the DataModule's hook (a training_step taking `dataloader_iter`) the state
    is the Loader's own: batches yielded."""
    with make_loader(**_options(images, "dali")) as loader:
        wrapped = LightningLoader(loader)
        it = iter(wrapped)
        next(it), next(it)
        assert wrapped.state_dict()["batches_consumed"] == 2
        wrapped.taken()
        assert wrapped.state_dict()["batches_consumed"] == 1
        assert len(wrapped) == len(loader) and wrapped.plan is loader.plan


def test_state_after_set_epoch_starts_that_epoch(images):
    """Lightning calls set_epoch before on_train_epoch_start; a checkpoint saved there must
    hold the new epoch at batch 0, not the finished epoch's count."""
    with make_loader(**_options(images, "dali")) as loader:
        wrapped = LightningLoader(loader)
        batches = iter(wrapped)
        for _ in range(len(wrapped)):  # as Lightning: len() batches, the pass never ends
            next(batches)
            wrapped.taken()
        assert (wrapped.state_dict()["epoch"], wrapped.state_dict()["batches_consumed"]) \
            == (0, BATCHES)
        wrapped.sampler.set_epoch(1)
        state = wrapped.state_dict()
    assert (state["epoch"], state["batches_consumed"]) == (1, 0)
    with make_loader(**_options(images, "dali")) as fresh:
        fresh.load_state_dict(state)
        fresh.set_epoch(1)
        assert [b["index"].tolist() for b in fresh] == _plan_epochs(images, "dali")[1]


def test_ddp_two_cpu_processes_get_equal_batches_and_disjoint_shares(images, tmp_path):
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    done = subprocess.run([sys.executable, str(DDP_SCRIPT), str(images), str(tmp_path),
                           *BACKENDS], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    seen = {}
    for backend in BACKENDS:
        reports = [json.loads((tmp_path / f"{backend}_rank{r}.json").read_text())
                   for r in range(2)]
        assert [r["world_size"] for r in reports] == [2, 2]
        assert reports[0]["batches_per_epoch"] == reports[1]["batches_per_epoch"] == 3
        for epoch in range(EPOCHS):
            shares = [[i for e, b in r["seen"] if e == epoch for i in b] for r in reports]
            assert [sum(1 for e, _ in r["seen"] if e == epoch) for r in reports] == [3, 3]
            assert not set(shares[0]) & set(shares[1])
            assert sorted(shares[0] + shares[1]) == list(range(N_IMAGES))
        seen[backend] = [r["seen"] for r in reports]
    assert seen["dali"] == seen["torch"]


def test_test_and_predict_loaders_are_whole_and_unshuffled(images, tmp_path):
    whole = list(range(N_IMAGES))
    model, options = Recorder(), _options(images, "dali")
    dm = DaliDataModule(test=options, predict=options)
    _trainer(tmp_path).test(model, dm, verbose=False)
    assert sum(model.val_seen, []) == whole
    predicted = _trainer(tmp_path).predict(model, dm)
    assert torch.cat(predicted).tolist() == whole
    assert dm.loaders == {}  # teardown closed and dropped them


def test_options_are_checked(images):
    with pytest.raises(TypeError, match="train=.*dict"):
        DaliDataModule(train="images/")
    with pytest.raises(ValueError, match="bogus") as info:
        DaliDataModule(train=dict(_options(images, "dali"), bogus=1)).setup("fit")
    if sys.version_info >= (3, 11):
        assert "DaliDataModule(train=...)" in " ".join(info.value.__notes__)
    with pytest.raises(ValueError, match=r"val=.*lacks data"):
        DaliDataModule(val=dict(modality="image"))
    dm = DaliDataModule(train=dict(modality="image", data="x"))
    assert dm.val_dataloader is None and dm.test_dataloader is None  # Lightning: no loader


def test_importing_torch_bridge_does_not_import_lightning(images):
    code = ("import sys, torch_bridge\n"
            f"loader = torch_bridge.make_loader('image', {str(images)!r}, batch_size=4, "
            "size=16)\n"
            "next(iter(loader))\n"
            "found = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('lightning', 'pytorch_lightning', 'lightning_fabric'))\n"
            "print(found)\n"
            "import torch_bridge.integrations.lightning\n"
            "print('lightning' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.split() == ["[]", "True"]


def test_the_contract_path_names_the_same_data_module():
    import torch_bridge.lightning as contract
    assert contract.DaliDataModule is DaliDataModule

"""The loader contract (torch_bridge.testing.loader_contract) on WebDataset shards, both backends,
and shards against the same images in a folder: same batches, exactly."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import TinyData
from tests.sources.shard_data import write_shards
from torch_bridge.testing.loader_contract import LoaderContract, assert_same, copies


def _garble_member(modality, index: int) -> None:
    """Overwrite sample `index`'s image bytes inside its shard (same size: the index and
    the tar header stay valid, the bytes are no JPEG)."""
    source = modality.source
    shard = source.shards[source.shard_ids[index]]
    offset, size = int(source.offsets[index]), int(source.sizes[index])
    with open(shard, "r+b") as f:
        f.seek(offset)
        f.write(b"\x00" * size)


class TestShardContract(LoaderContract):
    runs_key = "image-shards"  # cached apart from the image runs
    kind, main, sample_shape = "image", "image", (3, 16, 16)
    tolerance = 0.05  # as for folders: two JPEG decoders and resize kernels

    @pytest.fixture
    def tiny(self, tiny_data, tmp_path_factory):
        folders = tiny_data("image")
        base = tmp_path_factory.mktemp("tiny_shards")
        two = [write_shards(f, base / f"shards_{i}", per_shard=3)
               for i, f in enumerate(folders.two)]
        return TinyData("image", two[0], two)

    def break_samples(self, root, modality):
        _garble_member(modality, 1)
        return {1}, re.escape(modality.path(1)), ""


@pytest.fixture(scope="module")
def folder_and_shards(image_folder, tmp_path_factory) -> tuple[Path, Path]:
    return image_folder, write_shards(image_folder, tmp_path_factory.mktemp("wds"),
                                      per_shard=8, label_ext="json")


def test_shards_load_to_the_same_batches_as_the_folder(folder_and_shards, backend):
    from torch_bridge import make_loader
    folder, shards = folder_and_shards
    opts = {"backend": backend, "batch_size": 8, "size": 32, "seed": 5}
    if backend == "torch":
        opts["reference"] = {"num_workers": 0}
    for data in (shards, sorted(str(p) for p in shards.glob("*.tar")),
                 str(shards / "train-{000000..000004}.tar")):
        got = copies(make_loader("image", data, **opts))
        assert_same(got, copies(make_loader("image", folder, **opts)))
        assert sum(len(b["index"]) for b in got) == 37


def test_resume_state_is_tied_to_the_shard_listing(folder_and_shards):
    from torch_bridge import make_loader
    folder, shards = folder_and_shards
    state = make_loader("image", shards, batch_size=8, size=32).state_dict()
    with pytest.raises(ValueError, match="listing"):
        make_loader("image", folder, batch_size=8, size=32).load_state_dict(state)

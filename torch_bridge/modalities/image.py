"""The image modality: image class folders or WebDataset shards -> normalized crops, labels."""
from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch

from dali_pipes.formats.image_decode import (
    DecodeOptions,
    alpha_windows,
    image_decode,
    prepare_decode,
)
from dali_pipes.formats.jpeg_scale import DCT_FACTORS
from dali_pipes.geometry.draws import recipe_params
from dali_pipes.pipelines import image as image_graph
from dali_pipes.pipelines.config import DaliDevice, PipelineConfig
from dali_pipes.pipelines.image_scaled import build_scaled_image_pipeline
from dali_pipes.pipelines.jpeg_partial import partial_decode_applies
from dali_pipes.recipes import ImageRecipe, check_num_classes, image_recipe, size_at
from dali_pipes.recipes.files import load_recipe
from dali_pipes.recipes.mixing import mix_params
from dali_pipes.recipes.photometric import photometric_params
from dali_pipes.recipes.policies import affine_matrices, photo_params, policy_ops
from dali_pipes.sources.hf import image_source
from dali_pipes.sources.image import ImageFolderSource
from dali_pipes.sources.layout import data_layout
from dali_pipes.sources.options import ImageSourceOptions
from dali_pipes.sources.shards import ShardSource
from dali_pipes.stores import Store
from dali_pipes.stores.select import local_files, open_store
from torch_bridge._option_types import OptionTypeError
from torch_bridge.errors import SampleGuard
from torch_bridge.modalities import image_scaled
from torch_bridge.modalities.base import SourceModality, aug_keys, normalize_pixels
from torch_bridge.modalities.image_decode import (
    decode_image_tensor,
    split_alpha_norm,
    with_alpha_channel,
)
from torch_bridge.options import split_options
from torch_bridge.recipes.erasing import erase_batch
from torch_bridge.recipes.mixing import mix_batch
from torch_bridge.recipes.photometric import apply_photometric
from torch_bridge.recipes.policies import apply_policy

_INTERP = {"bilinear": "BILINEAR", "bicubic": "BICUBIC", "lanczos": "LANCZOS",
           "nearest": "NEAREST_EXACT"}  # pixel centres, as DALI's INTERP_NN and PIL sample


class ImageModality(SourceModality):
    """Options: `size` (an int or (H, W), default 224) and `train` (random resized crop +
    flip, default True; False: resize shorter side to max(size) / crop_pct and crop the
    centre), plus the recipe options of docs/recipes.md (validated by
    `dali_pipes.recipes.image_recipe`) in the groups `crop`, `output`, `photometric`,
    `policy`, `erasing` and `mixing` (`dali_pipes.recipes`: each keyword takes its group or
    a dict of its fields, each field is also a flat keyword); `recipe` (a preset name or a
    TOML path, `dali_pipes.recipes.files`) sets every option not given.
    `max_pixels`: images whose header claims more pixels are bad samples under on_error, on
    both backends, before decoding (default PIL's 89,478,485; None: no limit).
    Files: JPEG, PNG, WebP, BMP, TIFF, GIF and JPEG 2000 (.jp2 or raw J2K), recognised
    from their bytes (docs/data_sources.md, "Image formats").
    `adjust_orientation` (default False, as torchvision's decode_image): True turns and
    flips each image as its EXIF Orientation tag (JPEG, PNG, WebP, TIFF) says before the
    crop window is drawn on it; a missing or malformed tag counts as upright.
    `alpha`: "drop" (default, RGB) or "keep": "image" has 4 channels, RGB then alpha (255
    for images without transparency); `mean`/`std` may then have a 4th value for the
    alpha (default mean 0, std 1: alpha on the 0..1 scale); not with colour jitter,
    grayscale, blur or auto_augment.
    `image_column` / `label_column` (with `data` a Hugging Face `datasets.Dataset` only;
    default "image" / "label"): see dali_pipes.sources.hf.
    `data` may be behind URLs (WebDataset shards, or class folders in a listable store such
    as `s3://bucket/train/`) or in a `store` handed in (docs/data_sources.md)."""

    name = "image"
    dali_outputs = image_graph.OUTPUTS

    # make_loader's image options: the fields of these (each default and type is written
    # there once); `recipe` (a preset) fills the options not given.
    option_groups = (ImageRecipe, DecodeOptions, ImageSourceOptions)

    def __init__(self, data, *, seed: int, recipe: str | os.PathLike | None = None,
                 store: Store | None = None, **options: Any):
        given = split_options(options, self.option_groups, where="make_loader('image')")
        recipe_options = given[ImageRecipe]
        _check_size_type(recipe_options.get("size", 224))
        if recipe is not None:  # an explicit option always wins over the preset
            preset = load_recipe(recipe, train=recipe_options.get("train", True))
            recipe_options = {**preset, **recipe_options}
        self.decode = image_decode(**given[DecodeOptions])
        recipe_options, alpha_norm = split_alpha_norm(recipe_options, self.decode.alpha)
        self.recipe = image_recipe(**recipe_options)
        if self.decode.alpha:
            self.recipe = with_alpha_channel(self.recipe, *alpha_norm)
        self.augment_policy = self.recipe.policy.auto_augment
        self._set_source(_image_source(data, ImageSourceOptions(**given[ImageSourceOptions]),
                                       store), data)
        if isinstance(self.source, ShardSource):
            self.multi_source = self.source.multi_source
        self.seed, self.size, self.train = seed, self.recipe.size[0], self.recipe.train
        self.num_classes = check_num_classes(self.recipe, self.source.labels) \
            if self.recipe.mixing.active else None
        self._scaled = False  # reduced-scale decoding in the feed (set by build_pipeline)
        self._scaled_in_graph = False  # ... by the graph's JPEG crop decoder instead
        self._decode_opts: dict | None = None

    # DALI backend -------------------------------------------------------------------
    def build_pipeline(self, *, device: DaliDevice, batch_size: int, config: PipelineConfig,
                       device_id: int | None = None):
        # Large photos on the CPU backend, default recipe: decode at a reduced DCT scale in
        # the feed (torch_bridge/modalities/image_scaled.py); else DALI decodes the crop
        # window. The first build decides (the engine's one-sample blame pipeline reuses it).
        if self._decode_opts is None:
            square = self.recipe.size[0] == self.recipe.size[1]
            self._scaled = self.recipe.is_default_graph and square and \
                self.decode.is_default and image_scaled.scaled_decode_pays(
                self.source, size=self.size, train=self.train, device=device,
                enabled=config.scaled_jpeg_decode)
            self._decode_opts = dict(fast_idct=config.use_fast_idct, threads=config.threads())
            # the graph's JPEG crop decoder scales the same windows by the same rule, in
            # DALI's threads (same pixels; dali_pipes/pipelines/jpeg_partial.py)
            self._scaled_in_graph = self._scaled and partial_decode_applies(
                device, config, self.recipe.crop.interpolation, self.decode)
        if self._scaled_in_graph:
            return image_graph.build_image_pipeline(
                device=device, batch_size=batch_size, size=self.size, config=config,
                recipe=self.recipe, max_dct_factor=max(DCT_FACTORS))
        if self._scaled:
            return build_scaled_image_pipeline(batch_size=batch_size, size=self.size,
                                               config=config)
        return image_graph.build_image_pipeline(
            device=device, batch_size=batch_size, size=self.recipe.size[0], config=config,
            device_id=device_id, recipe=self.recipe, decode=self.decode)

    def feeds(self, epoch: int, indices: np.ndarray, guard: SampleGuard, keys=None
              ) -> tuple[dict[str, Any], np.ndarray]:
        """Read and check a batch's files; crop parameters for the good ones, vectorised."""
        got, kept_arr, kept_keys = self._read_files(guard, epoch, indices, self._read, keys)
        if not got:
            return {}, kept_arr
        datas = [data for data, *_ in got]
        hw = np.asarray([size for _, size, *_ in got], dtype=np.int64)
        windows, flip, vflip = recipe_params(self.seed, epoch, kept_keys,
                                             hw[:, 0], hw[:, 1], self.recipe,
                                             size_at(self.recipe, epoch))
        windows = windows.astype(np.int32)
        if self._scaled and not self._scaled_in_graph:
            return self._scaled_feeds(epoch, kept_arr, datas, hw, windows, flip, guard)
        # Fixed-size inputs go in as one dense array each: DALI takes the first axis as
        # the batch, which saves converting B small arrays per input.
        out: dict[str, Any] = {"jpegs": datas, "anchor": np.ascontiguousarray(windows[:, :2]),
               "shape": np.ascontiguousarray(windows[:, 2:]),
               "mirror": flip.astype(np.int32)}
        if self.decode.alpha:
            out["alpha"] = alpha_windows([plane for *_, plane in got], windows)
        if not self.recipe.is_default_graph:
            out.update(self._recipe_feeds(epoch, kept_keys, vflip))
        return out, kept_arr

    def _recipe_feeds(self, epoch: int, keys: np.ndarray, vflip: np.ndarray
                      ) -> dict[str, np.ndarray]:
        """The graph inputs only some recipes have (see `graph_inputs_for`)."""
        recipe, out = self.recipe, {}
        h, w = size_at(recipe, epoch)
        if recipe.schedule is not None:
            out["out_size"] = np.tile(np.array([h, w], dtype=np.float32), (len(keys), 1))
        if recipe.crop.vflip > 0:
            out["vflip"] = vflip.astype(np.int32)
        if recipe.photometric.active:
            jitter, sigma = photometric_params(self.seed, epoch, keys, recipe)
            if recipe.photometric.jitters:
                out["jitter"] = jitter
            if recipe.photometric.blur > 0:
                out["blur_sigma"] = sigma
        if recipe.policy.auto_augment:
            ops, mags = policy_ops(self.seed, epoch, keys, recipe, h, w)
            out["policy_matrix"] = affine_matrices(ops, mags, h, w)
            out["policy_params"] = photo_params(ops, mags)
        return out

    def _scaled_feeds(self, epoch, kept_arr, datas, hw, windows, flip, guard):
        """Feeds of the reduced-scale graph; a file libjpeg-turbo rejects follows on_error."""
        if self._decode_opts is None:
            raise RuntimeError("scaled feeds before build_pipeline set the decode options")
        paths = [self.path(int(i)) for i in kept_arr]
        decoded, start, end = image_scaled.decode_windows(
            datas, hw, windows, size=self.size, paths=paths, **self._decode_opts)
        ok = []
        for i, got in enumerate(decoded):
            if guard.run(int(kept_arr[i]), paths[i], epoch, lambda got=got: _unwrap(got)) \
                    is not None:
                ok.append(i)
        if not ok:
            return {}, kept_arr[ok]
        return {"pixels": [decoded[i] for i in ok], "roi_start": start[ok],
                "roi_end": end[ok], "mirror": flip[ok].astype(np.int32)}, kept_arr[ok]

    # torch reference backend ----------------------------------------------------------
    def load(self, epoch: int, index: int, key: int | None = None
             ) -> dict[str, torch.Tensor]:
        """One sample decoded and cropped with torchvision: uint8 (3, H, W)."""
        from torchvision.transforms.v2 import functional as F

        data, (h, w), orientation, plane = self._read(index)
        size = size_at(self.recipe, epoch)
        windows, flip, vflip = recipe_params(self.seed, epoch, aug_keys(index, key),
                                             np.array([h]), np.array([w]), self.recipe, size)
        image = decode_image_tensor(data, orientation, plane, self.decode.alpha)
        top, left, ch, cw = windows[0].tolist()
        mode = getattr(F.InterpolationMode, _INTERP[self.recipe.crop.interpolation])
        image = F.resized_crop(image, top, left, ch, cw, list(size), interpolation=mode,
                               antialias=mode != F.InterpolationMode.NEAREST_EXACT)
        if vflip[0]:
            image = image.flip(-2)
        if flip[0]:
            image = image.flip(-1)
        if self.recipe.policy.auto_augment:
            ops, mags = policy_ops(self.seed, epoch, aug_keys(index, key), self.recipe, *size)
            image = apply_policy(image, ops[0], mags[0])
        if self.recipe.photometric.active:
            jitter, sigma = photometric_params(self.seed, epoch, aug_keys(index, key),
                                               self.recipe)
            image = apply_photometric(image, jitter[0], float(sigma[0]), self.recipe)
        return {"image": image}

    def finish(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Batch-level work on the target device: uint8 -> what the DALI graph returns
        (normalized float32 CHW by default; see `_finish_recipe`)."""
        if self.recipe.is_default_graph:
            batch["image"] = normalize_pixels(batch["image"])
        else:
            batch["image"] = self._finish_recipe(batch["image"])
        return batch

    def _finish_recipe(self, pixels: torch.Tensor) -> torch.Tensor:
        """uint8 (B, C, H, W) -> the recipe graph's output: HWC for channels_last, float16
        or float32 (bfloat16 is cast later, as on DALI), uint8 as is."""
        recipe, channels = self.recipe, pixels.shape[1]  # 4 with alpha="keep"
        if recipe.output.memory_format == "channels_last":
            pixels = pixels.permute(0, 2, 3, 1).contiguous()
            shape = (1, 1, 1, channels)
        else:
            shape = (1, channels, 1, 1)
        if not recipe.normalize:
            return pixels
        from torch_bridge.engines._transfer import on_device  # constants copied once per device
        mean, std = (on_device(f"recipe {name} {values} {shape}",
                               torch.tensor(values).view(shape), pixels.device)
                     for name, values in zip(("mean", "std"), recipe.pixel_mean_std(),
                                             strict=True))
        out = (pixels.float() - mean) / std
        return out.half() if recipe.output.dtype == "float16" else out

    # both backends ---------------------------------------------------------------------
    def _read(self, index: int):
        """(bytes, displayed (H, W), EXIF orientation, alpha plane or None) of a checked
        file (dali_pipes.formats.image_decode.prepare_decode)."""
        data, size = self.source.read(index)
        return prepare_decode(data, size, self.path(index), self.decode)

    def after_batch(self, batch: dict[str, torch.Tensor], epoch: int, position: int
                    ) -> dict[str, torch.Tensor]:
        """The Loader's last step on both backends: layout view (HWC -> channels_last),
        random erasing (keyed by dataset index), batch mixing and soft targets, bfloat16
        cast. A no-op at the default recipe.

        Args:
            batch: the engine's batch (graph outputs and meta, on the device).
            epoch, position: the plan's epoch and batch position (mixing draws from them).

        Returns:
            The batch, with "target" when the recipe mixes or smooths labels.
        """
        recipe = self.recipe
        image = batch["image"]
        if recipe.output.memory_format == "channels_last" and image.dim() == 4:
            image = image.permute(0, 3, 1, 2)  # a view: (B, 3, H, W) in channels_last
        if recipe.erasing.p > 0:
            # the DALI engine's index tensor carries its host copy (transfer.attach_meta)
            keys = getattr(batch["index"], "host_copy", None)
            if keys is None:
                keys = batch["index"].cpu().numpy()  # the torch path: a host tensor
            image = erase_batch(image, keys, seed=self.seed, epoch=epoch, recipe=recipe)
        if recipe.mixing.active:
            if self.num_classes is None:
                raise RuntimeError("mixing without num_classes (set when the recipe mixes)")
            params = mix_params(self.seed, epoch, position, image.shape[0], image.shape[-2],
                                image.shape[-1], recipe)
            image, batch["target"] = mix_batch(image, batch["label"], params,
                                               num_classes=self.num_classes,
                                               smoothing=recipe.mixing.label_smoothing)
        if recipe.output.dtype == "bfloat16":
            image = image.to(torch.bfloat16)
        batch["image"] = image
        return batch


def _check_size_type(size) -> None:
    """OptionTypeError for a `size` of no type it can have (a str, a float, a bool)."""
    if isinstance(size, (str, bytes, float, bool, np.floating, np.bool_)):
        raise OptionTypeError(f"image option size={size!r} has the wrong type "
                              f"({type(size).__name__}); expected an int, an (H, W) pair, a "
                              f"{{first_epoch: size}} table or a function of the epoch")


def _image_source(data, options: ImageSourceOptions, store: Store | None):
    """WebDataset shards (sources/shards.py), class folders in a store other than local
    files (sources/image.py), a Hugging Face dataset or local class folders
    (sources/hf.py)."""
    max_pixels = options.max_pixels
    store = store or open_store(data)
    layout = data_layout(data, store)
    if layout.shards:
        return ShardSource(data, store=store, max_pixels=max_pixels)
    if not local_files(store):
        return ImageFolderSource(data, max_pixels=max_pixels, store=store,
                                 objects=layout.objects)
    return image_source(data, max_pixels=max_pixels, image_column=options.image_column,
                        label_column=options.label_column)


def _unwrap(got):
    """A decoded result, or raise the exception that took its place."""
    if isinstance(got, BaseException):
        raise got
    return got

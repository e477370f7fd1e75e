"""The image graph: region-of-interest JPEG decode, resize, flip + normalize.

Inputs (`dali_pipes.schema.IMAGE_INPUTS`, fed by the loader through `external_source`):
  "jpegs"  uint8 (n_bytes,)  encoded files
  "anchor" int32 (2,)        crop window top, left in source pixels (from the plan)
  "shape"  int32 (2,)        crop window height, width
  "mirror" int32 ()          1 to flip horizontally
Output "image": float32 (3, size, size) normalized with ImageNet mean/std. An `ImageRecipe`
(`dali_pipes.recipes`) may change the output size (H, W), the resize interpolation, the
mean/std, the dtype (float16; uint8 without normalisation; bfloat16 leaves as float32 and is
cast by the loader) and the layout (HWC for channels_last, permuted to a view by the loader),
and add a vertical flip (input "vflip") and colour jitter / grayscale / blur (inputs "jitter",
"blur_sigma", each only when used; dali_pipes.recipes.photometric_graph), a policy
(dali_pipes.recipes.policies_graph) and a per-epoch size ("out_size", with a resolution
schedule); the default recipe builds exactly the default graph.

Decoding only the crop window (`decoders.image_slice`) skips the scanlines outside it and
leaves less to resize than decode-then-crop.
On the CPU backend JPEGs go through `DpDecodeCropResize` instead (the preset's
`jpeg_partial_decode`; dali_pipes.pipelines.jpeg_partial): only the window's iMCU rows and
columns are decoded, and resized in the same task, with the same pixels; when nothing comes
between the resize and the normalisation (no vertical flip, policy or photometric ops; a
float32, bfloat16 or uint8 output) the flip, layout and normalisation are written by the
same task too, with crop_mirror_normalize's values.
"""
from __future__ import annotations

from typing import Literal

import nvidia.dali.fn as fn
import nvidia.dali.types as types
from nvidia.dali import Pipeline

from dali_pipes import schema
from dali_pipes.formats.image_decode import ImageDecode
from dali_pipes.pipelines.config import PipelineConfig, check_device
from dali_pipes.pipelines.image_decode import decode_inputs, decode_window
from dali_pipes.pipelines.inputs import external_inputs
from dali_pipes.pipelines.jpeg_partial import Finish, decode_crop_resize, partial_decode_applies
from dali_pipes.pipelines.resize import resize
from dali_pipes.recipes import ImageRecipe
from dali_pipes.recipes.photometric_graph import photometric
from dali_pipes.recipes.policies import num_slots
from dali_pipes.recipes.policies_graph import apply_policy
from dali_pipes.schema import IMAGENET_MEAN, IMAGENET_STD  # noqa: F401  (bench imports them here)

INPUTS = schema.names(schema.IMAGE_INPUTS)
OUTPUTS = schema.IMAGE_SCHEMA.outputs


def new_pipeline(*, device: Literal["cpu", "gpu"], batch_size: int, config: PipelineConfig,
                 device_id: int | None = None, seed: int = 0) -> Pipeline:
    """An empty pipeline for either backend (`device_id=None` on the CPU backend)."""
    check_device(device)
    return Pipeline(batch_size=batch_size, num_threads=config.threads(),
                    device_id=(device_id or 0) if device == "gpu" else None,
                    prefetch_queue_depth=config.prefetch_queue_depth, seed=seed,
                    exec_dynamic=True)


_DTYPE = {"float32": types.FLOAT, "float16": types.FLOAT16, "bfloat16": types.FLOAT,
          "uint8": types.UINT8}


def graph_inputs_for(recipe: ImageRecipe | None) -> tuple[schema.Input, ...]:
    """The graph's inputs under `recipe` (None: the default recipe)."""
    if recipe is None:
        return schema.IMAGE_INPUTS
    wanted = ((schema.SIZE_INPUT, recipe.schedule is not None),
              (schema.IMAGE_VFLIP_INPUT, recipe.crop.vflip > 0),
              (schema.JITTER_INPUT, recipe.photometric.jitters),
              (schema.BLUR_INPUT, recipe.photometric.blur > 0))
    policy = schema.POLICY_INPUTS if recipe.policy.active else ()
    return schema.IMAGE_INPUTS + tuple(spec for spec, used in wanted if used) + policy


def build_image_pipeline(*, device: Literal["cpu", "gpu"], batch_size: int, size: int,
                         config: PipelineConfig, device_id: int | None = None,
                         recipe: ImageRecipe | None = None,
                         decode: ImageDecode | None = None,
                         max_dct_factor: int = 1) -> Pipeline:
    """Define (not build) the image graph. DALI checks every operator argument here.

    `recipe` (None: the default) sets what follows the decode: output (H, W) (then `size`
    is ignored), interpolation, vertical flip, mean/std, dtype and layout. `decode` (None:
    the default) adds EXIF orientation and the alpha channel (input "alpha").
    `max_dct_factor` (2, 4, 8) lets the JPEG crop decoder decode windows at least that
    many times the output at a reduced DCT scale (large photos; 1: full scale)."""
    pipe = new_pipeline(device=device, batch_size=batch_size, config=config,
                        device_id=device_id)
    recipe = recipe if recipe is not None else ImageRecipe(size=(size, size))
    with pipe:
        declared = graph_inputs_for(recipe) + decode_inputs(decode)
        jpegs, anchor, shape, mirror, *rest = external_inputs(declared)
        extra = dict(zip(schema.names(declared[4:]), rest, strict=False))
        out_size = extra.get("out_size", recipe.size)
        if partial_decode_applies(device, config, recipe.crop.interpolation, decode):
            finish = _fusable_finish(recipe, mirror, extra)
            images = decode_crop_resize(jpegs, anchor, shape, out_size, config=config,
                                        interpolation=recipe.crop.interpolation,
                                        max_dct_factor=max_dct_factor, finish=finish)
            if finish is not None:  # the decoder flipped and normalised the images
                pipe.set_outputs(images)
                return pipe
        else:
            images = _decode_window(jpegs, anchor, shape, device, config, decode,
                                    extra.get("alpha"))
            images = resize(images, out_size, device=device, config=config,
                            interpolation=recipe.crop.interpolation)
        fused = None if config.native_ops else False  # the native operators where they load
        if "vflip" in extra:
            images = fn.flip(images, device=device, horizontal=0, vertical=extra["vflip"])
        if recipe.policy.auto_augment:  # flip first: the policy's geometry does not commute with it
            images = fn.flip(images, device=device, horizontal=mirror, vertical=0)
            mirror = 0
            images = apply_policy(images, extra["policy_matrix"], extra["policy_params"],
                                  device=device, recipe=recipe, slots=num_slots(recipe),
                                  fused=fused)
        if recipe.photometric.active:
            images = photometric(images, extra.get("jitter"), extra.get("blur_sigma"),
                                 device=device, recipe=recipe, fused=fused)
        pipe.set_outputs(_normalize(images, mirror, device, recipe))
    return pipe


def _finish(recipe: ImageRecipe, mirror) -> Finish:
    """The flip, layout and normalisation that end the graph, for `recipe`."""
    layout = "HWC" if recipe.output.memory_format == "channels_last" else "CHW"
    if not recipe.normalize:
        return Finish(mirror, layout)
    mean, std = recipe.pixel_mean_std()
    return Finish(mirror, layout, tuple(mean), tuple(std))


def _fusable_finish(recipe: ImageRecipe, mirror, extra: dict) -> Finish | None:
    """The finish the JPEG crop decoder can apply itself: when nothing comes between the
    resize and the normalisation (no vertical flip, policy or photometric ops) and the
    output is uint8 or float32 (bfloat16 is converted from float32 in torch)."""
    if "vflip" in extra or recipe.policy.auto_augment or recipe.photometric.active:
        return None
    if recipe.normalize and _DTYPE[recipe.output.dtype] != types.FLOAT:
        return None
    return _finish(recipe, mirror)


def _normalize(images, mirror, device: str, recipe: ImageRecipe):
    """Horizontal flip, normalisation (none for uint8), dtype and layout in one operator."""
    return _finish(recipe, mirror).apply(images, device, dtype=_DTYPE[recipe.output.dtype])


def _decode_window(jpegs, anchor, shape, device: str, config: PipelineConfig,
                   decode: ImageDecode | None = None, alpha=None):
    """The decoded crop windows (dali_pipes.pipelines.image_decode): RGB, turned by EXIF
    orientation and with an alpha channel when `decode` asks."""
    return decode_window(jpegs, anchor, shape, device, config, decode, alpha)

"""Batch schemas and graph inputs, declared once and shared by both backends (numpy only).

Batch fields: name -> (dtype, layout), numpy dtype names. Layout letters: B batch, C channels,
H/W height and width, T time. Every batch of every modality also holds "index". A field whose
layout has a T axis is padded along it when clips have their own lengths
(`BatchSchema.time_fields`). Each modality's `BatchSchema` is named once, in the registry.

Graph inputs (`Input`): what each graph module's `external_source` nodes take, per sample;
`dali_pipes.pipelines.inputs` builds the nodes from them and the loader checks that a
modality's `feeds()` fill exactly these names. The normalisation both backends apply to
RGB pixels is declared here too (`IMAGENET_MEAN` / `IMAGENET_STD`, on a 0..1 scale).
"""
from __future__ import annotations

from dataclasses import dataclass

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def pixel_mean_std() -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(mean, std) per RGB channel on the 0..255 scale of decoded uint8 pixels.

    Returns:
        Two 3-tuples of floats, the values both backends subtract and divide by.
    """
    return tuple(m * 255 for m in IMAGENET_MEAN), tuple(s * 255 for s in IMAGENET_STD)


@dataclass(frozen=True)
class Input:
    """One graph input per sample: `dtype` a numpy dtype name (None: chosen when the graph
    is built, e.g. the scenes' common dtype), `ndim` the per-sample rank, `layout` the DALI
    layout string given to `external_source` (None: none)."""

    name: str
    dtype: str | None
    ndim: int
    layout: str | None = None


def _scalars(dtype: str, *names: str) -> tuple[Input, ...]:
    return tuple(Input(name, dtype, 0) for name in names)


IMAGE_INPUTS = (Input("jpegs", "uint8", 1), Input("anchor", "int32", 1),
                Input("shape", "int32", 1), *_scalars("int32", "mirror"))
# Pixels decoded at a reduced DCT scale in the feed (large photos, CPU backend): the resize
# reads the crop window, with fractional edges, from them.
SCALED_IMAGE_INPUTS = (Input("pixels", "uint8", 3, "HWC"), Input("roi_start", "float32", 1),
                       Input("roi_end", "float32", 1), *_scalars("int32", "mirror"))
# Only with alpha="keep": each sample's alpha in its crop window (dali_pipes.formats.image_decode)
ALPHA_INPUT = Input("alpha", "uint8", 3, "HWC")
IMAGE_VFLIP_INPUT = Input("vflip", "int32", 0)  # only when the recipe asks for vertical flips
# Only with colour jitter or grayscale: [brightness, contrast, saturation, hue, gray]; with blur
JITTER_INPUT = Input("jitter", "float32", 1)
SIZE_INPUT = Input("out_size", "float32", 1)  # (H, W) of the epoch, with a resolution schedule
BLUR_INPUT = Input("blur_sigma", "float32", 0)
# Only with auto_augment: per operation slot an affine matrix and photometric parameters
POLICY_INPUTS = (Input("policy_matrix", "float32", 3), Input("policy_params", "float32", 2))
VIDEO_INPUTS = (Input("video", "uint8", 1), Input("decoded", "uint8", 4, "FHWC"),
                *_scalars("bool", "use_dali"),
                *_scalars("int32", "start_frame", "sequence_length", "stride", "mirror"),
                Input("timestamps", "float64", 1))
# Only with resize="short_side" (dali_pipes.geometry.clip_crops): the clip's crop window in source
# pixels, (y, x), that fn.resize reads (one window for every frame of the clip)
CLIP_CROP_INPUTS = (Input("crop_start", "float32", 1), Input("crop_end", "float32", 1))
IMU_INPUTS = (Input("imu", "float32", 2), Input("imu_valid", "bool", 1))
FUSION_INPUTS = VIDEO_INPUTS + IMU_INPUTS
HYPERSPECTRAL_INPUTS = (Input("cube", None, 3, "CHW"),)
NORMALIZE_INPUTS = (Input("mean", "float32", 3), Input("std", "float32", 3))
AUGMENT_INPUTS = _scalars("int32", "flip_h", "flip_v", "k")
CLIP_INPUTS = (*_scalars("int32", "mirror"), Input("timestamps", "float64", 1))
LENGTH_INPUT = Input("length", "int32", 0)
# Detection: the window decode + resize + flip + canvas slice of the image, and the targets
# (mapped once in numpy, dali_pipes.geometry.boxes) passed through the graph and padded to the
# batch's largest box count. "masks" only with masks=True.
DETECTION_INPUTS = (Input("images", "uint8", 1), Input("anchor", "int32", 1),
                    Input("shape", "int32", 1), Input("resized", "float32", 1),
                    Input("offset", "int32", 1), *_scalars("int32", "mirror"),
                    Input("boxes", "float32", 2), Input("labels", "int64", 1),
                    Input("box_valid", "bool", 1), Input("iscrowd", "bool", 1),
                    *_scalars("int64", "num_boxes", "dropped_boxes"))
DETECTION_MASK_INPUT = Input("masks", "uint8", 3)
DETECTION_SEMANTIC_INPUT = Input("semantic", "uint8", 2)


# The frame-folder graph decodes a batch's B x T frames in one decoder: one graph sample
# per frame, `clip` naming the clip (position in the batch) each frame belongs to.
FRAME_INPUTS = (Input("jpegs", "uint8", 1), *_scalars("int32", "mirror"),
                *_scalars("float64", "timestamps"), *_scalars("int32", "clip"))


def names(inputs) -> tuple[str, ...]:
    """The names of a sequence of `Input` declarations, in order."""
    return tuple(i.name for i in inputs)


IMAGE = {
    "image": ("float32", "BCHW"),
    "label": ("int64", "B"),
    "index": ("int64", "B"),
}
# With mixup, cutmix or label smoothing, image batches also hold soft targets, rows summing to 1.
TARGET = {"target": ("float32", "BC")}  # C: num_classes
HYPERSPECTRAL = {
    "cube": ("float32", "BCHW"),  # C: the selected bands
    "label": ("int64", "B"),  # label map value minus 1
    "position": ("int64", "BC"),  # (line, sample) of the patch centre
    "scene": ("int64", "B"),
    "index": ("int64", "B"),
}
VIDEO = {
    "frames": ("float32", "BTCHW"),
    "timestamps": ("float64", "BT"),  # seconds from the file's first frame
    "label": ("int64", "B"),
    "index": ("int64", "B"),
}
SOURCE_ID = {"source_id": ("int64", "B")}
FUSION = {
    **VIDEO,
    "imu": ("float32", "BTC"),  # C: the IMU channels, aligned to each frame's timestamp
    "imu_valid": ("bool", "BT"),  # False outside the stream and across gaps > max_gap
    **SOURCE_ID,  # always present for fusion (0 for a single folder)
}

# views=(clips, crops): multi-view evaluation, one sample per view
VIEWS = {
    "video": ("int64", "B"),  # the video's position in the listing (average per video)
    "view": ("int64", "B"),  # clip * crops + crop, in [0, clips * crops)
}

# N: the batch's largest box count (padding 0 / False). With masks=True batches also hold
# DETECTION_MASKS. Geometry and options: docs/detection.md.
DETECTION = {
    "image": ("float32", "BCHW"),  # normalized RGB canvas, 0 where it holds no image pixels
    "boxes": ("float32", "BNC"),  # x1, y1, x2, y2 in pixels of the output image
    "labels": ("int64", "BN"),  # contiguous ids in sorted order of the COCO category ids
    "num_boxes": ("int64", "B"),  # real boxes of each sample (the first num_boxes rows)
    "box_valid": ("bool", "BN"),  # True at real boxes
    "iscrowd": ("bool", "BN"),  # all False unless crowd="keep"
    "dropped_boxes": ("int64", "B"),  # boxes the crop / clip left too small (min_box_size)
    "image_id": ("int64", "B"),  # the COCO image id
    "orig_size": ("int64", "BC"),  # (height, width) of the file
    "index": ("int64", "B"),
}
DETECTION_MASKS = {"masks": ("uint8", "BNHW")}  # with masks=True: one per box, 0 / 1
# with semantic=True: label + 1 of the last annotation covering each pixel, 0 background,
# 255 outside the image content (padding)
DETECTION_SEMANTIC = {"semantic": ("uint8", "BHW")}

LENGTHS = {  # pad="variable" clips: batches padded to their longest clip
    "length": ("int64", "B"),  # real frames of each clip
    "mask": ("bool", "BT"),  # True at real frames
}

LENGTH_OUTPUTS = tuple(LENGTHS)


@dataclass(frozen=True)
class BatchSchema:
    """One modality's batch: `fields` name -> (dtype, layout) and the fields its DALI graph
    returns, in output order (`outputs`; the rest come from the modality's meta()). The
    registry (`torch_bridge.registry`) names each modality's schema once."""

    fields: dict[str, tuple[str, str]]
    outputs: tuple[str, ...]
    # Whether pad="variable" and views= apply; None: when any field has a T axis (a
    # modality whose series are not clips of videos says False)
    clip_options: bool | None = None

    @property
    def clips(self) -> bool:
        """Whether samples are clips (fields with a T axis, unless `clip_options` says
        otherwise): variable-length batches and multi-view evaluation apply."""
        if self.clip_options is not None:
            return self.clip_options
        return any("T" in layout for _, layout in self.fields.values())

    def time_fields(self) -> tuple[str, ...]:
        """The graph outputs with a time axis, in output order: padded along it per batch
        when clips keep their own lengths (pad="variable"); empty without a time axis."""
        return tuple(name for name in self.outputs if "T" in self.fields[name][1])

    def batch(self, *, multi_source: bool = False, variable: bool = False,
              views: bool = False) -> dict[str, tuple[str, str]]:
        """Every field of a batch.

        Args:
            multi_source: `data` is a list of folders (batches hold "source_id").
            variable: clips of their own lengths (batches hold "length" and "mask").
            views: multi-view evaluation, `views=(clips, crops)` (batches hold "video" and
                "view").

        Returns:
            name -> (numpy dtype name, layout).
        """
        if (variable or views) and not self.clips:
            what = "variable-length batches" if variable else "views="
            raise ValueError(f"{what} are for clip modalities (fields with a time axis), "
                             f"not a batch of {sorted(self.fields)}")
        schema = dict(self.fields)
        if multi_source:
            schema.update(SOURCE_ID)
        if variable:
            schema.update(LENGTHS)
        if views:
            schema.update(VIEWS)
        return schema


IMAGE_SCHEMA = BatchSchema(IMAGE, ("image",))
VIDEO_SCHEMA = BatchSchema(VIDEO, ("frames", "timestamps"))
HYPERSPECTRAL_SCHEMA = BatchSchema(HYPERSPECTRAL, ("cube",))
FUSION_SCHEMA = BatchSchema(FUSION, ("frames", "timestamps", "imu", "imu_valid"))
DETECTION_SCHEMA = BatchSchema(DETECTION, ("image", "boxes", "labels", "num_boxes",
                                           "box_valid", "iscrowd", "dropped_boxes"))
# + "masks" / "semantic" with masks=True / semantic=True (dali_pipes.pipelines.detection)

# The frame-folder graph (kind "frames" of "video"): one sample per frame, regrouped into
# the video batch by FrameFolderModality.regroup.
FRAME_OUTPUTS = ("frames", "timestamps", "clip")

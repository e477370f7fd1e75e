"""Batch schemas, declared once and shared by both backends (numpy dtype names).

Each entry: name -> (dtype, layout). Layout letters: B batch, C channels, H/W height and
width, T time. Every batch of every modality also holds "index".
"""
from __future__ import annotations

IMAGE = {
    "image": ("float32", "BCHW"),
    "label": ("int64", "B"),
    "index": ("int64", "B"),
}
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

LENGTHS = {  # pad="variable" clips: batches padded to their longest clip
    "length": ("int64", "B"),  # real frames of each clip
    "mask": ("bool", "BT"),  # True at real frames
}

SCHEMAS = {"image": IMAGE, "video": VIDEO, "hyperspectral": HYPERSPECTRAL, "fusion": FUSION}


def schema_for(modality: str, multi_source: bool = False,
               variable: bool = False) -> dict[str, tuple[str, str]]:
    if modality not in SCHEMAS:
        raise ValueError(f"unknown modality {modality!r}; known: {sorted(SCHEMAS)}")
    if variable and modality not in ("video", "fusion"):
        raise ValueError(f"variable-length batches are for video and fusion, not {modality!r}")
    schema = dict(SCHEMAS[modality])
    if multi_source:
        schema.update(SOURCE_ID)
    if variable:
        schema.update(LENGTHS)
    return schema

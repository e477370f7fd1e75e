"""The fusion graph: the video graph plus the IMU fields, passed through unchanged.

Inputs: the video graph's, plus "imu" float32 (T, D) and "imu_valid" bool (T,), computed by
the loader from each clip's frame timestamps. They ride through the graph with their clip so
they stay paired with it through prefetch, run-ahead across epochs, restarts and resume.
With `variable=True` (clips of their own lengths) "imu" is padded with zeros and "imu_valid"
with False to the batch's longest clip, like the video fields, and "length" / "mask" follow.
"""
from __future__ import annotations

from dali_pipes import schema
from dali_pipes.pipelines import video
from dali_pipes.pipelines.config import PipelineConfig, define_pipeline
from dali_pipes.pipelines.inputs import external_inputs

INPUTS = schema.names(schema.FUSION_INPUTS)
OUTPUTS = schema.FUSION_SCHEMA.outputs
VARIABLE_OUTPUTS = OUTPUTS + video.LENGTH_OUTPUTS


def build_fusion_pipeline(*, device: str, batch_size: int, config: PipelineConfig,
                          size: tuple[int, int] | None, device_id: int | None = None,
                          variable: bool = False, crop: bool = False):
    """Define (not build) the fusion graph (see `video.build_video_pipeline`)."""
    video.check_size(size, crop)
    return define_pipeline(_graph, device=device, batch_size=batch_size, config=config,
                           device_id=device_id, size=size, variable=bool(variable),
                           crop=bool(crop), native_ops=config.native_ops)


def _graph(device: str, size, variable: bool, crop: bool, native_ops: bool):
    frames, timestamps = video.video_graph(device, size, crop, native_ops)
    imu, valid = external_inputs(schema.IMU_INPUTS)
    if not variable:
        return frames, timestamps, imu, valid
    padded = (video.pad_time(frames), video.pad_time(timestamps, float64=True),
              video.pad_time(imu), video.pad_time(valid))
    return padded + video.length_and_mask(frames, device)

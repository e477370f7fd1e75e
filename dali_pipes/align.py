"""`from dali_pipes.align import align_to_frames`: the public path of the time alignment of a
sensor stream to video frame timestamps, whose code and rules live in
`dali_pipes.geometry.align`."""
from dali_pipes.geometry.align import METHODS, Method, align_to_frames

__all__ = ["METHODS", "Method", "align_to_frames"]

"""Clip sampling as pure functions of (seed, epoch, index) (numpy only).

A clip is `clip_length` frames taken every `stride` frames from a start frame, so it spans
`clip_span = (clip_length - 1) * stride + 1` frames of the video. Frame numbers are the
presentation-order indices of `formats.video.VideoInfo` (DALI's `start_frame`).

Starts (`clip_starts`): the valid starts of a video with `n` frames are 0..m, m = max(n - span, 0)
(a video shorter than the span starts at 0 and is padded). Training draws
`floor(u * (m + 1))` from the counter-based generator `augment.uniforms` on `STREAM_CLIP`,
keyed by (seed, epoch, index) and using counter `clip_id`, so clip k of a video does not depend
on how many clips are drawn and no random state is carried. Evaluation centres clip k of K in
the k-th of K equal parts of the start range: `((2k + 1) * m) // (2K)`; for K = 1 that is
`m // 2`, the clip whose middle is the video's middle (rounded down).

Padding (`clip_frame_indices`): a position past the last frame repeats the video's last
frame, `min(raw, n - 1)`; exactly what DALI's `fn.decoders.video(..., pad_mode="edge")`
returns for the same start/length/stride. The returned `valid` mask is False at padded
positions.

Loaders (`make_loader(..., pad=...)`, `LOADER_PADS`) offer two behaviours:
- "repeat_last" (default): every clip has `clip_length` frames, padded as above.
- "variable": a clip keeps only the frames its video has (`indices[valid]`, still `stride`
  apart; `clip_lengths` counts them), and the loader pads the batch instead: every field with
  a time axis is padded with zeros (False for booleans) to the longest clip of the batch, and
  the batch gains "length" (B,) int64 and "mask" (B, T) bool (True at real frames).
"""
from __future__ import annotations

from typing import Literal

import numpy as np

from dali_pipes.geometry.draws import STREAM_CLIP, uniforms

LoaderPad = Literal["repeat_last", "variable"]
LOADER_PADS = ("repeat_last", "variable")


def clip_span(clip_length: int, stride: int) -> int:
    """Frames of the video a clip covers, from its first to its last frame."""
    _check_positive(clip_length=clip_length, stride=stride)
    return (clip_length - 1) * stride + 1


def clip_starts(seed: int, epoch: int, index: np.ndarray, frame_counts: np.ndarray, *,
                clip_length: int, stride: int, train: bool, clips_per_video: int = 1,
                clip_id: np.ndarray | None = None) -> np.ndarray:
    """(B,) int64 start frames for the samples `index` of videos with `frame_counts` frames.

    `clip_id` (B,) in [0, clips_per_video) says which clip of its video each sample is
    (default: clip 0).
    """
    _check_positive(clips_per_video=clips_per_video)
    index = np.asarray(index, dtype=np.int64).reshape(-1)
    counts = _frame_counts(frame_counts, len(index))
    clip_id = _clip_ids(clip_id, len(index), clips_per_video)
    last_start = np.maximum(counts - clip_span(clip_length, stride), 0)
    if train:
        u = uniforms(seed, epoch, index, STREAM_CLIP, clips_per_video)
        drawn = np.floor(u[np.arange(len(index)), clip_id] * (last_start + 1)).astype(np.int64)
        return np.minimum(drawn, last_start)
    return (2 * clip_id + 1) * last_start // (2 * clips_per_video)


def clip_frame_indices(start, frame_count, clip_length: int, stride: int
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Frame indices (..., clip_length) int64, past the end repeating the last frame, and a
    `valid` mask (False where padded).

    `start` and `frame_count` are scalars or arrays that broadcast (one clip per element).
    """
    _check_positive(clip_length=clip_length, stride=stride)
    start = np.asarray(start, dtype=np.int64)
    counts = np.asarray(frame_count, dtype=np.int64)
    start, counts = np.broadcast_arrays(start, counts)
    _check_starts(start, counts)
    raw = start[..., None] + stride * np.arange(clip_length, dtype=np.int64)
    last = counts[..., None] - 1
    valid = raw <= last
    return np.minimum(raw, last), valid


def clip_lengths(start, frame_count, clip_length: int, stride: int) -> np.ndarray:
    """Real frames (..., ) int64 of each clip: `min(clip_length, (n - 1 - start) // stride + 1)`,
    the number of True entries of `clip_frame_indices`'s `valid` (always a prefix)."""
    _check_positive(clip_length=clip_length, stride=stride)
    start, counts = np.broadcast_arrays(np.asarray(start, dtype=np.int64),
                                        np.asarray(frame_count, dtype=np.int64))
    _check_starts(start, counts)
    return np.minimum(clip_length, (counts - 1 - start) // stride + 1)


def check_loader_pad(pad) -> str:
    """`pad` if it is one of LOADER_PADS, else ValueError naming the option."""
    if not isinstance(pad, str) or pad not in LOADER_PADS:
        raise ValueError(f"pad must be one of {LOADER_PADS}, got {pad!r}")
    return pad


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _frame_counts(frame_counts, n: int) -> np.ndarray:
    counts = np.asarray(frame_counts, dtype=np.int64).reshape(-1)
    if counts.shape != (n,):
        raise ValueError(f"frame_counts has {counts.size} entries for {n} indices")
    if np.any(counts < 1):
        raise ValueError(f"frame counts must be >= 1, got {counts[counts < 1][:8].tolist()}")
    return counts


def _clip_ids(clip_id, n: int, clips_per_video: int) -> np.ndarray:
    if clip_id is None:
        return np.zeros(n, dtype=np.int64)
    ids = np.broadcast_to(np.asarray(clip_id, dtype=np.int64), (n,))
    bad = ids[(ids < 0) | (ids >= clips_per_video)]
    if bad.size:
        raise ValueError(f"clip_id values {bad[:8].tolist()} are outside "
                         f"[0, clips_per_video={clips_per_video})")
    return ids


def _check_starts(start: np.ndarray, counts: np.ndarray) -> None:
    if np.any(counts < 1):
        raise ValueError(f"frame counts must be >= 1, got {counts[counts < 1][:8].tolist()}")
    bad = (start < 0) | (start >= counts)
    if bad.any():
        raise ValueError(f"clip starts {start[bad][:8].tolist()} are outside their videos "
                         f"(frame counts {counts[bad][:8].tolist()})")

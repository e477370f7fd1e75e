"""Time alignment of a sensor stream (IMU, orientation, ...) to video frame timestamps.

Pure numpy, no I/O: `align_to_frames` resamples a sensor stream at each frame's time and says
which frames the sensor actually covers. Every step is vectorised (one `np.searchsorted` over all
frames); there is no Python loop over frames or samples.

Rules, in the order they are applied:

1. Validation. `frame_ts` (F,), `sensor_ts` (N,) and `sensor_values` (N, D) must be non-empty;
   timestamps must be finite. `sensor_values` may also be 1-D (N,), read as one channel (N, 1);
   the result is always 2-D. Any violation raises `ValueError` naming the argument.
2. Sensor order. `sensor_ts` is sorted with a stable sort; among samples with the same timestamp
   only the last one (in the caller's order) is kept.
3. Query times. The sensor is sampled at `frame_ts + offset` (offset in sensor-clock seconds).
4. Bracketing. For a query time q, `lo` is the last sample with t <= q and `hi` the first with
   t > q. An exact hit (q == t[k]) therefore returns sample k itself for every method
   (normalised, for "slerp"). Values are not checked: a NaN value reaches the frames using it.
5. Values. "linear": straight-line interpolation per channel. "slerp": spherical interpolation
   of unit quaternions (x, y, z, w; scalar last, as scipy); inputs are normalised, the shorter
   arc is taken when neighbours have opposite signs, results are unit quaternions. "previous":
   zero-order hold, the value of `lo`. "nearest": the closer of `lo` and `hi`; a tie goes to the
   earlier sample. Before the first sample or after the last, the edge sample's value is used.
6. Validity. `valid` is False outside [t_first, t_last]. With `max_gap`, a query strictly
   between two samples is valid only if they are at most `max_gap` apart; an exact hit on a
   sample is always valid (the sample exists), whatever the gaps around it.
"""
from __future__ import annotations

import math
from typing import Literal, NamedTuple

import numpy as np

Method = Literal["linear", "slerp", "previous", "nearest"]
METHODS: tuple[Method, ...] = ("linear", "slerp", "previous", "nearest")

_SLERP_MIN_ANGLE = 1e-6  # radians; closer neighbours use normalised lerp (error ~ angle**3)


def align_to_frames(frame_ts, sensor_ts, sensor_values, *, method: Method = "linear",
                    max_gap: float | None = None, offset: float = 0.0
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Resample a sensor stream at frame times.

    Returns `values` (F, D) float64 and `valid` (F,) bool; see the module docstring for the
    exact rules (sorting, duplicates, edges, gaps, methods).
    """
    method = _check_method(method)
    gap = _check_max_gap(max_gap)
    shift = _check_finite_scalar(offset, "offset")
    query = _as_timestamps(frame_ts, "frame_ts") + shift
    t, v = _prepare_stream(sensor_ts, sensor_values)
    if method == "slerp":
        v = _normalised_quaternions(v)
    br = _bracket(t, query)
    return _interpolate(method, v, query, br), _valid_mask(t, query, br, gap)


# ----------------------------------------------------------------------------- validation

def _check_method(method) -> Method:
    for known in METHODS:
        if isinstance(method, str) and method == known:
            return known
    raise ValueError(f"method must be one of {METHODS}, got {method!r}")


def _check_finite_scalar(value, name: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a real number, got {value!r}") from exc
    if not math.isfinite(number):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return number


def _check_max_gap(max_gap) -> float | None:
    if max_gap is None:
        return None
    try:
        gap = float(max_gap)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"max_gap must be None or a number >= 0, got {max_gap!r}") from exc
    if math.isnan(gap) or gap < 0:
        raise ValueError(f"max_gap must be None or a number >= 0, got {max_gap!r}")
    return gap


def _as_float_array(data, name: str) -> np.ndarray:
    try:
        return np.asarray(data, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be an array of real numbers") from exc


def _as_timestamps(data, name: str) -> np.ndarray:
    ts = _as_float_array(data, name)
    if ts.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {ts.shape}")
    if ts.size == 0:
        raise ValueError(f"{name} is empty")
    bad = np.flatnonzero(~np.isfinite(ts))
    if bad.size:
        raise ValueError(f"{name} must be finite: {bad.size} NaN or infinite value(s), "
                         f"first at index {bad[0]} ({ts[bad[0]]})")
    return ts


def _as_values(data, n_samples: int) -> np.ndarray:
    values = _as_float_array(data, "sensor_values")
    if values.ndim == 1:
        values = values[:, None]
    if values.ndim != 2:
        raise ValueError(f"sensor_values must be (N,) or (N, D), got shape {values.shape}")
    if values.shape[0] != n_samples:
        raise ValueError(f"sensor_values has {values.shape[0]} rows but sensor_ts has "
                         f"{n_samples} timestamps")
    if values.shape[1] == 0:
        raise ValueError("sensor_values has no channels (D == 0)")
    return values


# ----------------------------------------------------------------------------- preparation

def _prepare_stream(sensor_ts, sensor_values) -> tuple[np.ndarray, np.ndarray]:
    """Validate, stable-sort, and drop duplicate timestamps keeping the last sample."""
    t = _as_timestamps(sensor_ts, "sensor_ts")
    v = _as_values(sensor_values, t.size)
    if t.size > 1 and np.any(t[1:] <= t[:-1]):
        order = np.argsort(t, kind="stable")
        t, v = t[order], v[order]
        keep = np.append(t[1:] != t[:-1], True)  # last of each run of equal timestamps
        t, v = t[keep], v[keep]
    return t, v


def _normalised_quaternions(v: np.ndarray) -> np.ndarray:
    if v.shape[1] != 4:
        raise ValueError(f"sensor_values must have 4 columns (x, y, z, w) for method='slerp', "
                         f"got {v.shape[1]}")
    norms = np.linalg.norm(v, axis=1)
    bad = np.flatnonzero(~(norms > 0) | ~np.isfinite(norms))
    if bad.size:
        raise ValueError(f"sensor_values: quaternion at sorted index {bad[0]} has norm "
                         f"{norms[bad[0]]}; slerp needs finite non-zero quaternions")
    return v / norms[:, None]


# ----------------------------------------------------------------------------- resampling

class _Bracket(NamedTuple):
    """For each query q: the last sample with t <= q and the first with t > q, clamped."""

    lo: np.ndarray
    hi: np.ndarray
    t_lo: np.ndarray
    t_hi: np.ndarray


def _bracket(t: np.ndarray, query: np.ndarray) -> _Bracket:
    right = np.searchsorted(t, query, side="right")
    last = t.size - 1
    lo = np.clip(right - 1, 0, last)
    hi = np.minimum(right, last)
    return _Bracket(lo, hi, t.take(lo), t.take(hi))


def _weights(query: np.ndarray, br: _Bracket) -> np.ndarray:
    """(F, 1) fraction of the way from t_lo to t_hi; 0 at the edges, where lo == hi."""
    span = br.t_hi - br.t_lo
    w = np.divide(query - br.t_lo, span, out=np.zeros_like(span), where=span > 0)
    return np.clip(w, 0.0, 1.0, out=w)[:, None]


def _interpolate(method: str, v: np.ndarray, query: np.ndarray, br: _Bracket) -> np.ndarray:
    if method == "previous":
        return v.take(br.lo, axis=0)
    if method == "nearest":
        later = (br.t_hi - query) < (query - br.t_lo)  # strict: a tie keeps the earlier sample
        return v.take(np.where(later, br.hi, br.lo), axis=0)
    v_lo, v_hi = v.take(br.lo, axis=0), v.take(br.hi, axis=0)
    if method == "slerp":
        return _slerp(v_lo, v_hi, _weights(query, br))
    v_hi -= v_lo  # linear: v_lo + w * (v_hi - v_lo), in place on the fresh copies
    v_hi *= _weights(query, br)
    v_hi += v_lo
    return v_hi


def _slerp(q0: np.ndarray, q1: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Row-wise slerp of unit quaternions along the shorter arc; w is (F, 1) in [0, 1]."""
    dot = np.sum(q0 * q1, axis=1, keepdims=True)
    q1 = np.where(dot < 0, -q1, q1)
    # angle between the two 4-vectors, accurate for tiny angles (unlike arccos(dot))
    theta = 2.0 * np.arctan2(np.linalg.norm(q0 - q1, axis=1, keepdims=True),
                             np.linalg.norm(q0 + q1, axis=1, keepdims=True))
    close = theta < _SLERP_MIN_ANGLE
    safe = np.where(close, 1.0, np.sin(theta))
    a = np.where(close, 1.0 - w, np.sin((1.0 - w) * theta) / safe)
    b = np.where(close, w, np.sin(w * theta) / safe)
    out = a * q0 + b * q1
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def _valid_mask(t: np.ndarray, query: np.ndarray, br: _Bracket,
                max_gap: float | None) -> np.ndarray:
    valid = (query >= t[0]) & (query <= t[-1])
    if max_gap is not None:
        exact = br.t_lo == query
        valid &= exact | ((br.t_hi - br.t_lo) <= max_gap)
    return valid

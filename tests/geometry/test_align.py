"""align_to_frames against independent references: np.interp, scipy Slerp, simple loops."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy.spatial.transform import Rotation, Slerp

from dali_pipes.geometry.align import align_to_frames

# ----------------------------------------------------------------------------- references

def _dedup_keep_last(ts, values):
    """Reference dedup: a dict keeps the last value written for each timestamp."""
    latest = {}
    for t, v in zip(np.asarray(ts, float), np.asarray(values, float), strict=True):
        latest[float(t)] = v
    keys = sorted(latest)
    return np.array(keys), np.array([latest[k] for k in keys]).reshape(len(keys), -1)


def _ref_linear(frames, ts, values):
    t, v = _dedup_keep_last(ts, values)
    return np.column_stack([np.interp(frames, t, v[:, d]) for d in range(v.shape[1])])


def _ref_previous(frames, ts, values):
    t, v = _dedup_keep_last(ts, values)
    out = []
    for q in frames:
        before = np.flatnonzero(t <= q)
        out.append(v[before[-1]] if before.size else v[0])
    return np.array(out)


def _ref_nearest(frames, ts, values):
    t, v = _dedup_keep_last(ts, values)
    return np.array([v[np.argmin(np.abs(t - q))] for q in frames])  # argmin: earlier on ties


def _ref_valid(frames, ts, max_gap):
    t = np.unique(ts)
    out = []
    for q in frames:
        if q < t[0] or q > t[-1]:
            out.append(False)
        elif max_gap is None or q in t:
            out.append(True)
        else:
            k = np.searchsorted(t, q)
            out.append(t[k] - t[k - 1] <= max_gap)
    return np.array(out, dtype=bool)


def _messy_stream(rng, n=400, d=3):
    """Jittered 100 Hz stream with a 0.3 s gap, duplicated timestamps, shuffled order."""
    t = np.arange(n) * 0.01 + rng.uniform(-0.003, 0.003, n)
    t = t[(t < 1.0) | (t > 1.3)]
    dup = rng.choice(t.size, 40, replace=False)
    t = np.concatenate([t, t[dup]])
    v = rng.standard_normal((t.size, d))
    order = rng.permutation(t.size)
    return t[order], v[order]


def _frames(rng, ts, n=300):
    lo, hi = ts.min(), ts.max()
    frames = np.sort(rng.uniform(lo - 0.2, hi + 0.2, n))
    return np.concatenate([frames, ts[:10], [lo, hi]])  # include exact hits and both edges


# ----------------------------------------------------------------------------- methods

@pytest.mark.parametrize("seed", [0, 1, 2])
def test_linear_matches_np_interp_on_messy_stream(seed):
    rng = np.random.default_rng(seed)
    ts, vs = _messy_stream(rng)
    frames = _frames(rng, ts)
    values, valid = align_to_frames(frames, ts, vs)
    assert values.shape == (frames.size, 3) and values.dtype == np.float64
    np.testing.assert_allclose(values, _ref_linear(frames, ts, vs), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(valid, _ref_valid(frames, ts, None))


@pytest.mark.parametrize("method, reference", [("previous", _ref_previous),
                                               ("nearest", _ref_nearest)])
def test_previous_and_nearest_match_references(method, reference):
    rng = np.random.default_rng(7)
    ts, vs = _messy_stream(rng)
    frames = _frames(rng, ts)
    values, _ = align_to_frames(frames, ts, vs, method=method)
    np.testing.assert_array_equal(values, reference(frames, ts, vs))


def test_nearest_tie_goes_to_earlier_sample():
    values, _ = align_to_frames([0.5, 1.5, 1.25], [0.0, 1.0, 2.0], [10.0, 20.0, 30.0],
                                method="nearest")
    np.testing.assert_array_equal(values[:, 0], [10.0, 20.0, 20.0])


def test_previous_holds_and_exact_hit_takes_the_sample():
    values, _ = align_to_frames([0.0, 0.99, 1.0, 1.5], [0.0, 1.0, 2.0], [1.0, 2.0, 3.0],
                                method="previous")
    np.testing.assert_array_equal(values[:, 0], [1.0, 1.0, 2.0, 2.0])


def test_duplicates_keep_last_sample_in_original_order():
    ts = [1.0, 0.0, 2.0, 1.0, 1.0]
    vs = [[100.0], [0.0], [20.0], [200.0], [10.0]]
    for method in ("linear", "previous", "nearest"):
        values, _ = align_to_frames([1.0], ts, vs, method=method)
        assert values[0, 0] == 10.0, method
    values, _ = align_to_frames([0.5, 1.5], ts, vs)
    np.testing.assert_allclose(values[:, 0], [5.0, 15.0])


def _random_quaternions(rng, n):
    q = Rotation.random(n, random_state=int(rng.integers(1 << 31))).as_quat()
    return q * rng.uniform(0.5, 2.0, (n, 1))  # not unit length: align normalises


def _assert_equal_up_to_sign(a, b, atol=1e-9):
    err = np.minimum(np.abs(a - b).max(axis=1), np.abs(a + b).max(axis=1))
    assert err.max() < atol, err.max()


def test_slerp_matches_scipy_with_sign_flips():
    rng = np.random.default_rng(3)
    ts = np.sort(rng.uniform(0, 10, 60))
    quats = _random_quaternions(rng, ts.size)
    flips = np.where(rng.random(ts.size) < 0.5, -1.0, 1.0)[:, None]
    frames = np.concatenate([rng.uniform(ts[0], ts[-1], 500), ts])
    expected = Slerp(ts, Rotation.from_quat(quats))(frames).as_quat()
    for q in (quats, quats * flips):
        values, valid = align_to_frames(frames, ts, q, method="slerp")
        assert valid.all()
        np.testing.assert_allclose(np.linalg.norm(values, axis=1), 1.0, atol=1e-12)
        _assert_equal_up_to_sign(values, expected)


def test_slerp_takes_the_shorter_arc():
    half = np.sin(np.pi / 4), np.cos(np.pi / 4)  # 90 degrees about z
    q = np.array([[0, 0, 0, 1.0], [0, 0, -half[0], -half[1]]])  # second one sign-flipped
    values, _ = align_to_frames([0.5], [0.0, 1.0], q, method="slerp")
    expected = Rotation.from_euler("z", 45, degrees=True).as_quat()[None]
    _assert_equal_up_to_sign(values, expected, atol=1e-12)


def test_slerp_edges_use_normalised_edge_quaternions():
    q = np.array([[0, 0, 0, 2.0], [0, 0, 1.0, 0]])
    values, valid = align_to_frames([-1.0, 5.0], [0.0, 1.0], q, method="slerp")
    np.testing.assert_allclose(values, [[0, 0, 0, 1], [0, 0, 1, 0]])
    assert not valid.any()


# ----------------------------------------------------------------------------- offset, validity

def test_offset_samples_sensor_at_frame_time_plus_offset():
    ts = np.linspace(0, 10, 101)
    vs = 2 * ts + 1
    values, valid = align_to_frames([1.0, 2.0, 9.8], ts, vs, offset=0.5)
    np.testing.assert_allclose(values[:, 0], [4.0, 6.0, 21.0])
    np.testing.assert_array_equal(valid, [True, True, False])
    shifted, _ = align_to_frames([1.5, 2.5, 10.3], ts, vs)
    np.testing.assert_allclose(values, shifted)


@pytest.mark.parametrize("method", ["linear", "previous", "nearest"])
def test_outside_range_uses_edge_value_and_is_invalid(method):
    values, valid = align_to_frames([-5.0, 0.0, 1.0, 2.0, 7.0], [0.0, 1.0, 2.0],
                                    [[1.0, -1.0], [2.0, -2.0], [3.0, -3.0]], method=method)
    np.testing.assert_array_equal(values[[0, -1]], [[1.0, -1.0], [3.0, -3.0]])
    np.testing.assert_array_equal(valid, [False, True, True, True, False])


@pytest.mark.parametrize("method", ["linear", "previous", "nearest"])
def test_max_gap_marks_frames_inside_gaps_invalid(method):
    ts = [0.0, 0.5, 1.0, 2.0, 2.5]
    frames = [0.25, 0.75, 1.0, 1.5, 2.0, 2.25, 3.0]
    _, valid = align_to_frames(frames, ts, np.arange(5.0), method=method, max_gap=0.6)
    # 1.0 and 2.0 are exact hits on samples: valid although a 1 s gap lies beside them
    np.testing.assert_array_equal(valid, [True, True, True, False, True, True, False])
    _, valid = align_to_frames(frames, ts, np.arange(5.0), method=method, max_gap=0.5)
    np.testing.assert_array_equal(valid, [True, True, True, False, True, True, False])
    _, valid = align_to_frames(frames, ts, np.arange(5.0), method=method, max_gap=0.0)
    np.testing.assert_array_equal(valid, [False, False, True, False, True, False, False])


def test_max_gap_on_messy_stream_matches_reference():
    rng = np.random.default_rng(11)
    ts, vs = _messy_stream(rng)
    frames = _frames(rng, ts)
    _, valid = align_to_frames(frames, ts, vs, max_gap=0.012)
    np.testing.assert_array_equal(valid, _ref_valid(frames, ts, 0.012))
    assert not valid.all() and valid.any()


def test_single_sample_stream():
    values, valid = align_to_frames([-1.0, 3.0, 4.0], [3.0], [[7.0, 8.0]])
    np.testing.assert_array_equal(values, [[7.0, 8.0]] * 3)
    np.testing.assert_array_equal(valid, [False, True, False])


def test_one_dimensional_values_give_one_channel_and_inputs_are_untouched():
    ts = np.array([2.0, 0.0, 1.0])
    vs = np.array([20.0, 0.0, 10.0])
    ts0, vs0 = ts.copy(), vs.copy()
    values, valid = align_to_frames([0.5], ts, vs)
    assert values.shape == (1, 1) and values[0, 0] == 5.0 and valid.dtype == np.bool_
    np.testing.assert_array_equal(ts, ts0)
    np.testing.assert_array_equal(vs, vs0)


# ----------------------------------------------------------------------------- errors

GOOD = dict(frame_ts=[0.5, 1.5], sensor_ts=[0.0, 1.0, 2.0], sensor_values=np.ones((3, 4)))


@pytest.mark.parametrize("change, match", [
    (dict(frame_ts=[0.0, np.nan]), "frame_ts"),
    (dict(frame_ts=[np.inf]), "frame_ts"),
    (dict(frame_ts=[]), "frame_ts"),
    (dict(frame_ts=[[0.0, 1.0]]), "frame_ts"),
    (dict(frame_ts=["a", "b"]), "frame_ts"),
    (dict(sensor_ts=[0.0, np.nan, 2.0]), "sensor_ts"),
    (dict(sensor_ts=[0.0, -np.inf, 2.0]), "sensor_ts"),
    (dict(sensor_ts=[], sensor_values=np.ones((0, 4))), "sensor_ts"),
    (dict(sensor_ts=np.zeros((3, 1))), "sensor_ts"),
    (dict(sensor_values=np.ones((2, 4))), "sensor_values"),
    (dict(sensor_values=np.ones((3, 4, 1))), "sensor_values"),
    (dict(sensor_values=np.ones((3, 0))), "sensor_values"),
    (dict(method="cubic"), "method"),
    (dict(method=None), "method"),
    (dict(max_gap=-0.1), "max_gap"),
    (dict(max_gap=float("nan")), "max_gap"),
    (dict(max_gap="big"), "max_gap"),
    (dict(offset=float("nan")), "offset"),
    (dict(offset=float("inf")), "offset"),
    (dict(method="slerp", sensor_values=np.ones((3, 3))), "sensor_values.*slerp"),
    (dict(method="slerp", sensor_values=np.zeros((3, 4))), "sensor_values"),
])
def test_bad_arguments_raise_value_error_naming_the_argument(change, match):
    args = {**GOOD, **change}
    kwargs = {k: args.pop(k) for k in ("method", "max_gap", "offset") if k in args}
    with pytest.raises(ValueError, match=match):
        align_to_frames(args["frame_ts"], args["sensor_ts"], args["sensor_values"], **kwargs)


# ----------------------------------------------------------------------------- property

_grid = st.integers(-2000, 2000).map(lambda k: k / 64)  # coarse grid: duplicates are common


@st.composite
def _streams(draw):
    ts = np.array(draw(st.lists(_grid, min_size=1, max_size=40)))
    d = draw(st.integers(1, 3))
    vs = draw(hnp.arrays(np.float64, (ts.size, d), elements=st.floats(-1e3, 1e3)))
    frames = draw(st.lists(st.one_of(_grid, st.floats(-40, 40)), min_size=1, max_size=30))
    return np.array(frames), ts, vs


@settings(max_examples=200, deadline=None)
@given(_streams())
def test_property_linear_equals_np_interp_after_dedup_keep_last(stream):
    frames, ts, vs = stream
    values, valid = align_to_frames(frames, ts, vs)
    np.testing.assert_allclose(values, _ref_linear(frames, ts, vs), rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(valid, (frames >= ts.min()) & (frames <= ts.max()))


def test_the_public_path_is_the_same_function():
    """`from dali_pipes.align import align_to_frames` (the documented path) stays the
    geometry package's function, with its method names."""
    import dali_pipes.align as public
    from dali_pipes.geometry import align

    assert public.align_to_frames is align.align_to_frames
    assert public.METHODS == align.METHODS == ("linear", "slerp", "previous", "nearest")
    values, valid = public.align_to_frames([0.5], [0.0, 1.0], [[0.0], [2.0]], method="nearest")
    assert values.tolist() == [[0.0]] and valid.tolist() == [True]

"""Reduced-scale JPEG decoding: the crop window maps to the same source region, and the
pixels stay within the stated tolerance of full decoding + resize (docs/speed.md)."""
import numpy as np
import pytest

from dali_pipes.formats.errors import FormatError
from dali_pipes.formats.jpeg_scale import dct_factors, decode_scaled, scaled_boxes
from dali_pipes.sample_data.sample_images import encode_jpeg, photo_like

pytest.importorskip("simplejpeg")

# Stated tolerance of reduced-scale decoding against full decoding + the same resize, in
# grey levels of the uint8 resize output. Measured: mean 1.2, p99 5 on the large-photo set;
# mean 2.2, p99 9 on the full-resolution noise and texture of these test photos.
MEAN_TOL, P99_TOL = 3.0, 12.0


@pytest.fixture(scope="module")
def photos():
    rng = np.random.default_rng(5)
    out = []
    for h, w, progressive in ((600, 800, False), (704, 531, True)):
        out.append(encode_jpeg(photo_like(rng, h, w), progressive=progressive))
    return out


def test_factors_follow_the_window_not_the_file():
    windows = np.array([[0, 0, 100, 100], [0, 0, 128, 300], [0, 0, 300, 256],
                        [5, 7, 511, 600], [0, 0, 512, 512], [0, 0, 4000, 3000]])
    assert dct_factors(windows, 64).tolist() == [1, 2, 4, 4, 8, 8]
    assert dct_factors(windows, 224).tolist() == [1, 1, 1, 2, 2, 8]


def test_window_maps_to_the_same_source_region():
    rng = np.random.default_rng(0)
    hw = rng.integers(300, 5000, size=(200, 2))
    top = rng.integers(0, hw // 2)
    extent = rng.integers(1, hw - top + 1)
    windows = np.concatenate([top, extent], axis=1)
    factors = rng.choice([1, 2, 4, 8], size=200)
    boxes, start, end = scaled_boxes(windows, factors, hw)
    f = factors[:, None]
    # the box holds the window, inside the decoded image of ceil(H/f) x ceil(W/f)
    assert (boxes[:, :2] >= 0).all() and (boxes[:, 2:] <= -(-hw // f)).all()
    assert (start >= 0).all() and (end <= boxes[:, 2:] - boxes[:, :2] + 1e-3).all()
    # back in source pixels: exactly the window's edges (one decoded pixel = f source pixels)
    np.testing.assert_allclose((boxes[:, :2] + start) * f, windows[:, :2], atol=8e-3)
    np.testing.assert_allclose((boxes[:, :2] + end) * f, windows[:, :2] + windows[:, 2:],
                               atol=8e-3)


@pytest.mark.parametrize("factor", [1, 2, 4, 8])
def test_decoded_size_and_block_means(photos, factor):
    import io

    from PIL import Image
    for data in photos:
        full = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), np.float64)
        h, w = full.shape[:2]
        small = decode_scaled(data, factor, (h, w), path="p.jpg")
        assert small.shape == (-(-h // factor), -(-w // factor), 3) and small.dtype == np.uint8
        # each decoded pixel low-passes its f x f block (a reduced IDCT, not a box mean:
        # close to the block mean on smooth content, a few levels off on fine texture)
        hh, ww = h // factor, w // factor
        blocks = full[:hh * factor, :ww * factor].reshape(hh, factor, ww, factor, 3)
        diff = np.abs(blocks.mean(axis=(1, 3)) - small[:hh, :ww])
        assert diff.mean() < (1.5 if factor == 1 else 6.0), (factor, diff.mean())


def test_a_corrupt_scan_names_the_file(photos):
    data = bytearray(photos[0])
    data[len(data) // 2: len(data) // 2 + 2000] = bytes(range(256)) * 7 + bytes(208)
    with pytest.raises(FormatError, match="bad.jpg: JPEG data"):
        decode_scaled(bytes(data), 4, (600, 800), path="bad.jpg")


def _resized(feeds: dict, graph, size: int):
    """uint8 resize outputs of a small DALI CPU graph over `feeds`."""
    import nvidia.dali.fn as fn
    import nvidia.dali.types as types
    from nvidia.dali import Pipeline
    n = len(next(iter(feeds.values())))
    pipe = Pipeline(batch_size=n, num_threads=1, device_id=None, exec_dynamic=True)
    with pipe:
        ext = {k: fn.external_source(name=k, dtype=dt, ndim=nd) for k, dt, nd in (
            ("jpegs", types.UINT8, 1), ("pixels", types.UINT8, 3),
            ("start", types.FLOAT, 1), ("end", types.FLOAT, 1)) if k in feeds}
        images = graph(fn, types, ext)
        pipe.set_outputs(fn.resize(images, size=[size, size], antialias=True,
                                   roi_start=ext["start"], roi_end=ext["end"],
                                   roi_relative=False, interp_type=types.INTERP_LINEAR))
    pipe.build()
    for k, v in feeds.items():
        pipe.feed_input(k, v)
    (out,) = pipe.run()
    return [np.asarray(out[i]).astype(np.int16) for i in range(n)]


def test_pixels_within_tolerance_of_full_decoding(photos):
    size = 64
    datas = [np.frombuffer(d, np.uint8) for d in photos for _ in range(3)]
    hw = np.array([(600, 800)] * 3 + [(704, 531)] * 3)
    windows = np.array([[10, 20, 130, 150], [33, 41, 290, 380], [0, 0, 600, 800],
                        [7, 3, 140, 200], [100, 50, 300, 260], [0, 0, 704, 531]])
    factors = dct_factors(windows, size)
    assert sorted(set(factors.tolist())) == [2, 4, 8]
    boxes, start, end = scaled_boxes(windows, factors, hw)
    cut = []
    for i, data in enumerate(datas):
        px = decode_scaled(data, int(factors[i]), tuple(hw[i]), path=str(i))
        y0, x0, y1, x1 = boxes[i]
        cut.append(np.ascontiguousarray(px[y0:y1, x0:x1]))
    scaled = _resized({"pixels": cut, "start": list(start), "end": list(end)},
                      lambda fn, types, ext: ext["pixels"], size)

    def full(shift):
        w = windows[:, :2] + shift
        return _resized({"jpegs": datas, "start": list(w.astype(np.float32)),
                         "end": list((w + windows[:, 2:]).astype(np.float32))},
                        lambda fn, types, ext: fn.decoders.image(ext["jpegs"],
                                                                 output_type=types.RGB), size)

    diff = np.concatenate([np.abs(a - b).ravel() for a, b in zip(scaled, full(0), strict=True)])
    assert diff.mean() < MEAN_TOL and np.percentile(diff, 99) <= P99_TOL, \
        (diff.mean(), np.percentile(diff, 99))
    # the check sees a window moved by a few source pixels
    shifted = np.concatenate([np.abs(a - b).ravel() for a, b in zip(scaled, full(6), strict=True)])
    assert shifted.mean() > 2 * diff.mean(), (shifted.mean(), diff.mean())

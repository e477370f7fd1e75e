"""Fast synthesis of the built-in sample JPEGs: a few milliseconds per 500x375 image.

The statistics are those of `sample_images.photo_like` (a 1/f^1.1 amplitude spectrum, three
correlated colour planes, 2-5 hard-edged shaded ellipses, sensor noise of 3 levels, JPEG
quality 90 4:2:0, about 85 KB a file), made cheaply:

- the pink-noise planes come from a small bank of periodic fields (one inverse FFT each,
  made once per size and seed); each image takes three of them, each rolled by its own
  offset and maybe flipped (a periodic field rolled is another field with the same
  spectrum), and mixes them with its own 3x3 colour matrix;
- objects are drawn inside their bounding boxes only;
- the sensor noise is a window, at a per-image offset, of one bank of Gaussian noise;
- everything is float32, and the encoder is libjpeg-turbo through simplejpeg.

Image `i` of a set depends only on (seed, i), so the files are the same whichever thread
writes them, in whatever order.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

BANK_FIELDS = 16  # pink-noise fields per (size, seed)
NOISE_MARGIN = 64  # the noise bank's extra rows and columns (per-image offsets)
SENSOR_NOISE = 3.0  # levels, standard deviation


@lru_cache(maxsize=4)
def _pink_bank(height: int, width: int, seed: int) -> np.ndarray:
    """(BANK_FIELDS, height, width) float32 periodic fields, 1/f^1.1, zero mean, unit std."""
    fy = np.fft.fftfreq(height)[:, None]
    fx = np.fft.rfftfreq(width)[None, :]
    radius = np.sqrt(fx * fx + fy * fy)
    radius[0, 0] = 1.0
    amplitude = (radius ** -1.1).astype(np.float32)
    amplitude[0, 0] = 0.0
    rng = np.random.default_rng([seed, 0x5EED])
    phase = rng.random((BANK_FIELDS, *amplitude.shape), dtype=np.float32) * np.float32(2 * np.pi)
    spectrum = np.empty(phase.shape, np.complex64)
    np.multiply(np.cos(phase), amplitude, out=spectrum.real)
    np.multiply(np.sin(phase), amplitude, out=spectrum.imag)
    fields = np.fft.irfft2(spectrum, s=(height, width), axes=(1, 2)).astype(np.float32)
    fields /= fields.std(axis=(1, 2), keepdims=True) + np.float32(1e-9)
    return fields


@lru_cache(maxsize=4)
def _noise_bank(height: int, width: int, seed: int) -> np.ndarray:
    """(3, height + NOISE_MARGIN, width + NOISE_MARGIN) float32 Gaussian sensor noise."""
    rng = np.random.default_rng([seed, 0x0015E])
    shape = (3, height + NOISE_MARGIN, width + NOISE_MARGIN)
    return rng.standard_normal(shape, dtype=np.float32) * np.float32(SENSOR_NOISE)


def fast_photo(seed: int, index: int, height: int, width: int) -> np.ndarray:
    """Image `index` of the set `seed`: (height, width, 3) uint8, C-contiguous."""
    rng = np.random.default_rng([seed, index])
    bank = _pink_bank(height, width, seed)
    picks = rng.choice(BANK_FIELDS, size=3, replace=False)
    planes = []
    for k in picks:
        field = np.roll(bank[k], (int(rng.integers(height)), int(rng.integers(width))), (0, 1))
        planes.append(field[::-1] if rng.random() < 0.5 else field)
    mix = (rng.normal(size=(3, 3)) * 0.35 + np.eye(3)).astype(np.float32)
    img = np.einsum("ij,jhw->ihw", mix, np.stack(planes))
    img *= np.float32(48.0) / (img[:, ::5, ::5].std() + np.float32(1e-9))
    img += rng.uniform(90, 160, size=(3, 1, 1)).astype(np.float32)
    _draw_objects(rng, img)
    oy, ox = (int(v) for v in rng.integers(0, NOISE_MARGIN + 1, size=2))
    img += _noise_bank(height, width, seed)[:, oy:oy + height, ox:ox + width]
    np.clip(img, 0, 255, out=img)
    return np.ascontiguousarray(img.astype(np.uint8).transpose(1, 2, 0))


def _draw_objects(rng: np.random.Generator, img: np.ndarray) -> None:
    """2-5 filled ellipses with a horizontal shading ramp, each within its bounding box."""
    height, width = img.shape[1:]
    for _ in range(int(rng.integers(2, 6))):
        cy, cx = rng.uniform(0, height), rng.uniform(0, width)
        ry = rng.uniform(min(15.0, height / 6), height / 3)
        rx = rng.uniform(min(15.0, width / 6), width / 3)
        ramp, colour = rng.uniform(10, 40), rng.uniform(20, 235, size=3)
        y0, y1 = max(0, int(cy - ry)), min(height, int(cy + ry) + 2)
        x0, x1 = max(0, int(cx - rx)), min(width, int(cx + rx) + 2)
        if y0 >= y1 or x0 >= x1:
            continue
        dy = ((np.arange(y0, y1, dtype=np.float32) - cy) / ry)[:, None]
        dx = ((np.arange(x0, x1, dtype=np.float32) - cx) / rx)[None, :]
        mask = dy * dy + dx * dx < 1.0
        shade = np.broadcast_to(dx * np.float32(ramp), mask.shape)
        for c in range(3):
            np.copyto(img[c, y0:y1, x0:x1], shade + np.float32(colour[c]), where=mask)


def encode_fast(pixels: np.ndarray, quality: int = 90) -> bytes:
    """Baseline 4:2:0 JPEG of (height, width, 3) uint8 RGB pixels (libjpeg-turbo)."""
    import simplejpeg

    return simplejpeg.encode_jpeg(pixels, quality=quality, colorspace="RGB",
                                  colorsubsampling="420", fastdct=False)

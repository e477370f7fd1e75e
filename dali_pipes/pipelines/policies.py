"""Augmentation policies in the image graph: per slot, each sample goes through the one
operation it drew (`dali_pipes.policies`; inputs "policy_matrix" (slots, 2, 3) and
"policy_params" (slots, 10), the last entry the operation's index). The batch is split by
operation with DALI's conditional split / merge operators (what `if` statements compile to in
a conditional pipeline), so each operator runs only on the samples that drew it (sharpness
too: its 3x3 kernel is a per-sample input, split with the images, since `fn.filter` needs
as many kernels as samples, also in a branch, where the batch may be empty).

Each operation reproduces torchvision's uint8 arithmetic (truncating blends, floored gray,
rounded sharpness kernel, posterize / solarize / autocontrast as torchvision computes them);
geometry is a nearest-neighbour `fn.warp_affine` with torchvision's inverse matrix; equalize
is DALI's `fn.equalize` (OpenCV's histogram equalisation, close to but not torchvision's).
Imports DALI, never torch.
"""
from __future__ import annotations

import numpy as np
import nvidia.dali.fn as fn
import nvidia.dali.math as dmath
import nvidia.dali.types as types

from dali_pipes.pipelines.photometric import GRAY_WEIGHTS
from dali_pipes.policies import OP

_SHARPEN = np.array([[1, 1, 1], [1, 5, 1], [1, 1, 1]], np.float32) / 13
_GEOMETRY = ("ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate")


def _gray_floor(x):
    r, g, b = (x[:, :, i:i + 1] for i in range(3))
    return dmath.floor(r * GRAY_WEIGHTS[0] + g * GRAY_WEIGHTS[1] + b * GRAY_WEIGHTS[2])


def _to_uint8(x, device: str):
    """Float pixels -> uint8, truncating and clamping as torchvision's uint8 ops do: DALI's
    cast saturates at 0 and 255, so floor then cast is clamp + truncation in one pass."""
    return fn.cast(dmath.floor(x), dtype=types.UINT8, device=device)


def _blend(x, other, factor, device: str):
    """torchvision's uint8 `_blend` (clamp then truncate), to uint8. `x` may be the uint8
    image itself: arithmetic with a float factor computes in float32."""
    return _to_uint8(x * factor + other * (1.0 - factor), device)


def _interior_mask(x, kernel, device: str):
    """(H, W, 1): 1.0 inside the one-pixel border, 0.0 on it (of any image size), for
    every channel (arithmetic broadcasts it): the 3x3 kernel sums to 1 only where no tap
    falls outside the image."""
    taps = fn.filter(x[:, :, 0:1] * 0.0 + 1.0, kernel, device=device, border="constant",
                     dtype=types.FLOAT)  # constant border: zeros
    return fn.cast(taps > 0.99, dtype=types.FLOAT, device=device)


def _sharpness(x8, factor, kernel, device: str):
    x = fn.cast(x8, dtype=types.FLOAT, device=device)
    blurred = dmath.floor(fn.filter(x, kernel, device=device, border="clamp",
                                    dtype=types.FLOAT) + 0.5)
    return _blend(x, x + _interior_mask(x, kernel, device) * (blurred - x), factor, device)


def _autocontrast(x8, device: str):
    lo, hi = (fn.cast(reduce(x8, axes=[0, 1], device=device), dtype=types.FLOAT,
                      device=device) for reduce in (fn.reductions.min, fn.reductions.max))
    flat = fn.cast(hi == lo, dtype=types.FLOAT, device=device)
    inv_scale = (hi - lo) / 255.0 + flat
    return _to_uint8((x8 - lo * (1.0 - flat)) / inv_scale, device)


_ALL_ONES = np.uint8(255)


def _photometric_ops(device: str) -> dict:
    """name -> f(uint8 image, params getter, kernels) -> uint8 image. Posterize, solarize
    and invert stay in uint8 (torchvision's bit operations: posterize keeps the top bits,
    x ^ 255 = 255 - x); the others compute in float32 straight from the uint8 pixels."""
    return {
        "Brightness": lambda x8, p, k: _to_uint8(x8 * p(0), device),
        "Color": lambda x8, p, k: _blend(x8, _gray_floor(x8), p(1), device),
        "Contrast": lambda x8, p, k: _blend(
            x8, fn.reductions.mean(_gray_floor(x8), device=device), p(2), device),
        "Sharpness": lambda x8, p, k: _sharpness(x8, p(3), k, device),
        "Posterize": lambda x8, p, k: x8 & fn.cast(256.0 - p(4), dtype=types.UINT8,
                                                   device=device),
        "Solarize": lambda x8, p, k: x8 ^ (fn.cast(x8 >= p(5), dtype=types.UINT8,
                                                   device=device) * _ALL_ONES),
        "AutoContrast": lambda x8, p, k: _autocontrast(x8, device),
        "Invert": lambda x8, p, k: x8 ^ _ALL_ONES,
    }


def _handler(name: str, device: str):
    """f(uint8 images, matrices, params, kernels) -> uint8 images for operation `name`."""
    if name in _GEOMETRY:
        return lambda x8, m, p, k: fn.warp_affine(x8, device=device, matrix=m, fill_value=0,
                                                  interp_type=types.INTERP_NN)
    if name == "Equalize":
        return lambda x8, m, p, k: fn.equalize(x8, device=device)
    op = _photometric_ops(device)[name]

    def run(x8, m, p, k):
        get = (lambda i: p[i].gpu()) if device == "gpu" else (lambda i: p[i])
        return op(x8, get, k)
    return run


def _dispatch(x8, matrix, params, kernel, names: list[str], device: str):
    """Route each sample to the handler of the operation it drew (Identity: unchanged)."""
    if not names:
        return x8
    pred = params[9] == float(OP[names[0]])
    # DALI's shipped fn stub omits the private _conditional module that it has at run time
    split = [fn._conditional.split(node, predicate=pred)  # type: ignore[attr-defined]
             for node in (x8, matrix, params, kernel)]
    (x_in, x_out), (m_in, m_out), (p_in, p_out), (k_in, k_out) = split
    done = _handler(names[0], device)(x_in, m_in, p_in, k_in)
    rest = _dispatch(x_out, m_out, p_out, k_out, names[1:], device)
    return fn._conditional.merge(done, rest, predicate=pred)  # type: ignore[attr-defined]


def apply_policy(images, matrices, params, *, device: str, recipe, slots: int):
    """The recipe's policy on uint8 HWC images (every slot in turn).

    Args:
        images: uint8 HWC DataNode at the output size.
        matrices: float32 (slots, 2, 3) per sample.
        params: float32 (slots, 10) per sample.
        device: "cpu" or "gpu".
        recipe: the `ImageRecipe`.
        slots: operations per sample.

    Returns:
        uint8 HWC DataNode.
    """
    names = [n for n in OP if n != "Identity"
             and (n != "Invert" or recipe.auto_augment == "autoaugment")]
    # one 3x3 kernel per sample (a constant, on the CPU: fn.filter takes it there)
    kernel = types.Constant(_SHARPEN, device="cpu")
    for k in range(slots):
        images = _dispatch(images, matrices[k], params[k], kernel, names, device)
    return images

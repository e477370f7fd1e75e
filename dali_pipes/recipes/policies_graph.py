"""Augmentation policies in the image graph: per slot, each sample goes through the one
operation it drew (`dali_pipes.recipes.policies`; inputs "policy_matrix" (slots, 2, 3) and
"policy_params" (slots, 10), the last entry the operation's index).

On DALI's CPU backend the fused operator `DpPolicy` (`dali_pipes/native/policy_op.cc`)
applies every slot of a sample in one task, with torchvision's arithmetic (equalize
included). What follows is the graph of DALI's own operators, for the GPU and for a CPU
without the fused operator. The batch is split by
operation group with DALI's conditional split / merge operators (what `if` statements
compile to in a conditional pipeline), so each operator runs only on the samples whose
operation is in its group: one branch for the five geometric operations (a `warp_affine`
with each sample's matrix), one for Color and Contrast, one for Posterize, Solarize and
Invert (the parameters of the operations not drawn are identities), one each for
Brightness, Sharpness, AutoContrast and Equalize. Fewer branches mean fewer, larger
operators (DALI's CPU executor runs one at a time). Sharpness's 3x3 kernel is a per-sample
input, split with the images, since `fn.filter` needs as many kernels as samples (a
constant has the whole batch's size, not the branch's).

Each operation reproduces torchvision's uint8 arithmetic (truncating blends, floored gray,
rounded sharpness kernel, posterize / solarize / autocontrast as torchvision computes them);
geometry is a nearest-neighbour `fn.warp_affine` with torchvision's inverse matrix; equalize
is DALI's `fn.equalize` (OpenCV's histogram equalisation, close to but not torchvision's).
Imports DALI, never torch.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import nvidia.dali.fn as fn
import nvidia.dali.math as dmath
import nvidia.dali.types as types

from dali_pipes import native
from dali_pipes.recipes.photometric_graph import GRAY_WEIGHTS
from dali_pipes.recipes.policies import OP

_SHARPEN = np.array([[1, 1, 1], [1, 5, 1], [1, 1, 1]], np.float32) / 13
_GEOMETRY = ("ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate")


def _gray_floor(x):
    """(H, W, 1) floored gray level, float32: torchvision's uint8 rgb_to_grayscale, in one
    per-pixel matrix product (`fn.coord_transform`: r w0 + g w1 + b w2 in float32)."""
    return dmath.floor(fn.coord_transform(x, M=list(GRAY_WEIGHTS), dtype=types.FLOAT))


def _to_uint8(x, device: str):
    """Float pixels -> uint8, truncating and clamping as torchvision's uint8 ops do: DALI's
    cast saturates at 0 and 255, so floor then cast is clamp + truncation. On the CPU the
    cast rounds halves away from zero, and x - 0.5 is exact in float32 for the x that can
    round differently, so cast(x - 0.5) is floor then cast, one pass cheaper."""
    if device == "cpu":
        return fn.cast(x - 0.5, dtype=types.UINT8, device=device)
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


def _is_op(p, *names: str):
    """Per sample: whether the operation index p[9] is one of `names` (one scalar expression:
    a product of differences, exact for the small integer indices)."""
    prod = None
    for name in names:
        term = p[9] - float(OP[name])
        prod = term if prod is None else prod * term
    return prod == 0.0


def _as_float(pred, device: str):
    return fn.cast(pred, dtype=types.FLOAT, device=device)


def _blends(x8, p, device: str):
    """Color and Contrast in one branch: torchvision's `_blend` of the image with its floored
    gray (color) or that gray's mean (contrast). The factor of the one not drawn is 1.0 and
    the other image's weights 0.0 or 1.0, so the product and the weighted sum reproduce
    each operation exactly."""
    factor = p[1] * p[2]
    gray = _gray_floor(x8)
    other = gray * _as_float(_is_op(p, "Color"), device) + \
        fn.reductions.mean(gray, device=device) * _as_float(_is_op(p, "Contrast"), device)
    return _blend(x8, other, factor, device)


def _bits(x8, p, device: str):
    """Posterize, Solarize and Invert in one branch, in uint8: keep the top bits (mask 255 when
    not posterizing), then flip the pixels at or above the threshold (256 when not
    solarizing: none; 0 for invert, x ^ 255 = 255 - x: all)."""
    mask = fn.cast(256.0 - p[4], dtype=types.UINT8, device=device)
    flip = fn.cast(x8 >= p[5] - 256.0 * p[8], dtype=types.UINT8, device=device) * _ALL_ONES
    return (x8 & mask) ^ flip


# The policy's operations in groups, one conditional branch each: (operation names, handler
# f(uint8 images, matrices, params, kernels), inputs the handler needs besides the images
# and params). Sharpness and geometry come first so that the kernels and matrices need
# not be split further down the chain.
_GROUPS: tuple[tuple[tuple[str, ...], Callable, set[str]], ...] = (
    (("Sharpness",), lambda x8, m, p, k, d: _sharpness(x8, p[3], k, d), {"kernel"}),
    (_GEOMETRY, lambda x8, m, p, k, d: fn.warp_affine(
        x8, device=d, matrix=m, fill_value=0, interp_type=types.INTERP_NN), {"matrix"}),
    (("Color", "Contrast"), lambda x8, m, p, k, d: _blends(x8, p, d), set()),
    (("Brightness",), lambda x8, m, p, k, d: _to_uint8(x8 * p[0], d), set()),
    (("Posterize", "Solarize", "Invert"), lambda x8, m, p, k, d: _bits(x8, p, d), set()),
    (("AutoContrast",), lambda x8, m, p, k, d: _autocontrast(x8, d), set()),
    (("Equalize",), lambda x8, m, p, k, d: fn.equalize(x8, device=d), set()),
)


def _split(node, pred, wanted: bool):
    """(in-branch, out-of-branch) parts of `node`, or (None, None) when not `wanted`."""
    if not wanted:
        return None, None
    # DALI's shipped fn stub omits the private _conditional module that it has at run time
    return fn._conditional.split(node, predicate=pred)  # type: ignore[attr-defined]


def _dispatch(x8, matrix, params, kernel, groups: list, device: str):
    """Route each sample to the branch of the operation group it drew (Identity: none)."""
    if not groups:
        return x8
    (names, handler, needs), rest = groups[0], groups[1:]
    pred = _is_op(params, *names)
    later = set().union(*(g[2] for g in rest)) if rest else set()
    x_in, x_out = _split(x8, pred, True)
    p_in, p_out = _split(params, pred, True)
    m_in, m_out = _split(matrix, pred, "matrix" in needs | later)
    k_in, k_out = _split(kernel, pred, "kernel" in needs | later)
    get = (lambda node: node.gpu()) if device == "gpu" else (lambda node: node)
    done = handler(x_in, m_in, get(p_in), k_in, device)
    rest_out = _dispatch(x_out, m_out, p_out, k_out, rest, device)
    return fn._conditional.merge(done, rest_out, predicate=pred)  # type: ignore[attr-defined]


def native_policy() -> bool:
    """Whether the fused CPU operator (`dali_pipes/native/policy_op.cc`) is available: built
    and loaded on first use (`dali_pipes.native`), else DALI's own operators run."""
    return native.library("policy_op") is not None


def apply_policy(images, matrices, params, *, device: str, recipe, slots: int,
                 fused: bool | None = None):
    """The recipe's policy on uint8 HWC images (every slot in turn).

    On the CPU the fused operator `DpPolicy` runs every slot of a sample in one pass of the
    thread pool where it is available; otherwise (and on the GPU) conditional branches of
    DALI's operators do.

    Args:
        images: uint8 HWC DataNode at the output size.
        matrices: float32 (slots, 2, 3) per sample.
        params: float32 (slots, 10) per sample.
        device: "cpu" or "gpu".
        recipe: the `ImageRecipe`.
        slots: operations per sample.
        fused: use the fused CPU operator (None: where available; True: require it).

    Returns:
        uint8 HWC DataNode.
    """
    if device == "cpu" and native.wanted("policy_op", fused, "policy operator"):
        # a plugin operator: fn gains it when the library loads, the stub cannot list it
        return fn.dp_policy(images, matrices, params)  # type: ignore[attr-defined]
    drawn = {n for n in OP if n != "Identity"
             and (n != "Invert" or recipe.policy.auto_augment == "autoaugment")}
    groups = [g for g in _GROUPS if drawn & set(g[0])]
    # one 3x3 kernel per sample (a constant, on the CPU: fn.filter takes it there)
    kernel = types.Constant(_SHARPEN, device="cpu")
    for k in range(slots):
        images = _dispatch(images, matrices[k], params[k], kernel, groups, device)
    return images

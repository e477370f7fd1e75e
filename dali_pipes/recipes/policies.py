"""Augmentation policies (TrivialAugmentWide, RandAugment, AutoAugment-ImageNet) as pure
functions of (seed, epoch, sample key) (numpy only).

torchvision's operation sets and magnitude ranges (`transforms.v2`): a sample draws, per
slot, one operation and its signed magnitude; `slot_params` turns them into the per-slot
inputs of the DALI graph (an inverse affine matrix and a vector of identity-or-not
photometric parameters), while the torch path calls torchvision's functional ops with the
same (operation, magnitude). Nearest-neighbour interpolation and fill 0, as torchvision's.
"""
from __future__ import annotations

import math

import numpy as np

from dali_pipes.geometry.draws import uniforms

STREAM_POLICY = 9
OPS = ("Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness",
       "Color", "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize",
       "Invert")
OP = {name: i for i, name in enumerate(OPS)}
POLICIES = ("trivialaugment", "randaugment", "autoaugment")
MAX_MAGNITUDE = 30  # RandAugment bins 0..30 (torchvision's num_bins=31)
PHOTO_PARAMS = ("brightness", "color", "contrast", "sharpness", "posterize_div",
                "solarize_threshold", "autocontrast", "equalize", "invert", "op")

# name -> (max magnitude at the last bin, signed); "width"/"height": a fraction of the side
_RAND: dict[str, tuple[float | str, bool]] = {
         "ShearX": (0.3, True), "ShearY": (0.3, True), "TranslateX": ("w", True),
         "TranslateY": ("h", True), "Rotate": (30.0, True), "Brightness": (0.9, True),
         "Color": (0.9, True), "Contrast": (0.9, True), "Sharpness": (0.9, True)}
_WIDE: dict[str, tuple[float | str, bool]] = {
         "ShearX": (0.99, True), "ShearY": (0.99, True), "TranslateX": (32.0, True),
         "TranslateY": (32.0, True), "Rotate": (135.0, True), "Brightness": (0.99, True),
         "Color": (0.99, True), "Contrast": (0.99, True), "Sharpness": (0.99, True)}
# torchvision's AutoAugmentPolicy.IMAGENET: ((op, probability, magnitude bin of 10), x2)
IMAGENET_POLICY = (
    (("Posterize", 0.4, 8), ("Rotate", 0.6, 9)), (("Solarize", 0.6, 5), ("AutoContrast", 0.6, 0)),
    (("Equalize", 0.8, 0), ("Equalize", 0.6, 0)), (("Posterize", 0.6, 7), ("Posterize", 0.6, 6)),
    (("Equalize", 0.4, 0), ("Solarize", 0.2, 4)), (("Equalize", 0.4, 0), ("Rotate", 0.8, 8)),
    (("Solarize", 0.6, 3), ("Equalize", 0.6, 0)), (("Posterize", 0.8, 5), ("Equalize", 1.0, 0)),
    (("Rotate", 0.2, 3), ("Solarize", 0.6, 8)), (("Equalize", 0.6, 0), ("Posterize", 0.4, 6)),
    (("Rotate", 0.8, 8), ("Color", 0.4, 0)), (("Rotate", 0.4, 9), ("Equalize", 0.6, 0)),
    (("Equalize", 0.0, 0), ("Equalize", 0.8, 0)), (("Invert", 0.6, 0), ("Equalize", 1.0, 0)),
    (("Color", 0.6, 4), ("Contrast", 1.0, 8)), (("Rotate", 0.8, 8), ("Color", 1.0, 2)),
    (("Color", 0.8, 8), ("Solarize", 0.8, 7)), (("Sharpness", 0.4, 7), ("Invert", 0.6, 0)),
    (("ShearX", 0.6, 5), ("Equalize", 1.0, 0)), (("Color", 0.4, 0), ("Equalize", 0.6, 0)),
    (("Equalize", 0.4, 0), ("Solarize", 0.2, 4)), (("Solarize", 0.6, 5), ("AutoContrast", 0.6, 0)),
    (("Invert", 0.6, 0), ("Equalize", 1.0, 0)), (("Color", 0.6, 4), ("Contrast", 1.0, 8)),
    (("Equalize", 0.8, 0), ("Equalize", 0.6, 0)))


def num_slots(recipe) -> int:
    """Operations per sample: num_ops (randaugment), 1 (trivialaugment), 2 (autoaugment)."""
    return {"trivialaugment": 1, "randaugment": recipe.policy.num_ops, "autoaugment": 2}.get(
        recipe.policy.auto_augment, 0)


def _magnitude(names: np.ndarray, bins: np.ndarray, num_bins: int, space: dict,
               height: int, width: int, posterize_low: int) -> np.ndarray:
    """Unsigned magnitudes of operations `names` at `bins` (torchvision's linspace tables)."""
    frac = bins / (num_bins - 1)
    out = np.zeros(bins.shape)
    for name, (top, _) in space.items():
        scale = {"w": 150 / 331 * width, "h": 150 / 331 * height}.get(top, top)
        out = np.where(names == OP[name], frac * scale, out)
    poster = 8 - np.round(bins / ((num_bins - 1) / (8 - posterize_low)))
    out = np.where(names == OP["Posterize"], poster, out)
    return np.where(names == OP["Solarize"], 1.0 - frac, out)


def policy_ops(seed: int, epoch: int, keys: np.ndarray, recipe, height: int, width: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """Per-sample operations and signed magnitudes.

    Args:
        seed, epoch, keys: the loader's seed, the epoch and the samples' keys.
        recipe: an `ImageRecipe` with auto_augment set (num_ops, magnitude, magnitude_std).
        height, width: the image size the policy runs at (translations scale with it).

    Returns:
        (int64 (B, slots) indices into OPS, float64 (B, slots) magnitudes).
    """
    slots = num_slots(recipe)
    u = uniforms(seed, epoch, keys, STREAM_POLICY, 4 * slots).reshape(-1, slots, 4)
    if recipe.policy.auto_augment == "autoaugment":
        ops, bins = _autoaugment(u)
        num_bins, space, low = 10, _RAND, 4
    elif recipe.policy.auto_augment == "randaugment":
        ops = np.floor(u[..., 0] * 14).astype(np.int64)  # Identity .. Equalize
        noise = recipe.policy.magnitude_std * np.sqrt(-2 * np.log(1 - u[..., 2])) * np.cos(
            2 * np.pi * u[..., 3]) if recipe.policy.magnitude_std > 0 else 0.0
        bins = np.clip(np.round(recipe.policy.magnitude + noise), 0, MAX_MAGNITUDE)
        num_bins, space, low = MAX_MAGNITUDE + 1, _RAND, 4
    else:
        ops = np.floor(u[..., 0] * 14).astype(np.int64)
        bins = np.floor(u[..., 2] * (MAX_MAGNITUDE + 1))
        num_bins, space, low = MAX_MAGNITUDE + 1, _WIDE, 2
    mags = _magnitude(ops, bins, num_bins, space, height, width, low)
    signed = np.isin(ops, [OP[n] for n in space])
    mags = np.where(signed & (u[..., 1] < 0.5), -mags, mags)
    return ops, mags


def _autoaugment(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sub-policy per sample (slot 0's first uniform), each op kept with its probability."""
    table = np.array([[OP[o] for o, _, _ in sub] for sub in IMAGENET_POLICY])
    probs = np.array([[p for _, p, _ in sub] for sub in IMAGENET_POLICY])
    bins = np.array([[m for _, _, m in sub] for sub in IMAGENET_POLICY], dtype=np.float64)
    pick = np.floor(u[:, 0, 3] * len(IMAGENET_POLICY)).astype(np.int64)
    keep = u[..., 2] < probs[pick]
    return np.where(keep, table[pick], OP["Identity"]), bins[pick]


def _inverse_affine(center, angle, translate, shear) -> np.ndarray:
    """torchvision's `_get_inverse_affine_matrix` (scale 1), vectorised: (B, 2, 3)."""
    rot, sx, sy = (np.radians(a) for a in (angle, shear[0], shear[1]))
    a = np.cos(rot - sy) / np.cos(sy)
    b = -np.cos(rot - sy) * np.tan(sx) / np.cos(sy) - np.sin(rot)
    c = np.sin(rot - sy) / np.cos(sy)
    d = -np.sin(rot - sy) * np.tan(sx) / np.cos(sy) + np.cos(rot)
    (cx, cy), (tx, ty) = center, translate
    m = np.stack([d, -b, np.zeros_like(a), -c, a, np.zeros_like(a)], axis=-1)
    m[..., 2] += m[..., 0] * (-cx - tx) + m[..., 1] * (-cy - ty) + cx
    m[..., 5] += m[..., 3] * (-cx - tx) + m[..., 4] * (-cy - ty) + cy
    return m.reshape(*a.shape, 2, 3)


def affine_matrices(ops: np.ndarray, mags: np.ndarray, height: int, width: int) -> np.ndarray:
    """float32 (B, slots, 2, 3) DALI warp_affine matrices (output -> input pixel coordinates,
    pixel centres at +0.5): the identity for non-geometric operations."""
    zero = np.zeros(ops.shape)
    shear = np.degrees(np.arctan(mags))
    corner = (-width / 2, -height / 2)  # torchvision shears about the top-left corner
    is_ = {name: ops == OP[name] for name in ("ShearX", "ShearY", "TranslateX", "TranslateY",
                                               "Rotate")}
    cx = np.where(is_["ShearX"] | is_["ShearY"], corner[0], 0.0)
    cy = np.where(is_["ShearX"] | is_["ShearY"], corner[1], 0.0)
    tx = np.where(is_["TranslateX"], np.trunc(mags), 0.0)
    ty = np.where(is_["TranslateY"], np.trunc(mags), 0.0)
    angle = np.where(is_["Rotate"], -mags, 0.0)  # F.rotate inverts with -angle
    m = _inverse_affine((cx, cy), angle, (tx, ty),
                        (np.where(is_["ShearX"], shear, zero),
                         np.where(is_["ShearY"], shear, zero)))
    # centred coordinates -> pixel coordinates: in = A (out - C) + t + C
    centre = np.array([width / 2, height / 2])
    m[..., 2] += centre - np.einsum("...ij,j->...i", m[..., :2], centre)
    return m.astype(np.float32)


def photo_params(ops: np.ndarray, mags: np.ndarray) -> np.ndarray:
    """float32 (B, slots, 10) photometric parameters (PHOTO_PARAMS), identity unless drawn:
    factors 1 + m, posterize divisor 2**(8 - bits), solarize threshold 255 m (256: none),
    0/1 flags for autocontrast, equalize and invert; last, the operation's index in OPS."""
    out = np.zeros(ops.shape + (len(PHOTO_PARAMS),))
    for i, name in enumerate(("Brightness", "Color", "Contrast", "Sharpness")):
        out[..., i] = np.where(ops == OP[name], 1.0 + mags, 1.0)
    out[..., 4] = np.where(ops == OP["Posterize"], 2.0 ** (8 - mags), 1.0)
    out[..., 5] = np.where(ops == OP["Solarize"], 255.0 * mags, 256.0)
    for i, name in enumerate(("AutoContrast", "Equalize", "Invert"), start=6):
        out[..., i] = ops == OP[name]
    out[..., 9] = ops
    return out.astype(np.float32)


def check_magnitude(magnitude) -> None:
    """ValueError unless 0 <= magnitude <= MAX_MAGNITUDE."""
    if not (isinstance(magnitude, (int, float)) and 0 <= magnitude <= MAX_MAGNITUDE
            and math.isfinite(magnitude)):
        raise ValueError(f"image option magnitude={magnitude!r} is out of range: expected "
                         f"a number in [0, {MAX_MAGNITUDE}]")

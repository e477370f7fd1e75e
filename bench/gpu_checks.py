"""The checks of `bench/gpu_check.py`, one function each, shared with tests/gpu (which run
them under `pytest -m gpu`). Every check takes a `Ctx` (the device under test, the data,
the sizes) and returns a dict of measured numbers, raising AssertionError when the device's
batches differ from the reference's by more than the stated tolerance.

The reference is always DALI's CPU backend on the same plan (same seed, epoch, indices,
augmentation parameters). With `Ctx.device == "cpu"` (the dry run) each check compares
DALI CPU with DALI CPU, which must agree exactly, plus the torch path where stated.
Tolerances (mean |difference| of normalized pixels, about 1/58 per 8-bit level):
IMAGE_TOL for nvJPEG / GPU resize against libjpeg-turbo / CPU resize, VIDEO_TOL for NVDEC's
YUV->RGB against FFmpeg's; everything that is not a pixel (index, label, timestamps,
lengths, masks, IMU) must be equal bit for bit: frames are aligned.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from bench.gpu_report import Deadline

IMAGE_TOL = 0.05
VIDEO_TOL = 0.08
TORCH_PATH_TOL = 0.05  # DALI vs the torch path: the loader contract's bound (docs/speed.md)
PRESETS = ("default", "throughput", "low_memory", "exact")


@dataclass
class Ctx:
    device: str            # "cuda" (a real run) or "cpu" (the dry run)
    work: Path             # data is generated here once
    image_size: int = 256  # JPEG side; clips are image_size x image_size too
    n_images: int = 64
    big_batch: int = 256   # the batch of the throughput checks
    steps: int = 20        # timed batches of the throughput checks
    repeats: int = 3       # interleaved rounds of compare.py (medians over them)
    large_photos: int = 8  # files of the large-photo set (3000-6000 px)
    cache: dict = field(default_factory=dict)
    deadline: Deadline | None = None  # bench/gpu_report.py: clips subprocess timeouts

    @property
    def gpu(self) -> bool:
        return self.device.startswith("cuda")

    def timeout(self, want: float, keep: float = 0.0) -> float:
        """A subprocess's timeout: `want` s, clipped to the time left before the deadline
        (less `keep`, held back for the checks after it)."""
        return want if self.deadline is None else self.deadline.timeout(want, keep)


def dry_ctx(work: Path) -> Ctx:
    return Ctx("cpu", work, image_size=64, n_images=16, big_batch=16, steps=3, large_photos=1,
               repeats=1)


# --- data --------------------------------------------------------------------------------
def _once(ctx: Ctx, name: str, make):
    """`make(ctx.work / name)` once per work folder: a finished folder is marked (a file
    beside it), so a rerun with the same `--work` reuses it; a half-made one (a run killed
    while writing it) is removed and made again."""
    if name not in ctx.cache:
        import shutil
        folder, done = ctx.work / name, ctx.work / f".{name}.done"
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            made = Path(make(folder))  # the data's root: the folder or one inside it
            done.write_text(str(made.relative_to(ctx.work)))
        ctx.cache[name] = ctx.work / done.read_text()
    return ctx.cache[name]


def images(ctx: Ctx, n: int | None = None) -> Path:
    """`n` JPEGs (default ctx.n_images) of image_size rows x 1.5 x image_size columns."""
    from dali_pipes.sample_data.sample_images import image_dataset
    side, n = ctx.image_size, n or ctx.n_images
    return _once(ctx, f"images_{n}", lambda p: image_dataset(
        n_images=n, n_classes=4, root=p, size=(side + side // 2, side)))


def large_photos(ctx: Ctx, copies: int = 1) -> Path:
    """ctx.large_photos camera-like JPEGs of 3000-6000 px, half of them progressive
    (dali_pipes/sample_data/sample_images.py), each linked `copies` times (a batch-256 set for
    the throughput check without drawing 256 photos: the decoders do not care that files
    repeat)."""
    from dali_pipes.sample_data.sample_images import image_dataset, large_photo_dataset
    distinct = _once(ctx, "large", lambda p: large_photo_dataset(
        n_images=ctx.large_photos, n_classes=2, root=p) if ctx.gpu else image_dataset(
        n_images=2, n_classes=2, root=p, size=(1200, 900)))  # dry: quick, 1200x900
    if copies == 1:
        return distinct

    def link(p):
        for f in distinct.rglob("*.jpg"):
            (p / f.parent.name).mkdir(parents=True, exist_ok=True)
            for k in range(copies):
                os.link(f, p / f.parent.name / f"{f.stem}_{k}.jpg")
        return p
    return _once(ctx, f"large_x{copies}", link)


def big_images(ctx: Ctx) -> Path:
    """Enough images for two batches of ctx.big_batch (the throughput checks)."""
    return images(ctx, 2 * ctx.big_batch)


def videos(ctx: Ctx, codec: str = "libvpx-vp9", size: tuple[int, int] | None = None) -> Path:
    """Four clips of (width, height) `size` (default: image_size square)."""
    from dali_pipes.sample_data.sample_video import small_video_folder
    size = size or (ctx.image_size, ctx.image_size)
    return _once(ctx, f"video_{codec}_{size[0]}x{size[1]}", lambda p: small_video_folder(
        p, n_videos=4, frames=(24, 17), size=size, codec=codec))


def frames(ctx: Ctx) -> Path:
    from dali_pipes.sources.frames import extract_tree

    def make(p):
        extract_tree(videos(ctx), p, progress=False)
        return p
    return _once(ctx, "frames", make)


def fusion(ctx: Ctx) -> Path:
    from dali_pipes.sample_data.sample_fusion import small_fusion_folder
    side = ctx.image_size
    return _once(ctx, "fusion", lambda p: small_fusion_folder(p, n_videos=4,
                                                             size=(side, side)))


def scenes(ctx: Ctx) -> Path:
    from dali_pipes.sample_data.sample_hyperspectral import small_scene_folder

    def make(p):
        small_scene_folder(p, lines=40, samples=48, bands=16)
        return p
    return _once(ctx, "hsi", make)


def detection_data(ctx: Ctx) -> Path:
    """Generated images with drawn shapes and their COCO file (polygons and RLE masks)."""
    from dali_pipes.sample_data.sample_detection import write_detection_folder
    return _once(ctx, "detection", lambda p: write_detection_folder(p, n_images=12, seed=4))


def rgba_images(ctx: Ctx) -> Path:
    """PNGs with an alpha channel beside the JPEGs of `images` (alpha="keep")."""
    import shutil

    from PIL import Image

    def make(p):
        shutil.copytree(images(ctx), p, dirs_exist_ok=True)
        rng = np.random.default_rng(2)
        side = ctx.image_size
        for k in range(4):
            pixels = rng.integers(0, 256, (side, side + side // 2, 4), dtype=np.uint8)
            Image.fromarray(pixels, "RGBA").save(sorted(p.glob("class_*"))[0] / f"rgba_{k}.png")
        return p
    return _once(ctx, "rgba", make)


# --- helpers -----------------------------------------------------------------------------
def loader(ctx: Ctx, modality: str, data, device: str | None = None, **kw):
    from torch_bridge import make_loader
    return make_loader(modality, data, backend=kw.pop("backend", "dali"),
                       device=device or ctx.device, seed=3, **kw)


def epoch(batches, n: int | None = None) -> list[dict]:
    out = []
    for i, b in enumerate(batches):
        out.append({k: v.clone() for k, v in b.items()})
        if n is not None and i + 1 >= n:
            break
    return out


def compare(got: list[dict], ref: list[dict], *, pixels: str, tol: float) -> dict:
    """Every non-pixel field equal, `pixels` within mean |diff| `tol`; the worst numbers."""
    assert len(got) == len(ref), f"{len(got)} batches vs {len(ref)} on the reference"
    worst_mean = worst_max = 0.0
    for g, r in zip(got, ref, strict=True):
        assert set(g) == set(r), f"fields differ: {sorted(set(g) ^ set(r))}"
        for name in g:
            if name != pixels:
                assert torch.equal(g[name].cpu(), r[name].cpu()), f"{name} differs"
        diff = (g[pixels].cpu().double() - r[pixels].cpu().double()).abs()
        worst_mean, worst_max = max(worst_mean, diff.mean().item()), max(worst_max,
                                                                        diff.max().item())
    assert worst_mean <= tol, f"{pixels}: mean |diff| {worst_mean:.4f} > {tol}"
    return {"batches": len(got), f"{pixels}_mean_abs": round(worst_mean, 5),
            f"{pixels}_max_abs": round(worst_max, 4), "tolerance": tol}


def on_device(ctx: Ctx, batches: list[dict]) -> None:
    want = "cuda" if ctx.gpu else "cpu"
    bad = sorted({k for b in batches for k, v in b.items() if v.device.type != want})
    assert not bad, f"fields not on {want}: {bad}"


def against_cpu(ctx: Ctx, modality: str, data, *, pixels: str, tol: float, **kw) -> dict:
    got = epoch(loader(ctx, modality, data, **kw))
    on_device(ctx, got)
    return compare(got, epoch(loader(ctx, modality, data, "cpu", **kw)), pixels=pixels,
                   tol=tol if ctx.gpu else 0.0)


# --- checks: modalities ------------------------------------------------------------------
def image_preset(ctx: Ctx, preset: str, train: bool) -> dict:
    return against_cpu(ctx, "image", images(ctx), pixels="image", tol=IMAGE_TOL,
                       batch_size=16, size=224, train=train, config=preset)


def image_torch_path(ctx: Ctx, preset: str) -> dict:
    """DALI on the device against the torch path (PIL / torchvision on the CPU) with
    `preset`, within the contract's bound between backends (TORCH_PATH_TOL)."""
    kw = dict(batch_size=16, size=224, train=False)
    dali = epoch(loader(ctx, "image", images(ctx), config=preset, **kw))
    ref = epoch(loader(ctx, "image", images(ctx), "cpu", backend="torch",
                       reference={"num_workers": 0}, **kw))
    return {"preset": preset, **compare(dali, ref, pixels="image", tol=TORCH_PATH_TOL)}


# colour jitter with hue, grayscale, blur and a policy: what the GPU graph runs as DALI's own
# operators (fn.hsv, arithmetic, fn.gaussian_blur), so the reference is DALI's CPU backend
# with the same operators (native_ops off: the fused CPU operators follow torchvision's
# hue, not fn.hsv's; docs/recipes.md)
PHOTOMETRIC = dict(color_jitter=(0.4, 0.4, 0.4, 0.1), grayscale=0.2, blur=0.5,
                   auto_augment="autoaugment")


def image_photometric(ctx: Ctx) -> dict:
    kw = dict(batch_size=8, size=96, config={"native_ops": False}, **PHOTOMETRIC)
    got = epoch(loader(ctx, "image", images(ctx), **kw))
    on_device(ctx, got)
    ref = epoch(loader(ctx, "image", images(ctx), "cpu", **kw))
    return compare(got, ref, pixels="image", tol=IMAGE_TOL if ctx.gpu else 0.0)


def image_outputs(ctx: Ctx) -> dict:
    """dtype float16 / bfloat16 / uint8 with channels_last: the dtype and memory format
    asked for, pixels within IMAGE_TOL (uint8: in levels, x58) of the CPU backend's."""
    out = {}
    for dtype in ("float16", "bfloat16", "uint8"):
        kw = dict(batch_size=8, size=64, dtype=dtype, memory_format="channels_last")
        got = epoch(loader(ctx, "image", images(ctx), **kw))
        on_device(ctx, got)
        for b in got:
            assert b["image"].dtype == getattr(torch, dtype), (dtype, b["image"].dtype)
            assert b["image"].is_contiguous(memory_format=torch.channels_last), dtype
        tol = IMAGE_TOL * (58 if dtype == "uint8" else 1) + (0.01 if dtype != "uint8" else 0)
        ref = epoch(loader(ctx, "image", images(ctx), "cpu", **kw))
        out[dtype] = compare(got, ref, pixels="image", tol=tol if ctx.gpu else 0.0)
    return out


def image_large_photos(ctx: Ctx) -> dict:
    """Large camera-like photos (nvJPEG with the hardware decoder, progressive files too)."""
    return against_cpu(ctx, "image", large_photos(ctx), pixels="image", tol=IMAGE_TOL,
                       batch_size=4, size=224)


def hyperspectral(ctx: Ctx, normalize: bool) -> dict:
    return against_cpu(ctx, "hyperspectral", scenes(ctx), pixels="cube", tol=1e-4,
                       batch_size=64, patch_size=5, normalize=normalize)


def band_math(ctx: Ctx) -> dict:
    from dali_pipes.geometry.bands import array_module, band_statistics, select_bands
    from dali_pipes.gpu.cupy_check import cupy_problem
    cube = np.random.default_rng(1).normal(size=(32, 64, 64)).astype(np.float32)
    module = array_module(ctx.device).__name__
    if ctx.gpu:
        assert module == "cupy", f"CuPy not used: {cupy_problem(torch.cuda.current_device())}"
    for got, want in zip(band_statistics(cube.reshape(32, -1), device=ctx.device),
                         band_statistics(cube.reshape(32, -1)), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert select_bands(cube, 4, device=ctx.device) == select_bands(cube, 4)
    return {"array_module": module}


def image_recipe(ctx: Ctx, recipe: str) -> dict:
    """A training recipe's graph (policy, erasing and mixing; timm-rand-m9) on the device."""
    return against_cpu(ctx, "image", images(ctx), pixels="image", tol=IMAGE_TOL,
                       batch_size=8, recipe=recipe, num_classes=4)


def image_alpha(ctx: Ctx) -> dict:
    return against_cpu(ctx, "image", rgba_images(ctx), pixels="image", tol=IMAGE_TOL,
                       batch_size=8, size=64, alpha="keep", adjust_orientation=True)


def detection(ctx: Ctx, train: bool) -> dict:
    """Boxes, labels and masks equal to the CPU backend's, images within IMAGE_TOL."""
    return against_cpu(ctx, "detection", detection_data(ctx), pixels="image", tol=IMAGE_TOL,
                       batch_size=4, size=96, train=train, masks=True)


CLIP = dict(batch_size=2, clip_length=8, stride=2, size=112)


def video_crops(ctx: Ctx, views: bool) -> dict:
    """Short-side resize + crop windows in the graph (random, or multi-view eval)."""
    kw = dict(CLIP, size=48, resize="short_side")
    if views:
        kw.update(train=False, views=(2, 3))
    return against_cpu(ctx, "video", videos(ctx, size=(ctx.image_size + ctx.image_size // 2,
                                                        ctx.image_size)),
                       pixels="frames", tol=VIDEO_TOL, **kw)


def video(ctx: Ctx, pad: str, codec: str = "libvpx-vp9") -> dict:
    return against_cpu(ctx, "video", videos(ctx, codec), pixels="frames", tol=VIDEO_TOL,
                       pad=pad, **CLIP)


def video_h264(ctx: Ctx) -> dict:
    import av
    if "libx264" not in av.codecs_available:
        raise RuntimeError("skip: this FFmpeg build has no H.264 encoder")
    return video(ctx, "repeat_last", codec="libx264")


def frame_folders(ctx: Ctx, pad: str) -> dict:
    return against_cpu(ctx, "video", frames(ctx), pixels="frames", tol=IMAGE_TOL, pad=pad,
                       **CLIP)


def fusion_clips(ctx: Ctx, pad: str) -> dict:
    return against_cpu(ctx, "fusion", fusion(ctx), pixels="frames", tol=VIDEO_TOL, pad=pad,
                       imu_offset=0.25, **CLIP)


def small_and_unsupported_clips(ctx: Ctx) -> dict:
    """160x120 VP9 (the built-in sample's size: 120 rows, below NVDEC's VP9 minimum of 128)
    and AV1 clips (no NVDEC AV1 on A100 / H100 / H200) load: what NVDEC cannot take is
    routed to DALI's CPU decoder or PyAV, never blamed on the sample."""
    import av
    out = {}
    sources = [("vp9_160x120", videos(ctx, size=(160, 120)))]
    av1 = next((c for c in ("libsvtav1", "libaom-av1") if c in av.codecs_available), None)
    if av1:
        sources.append(("av1", videos(ctx, av1)))
    for name, data in sources:
        ld = loader(ctx, "video", data, **CLIP)
        got = epoch(ld, n=1)
        out[name] = {"shape": list(got[0]["frames"].shape),
                     "decoder": ld.engine.modality.decoder(0)[0]}
    return out

"""Which modality local WebDataset shards hold, for the check tool without --modality: the
pack tool's manifest (`manifest.json` beside the shards) names it; other shards are told by
a detection set's `categories.json` beside them, else by their first members' names
(`<key>.frame_000000.jpg` or `<key>.timestamps.npy`: frame folders; a video extension:
video, with `<key>.imu.csv` fusion). Shards behind URLs are not opened here."""
from __future__ import annotations

import json
import tarfile
from pathlib import Path

from torch_bridge import registry

MEMBERS = 16  # members read from the first shard


def shard_modality(data) -> str | None:
    """The modality the local shards `data` (a .tar, a brace pattern, a list, a folder of
    .tar files) hold; None for shards that cannot be read here or tell nothing (the
    caller's default then applies and the source's own checks speak)."""
    from dali_pipes.sources.shard_names import flatten, shard_sources
    try:
        shards = flatten(shard_sources(data))
    except (OSError, ValueError):
        return None
    if not shards or "://" in shards[0]:
        return None
    folder = Path(shards[0]).parent
    return _packed(folder) or ("detection" if (folder / "categories.json").is_file()
                               else _by_members(shards[0]))


def _packed(folder: Path) -> str | None:
    """The modality the pack tool's manifest names (its kind's modality: frames -> video);
    the image modality for a manifest naming none (the pack tool's default)."""
    try:
        plan = json.loads((folder / "manifest.json").read_text()).get("plan", {})
    except (OSError, ValueError, AttributeError):
        return None
    kind = plan.get("modality", "image") if isinstance(plan, dict) else "image"
    return registry.KINDS[kind][0].name if kind in registry.KINDS else None


def _by_members(shard: str) -> str | None:
    from dali_pipes.sources.video import VIDEO_EXTENSIONS
    try:
        with tarfile.open(shard) as tar:
            names = [m.name for _, m in zip(range(MEMBERS), tar, strict=False)]
    except (OSError, tarfile.TarError):
        return None
    if any(".frame_" in n or n.endswith(".timestamps.npy") for n in names):
        return "video"
    if any(Path(n).suffix.lower() in VIDEO_EXTENSIONS for n in names):
        return "fusion" if any(n.endswith(".imu.csv") for n in names) else "video"
    return None

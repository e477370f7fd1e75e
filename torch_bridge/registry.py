"""One registry naming every modality once: name -> spec.

A spec says where everything of a modality lives: its kinds (one modality class each, the
first whose `detect(data)` holds is used: "video" over frame folders is the "frames" kind of
the "video" modality), its batch schema, its options with their defaults (read from the
class's option groups and constructor), the built-in sample data set `bench/compare.py`
makes and the tiny data set tests write. `make_loader`, `bench/compare.py`, `bench/run_one.py`,
`bench/diagnosis/loop.py` and the test fixtures all read it.

Classes, writers and a modality's own batch schema are named as "module:attribute" and
imported on first use, so reading the registry (e.g. for command-line choices) imports
neither DALI nor the modalities.
"""
from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dali_pipes import schema
from dali_pipes.option_groups import expand
from dali_pipes.stores import Store
from dali_pipes.stores.options import StoreOptions
from dali_pipes.stores.select import resolve_store
from torch_bridge._option_names import unknown_options_error
from torch_bridge._option_types import check_options
from torch_bridge.options import group_keywords, option_defaults, split_options

if TYPE_CHECKING:
    from torch_bridge.protocols import Modality

_NOT_OPTIONS = ("self", "data", "seed", "device", "store")


def _resolve(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True)
class Kind:
    """One modality class over one kind of data.

    `cls`, `detect` (a predicate on `data`; None: the fallback kind) and `tiny` (a
    `write(root, source) -> Path` test-data writer) are "module:attribute" names;
    `tiny_options` are make_loader options that keep batches of the tiny data small.
    `detect(data, store)` also gets the store `data` is in."""

    name: str
    cls: str
    tiny: str
    tiny_options: Mapping[str, Any] = field(default_factory=dict)
    detect: str | None = None

    def modality_class(self) -> type[Modality]:
        """The modality class (imported on first use)."""
        return _resolve(self.cls)

    def tiny_writer(self) -> Callable:
        """The tiny test-data writer (imported on first use)."""
        return _resolve(self.tiny)

    def matches(self, data, store: Store | None = None) -> bool:
        """Whether this kind reads `data` in `store` (always, for a kind without `detect`)."""
        return self.detect is None or bool(_resolve(self.detect)(data, store))


@dataclass(frozen=True)
class ModalitySpec:
    """Everything the project knows about one user-facing modality name."""

    name: str
    kinds: tuple[Kind, ...]
    # the batch's fields and the graph's outputs: a BatchSchema, or "module:attribute" naming
    # a modality's own (imported on first use, as the classes are)
    schema_of: schema.BatchSchema | str
    sample: str  # "module:function" making the built-in sample data set (cached)
    sample_note: str  # what the progress bar says while it makes it (<= 38 characters)
    # the rows `bench/compare.py` runs by default ("dali:<preset>": another decode preset)
    compare_rows: tuple[str, ...] = ("dali", "torch")
    # "module:function(data) -> bool": whether a local folder holds this modality's data
    # (the check tool's guess without --modality); None: the fallback when none claims it
    holds: str | None = None

    @functools.cached_property
    def batch_schema(self) -> schema.BatchSchema:
        """The batch's fields and the graph's outputs (`schema_of`, resolved)."""
        return _resolve(self.schema_of) if isinstance(self.schema_of, str) else self.schema_of

    def claims(self, data) -> bool:
        """Whether `holds` says the local folder `data` is this modality's data."""
        return self.holds is not None and bool(_resolve(self.holds)(data))

    def schema(self, *, multi_source: bool = False, variable: bool = False,
               views: bool = False) -> dict[str, tuple[str, str]]:
        """Every field of a batch (`dali_pipes.schema.BatchSchema.batch`)."""
        return self.batch_schema.batch(multi_source=multi_source, variable=variable,
                                       views=views)

    def options(self) -> dict[str, Any]:
        """Every modality option (of all kinds) by flat keyword, with its default; the store
        options (`StoreOptions`: they describe the built-in stores) belong to every
        modality. The keywords of whole groups are `groups()`."""
        out: dict[str, Any] = {}
        for kind in self.kinds:
            cls = kind.modality_class()
            for name, default in option_defaults(cls.option_groups).items():
                out.setdefault(name, default)
            for name, param in inspect.signature(cls).parameters.items():
                if name not in _NOT_OPTIONS and param.kind is param.KEYWORD_ONLY:
                    out.setdefault(name, param.default)
        for name, default in option_defaults((StoreOptions,)).items():
            out.setdefault(name, default)
        return out

    def groups(self) -> dict[str, type]:
        """The option groups a keyword takes whole (image: `mixing` -> `Mixing`, ...), of
        all kinds: the groups nested in the modality classes' `option_groups`."""
        out: dict[str, type] = {}
        for kind in self.kinds:
            for name, group in group_keywords(kind.modality_class().option_groups).items():
                out.setdefault(name, group)
        return out

    def kind_for(self, data, store: Store | None = None) -> Kind:
        """The first kind whose `detect` accepts `data` (in `store`)."""
        return next(kind for kind in self.kinds if kind.matches(data, store))

    def sample_maker(self) -> Callable:
        """The built-in sample data maker: `make(progress=None) -> Path`."""
        return _resolve(self.sample)

    def create(self, data, *, seed: int, device: str, options: Mapping[str, Any],
               keywords: Sequence[str] = (), store: Store | None = None):
        """The modality object for `data`.

        Args:
            data: the folder(s) the user gave (paths in `store` when one is given).
            seed: the loader's seed.
            device: the loader's device, as a string.
            options: the modality options make_loader received (flat keywords and
                whole groups).
            keywords: make_loader's own keywords (suggested for a misspelt option).
            store: a store the user handed in (None: chosen from `data` and the store
                options, `dali_pipes.stores.select.resolve_store`).

        Returns:
            A `torch_bridge.protocols.Modality`.
        """
        valid = [*self.options(), *self.groups()]
        unknown = [name for name in options if name not in valid]
        if unknown:
            raise unknown_options_error(unknown, list(dict.fromkeys(valid)), keywords,
                                        self.name)
        where = f"make_loader({self.name!r})"
        given = split_options(options, (StoreOptions,), rest=True, where=where)
        check_options(StoreOptions, given[StoreOptions], where=where)
        store = resolve_store(data, store, StoreOptions(**given[StoreOptions]))
        cls: Any = self.kind_for(data, store).modality_class()  # a concrete class (its __init__)
        # groups given whole (`mixing=Mixing(...)`) as flat keywords, each checked by type
        options = expand(given[None], cls.option_groups, where=where)
        check_options(cls, options, where=where)
        takes_device = "device" in inspect.signature(cls).parameters
        return cls(data, seed=seed, store=store,
                   **({"device": device} if takes_device else {}), **options)


_CLIP = dict(batch_size=2, clip_length=4, stride=2, size=16)

REGISTRY: dict[str, ModalitySpec] = {spec.name: spec for spec in (
    ModalitySpec("image", (
        Kind("image", "torch_bridge.modalities.image:ImageModality",
             "dali_pipes.sample_data.tiny_data:image", dict(batch_size=4, size=16)),),
        schema.IMAGE_SCHEMA,
        "dali_pipes.sample_data.sample_images:image_dataset",
        "writing sample photos (first run only)",
        ("dali", "torch", "classic", "dali-stock", "adapter")),
    ModalitySpec("video", (
        Kind("frames", "torch_bridge.modalities.video_frames:FrameFolderModality",
             "dali_pipes.sample_data.tiny_data:frames", _CLIP,
             detect="dali_pipes.sources.frame_data:is_frame_data"),
        Kind("video", "torch_bridge.modalities.video:VideoModality",
             "dali_pipes.sample_data.tiny_data:video", _CLIP)),
        schema.VIDEO_SCHEMA,
        "dali_pipes.sample_data.sample_video:video_dataset",
        "writing sample VP9 clips (first run)",
        holds="dali_pipes.sources.frame_data:holds_video"),
    ModalitySpec("hyperspectral", (
        Kind("hyperspectral", "torch_bridge.modalities.hyperspectral:HyperspectralModality",
             "dali_pipes.sample_data.tiny_data:hyperspectral", dict(batch_size=16, patch_size=3)),),
        schema.HYPERSPECTRAL_SCHEMA,
        "dali_pipes.sample_data.sample_hyperspectral:hyperspectral_dataset",
        "writing sample ENVI/SPE scenes",
        holds="dali_pipes.sources.hyperspectral:holds_scenes"),
    ModalitySpec("fusion", (
        Kind("fusion", "torch_bridge.modalities.fusion:FusionModality",
             "dali_pipes.sample_data.tiny_data:fusion", dict(_CLIP, imu_offset=0.25)),),
        schema.FUSION_SCHEMA,
        "dali_pipes.sample_data.sample_fusion:fusion_dataset",
        "writing sample clips + 200 Hz IMU",
        holds="dali_pipes.sources.fusion:holds_imu"),
    ModalitySpec("detection", (
        Kind("detection", "torch_bridge.modalities.detection:DetectionModality",
             "dali_pipes.sample_data.sample_detection:tiny", dict(batch_size=4, size=32)),),
        schema.DETECTION_SCHEMA,
        "dali_pipes.sample_data.sample_detection:detection_dataset",
        "writing sample COCO-annotated photos",
        holds="dali_pipes.sources.detection:holds_coco"),
    ModalitySpec("arrays", (
        Kind("arrays", "torch_bridge.modalities.arrays:ArraysModality",
             "dali_pipes.sample_data.sample_arrays:tiny", dict(batch_size=4, length=8)),),
        "dali_pipes.sources.arrays:ARRAYS_SCHEMA",
        "dali_pipes.sample_data.sample_arrays:arrays_dataset",
        "writing sample .npy series",
        holds="dali_pipes.sources.arrays:holds_arrays"),
)}

# Every kind by its own name ("frames": the video modality over frame folders).
KINDS: dict[str, tuple[ModalitySpec, Kind]] = {
    kind.name: (spec, kind) for spec in REGISTRY.values() for kind in spec.kinds}


def names() -> tuple[str, ...]:
    """The user-facing modality names, in registry order."""
    return tuple(REGISTRY)


def get(name: str) -> ModalitySpec:
    """The spec of modality `name`; ValueError listing the known names otherwise."""
    if name not in REGISTRY:
        raise ValueError(f"unknown modality {name!r}; expected one of {', '.join(REGISTRY)}")
    return REGISTRY[name]

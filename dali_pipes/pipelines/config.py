"""Decode presets: TOML files beside the builders, chosen with `config=` in make_loader.

A preset's keys are flat (`hw_decoder_load = 0.9`); the GPU decoder's settings may also be
written as a `[gpu_decode]` table, the group `PipelineConfig.gpu_decode` holds them in."""
from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from dali_pipes.launch_env import local_world_size
from dali_pipes.option_groups import build, expand, group, group_values, leaves

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

PRESET_DIR = Path(__file__).with_name("presets")


@dataclass(frozen=True)
class GpuDecodeOptions:
    """The GPU's JPEG decoders (nvJPEG and the hardware decoder); the CPU backend ignores
    them. Each is documented in presets/default.toml."""

    jpeg_fancy_upsampling: bool = False
    hw_decoder_load: float = 0.65
    device_memory_padding: int = 16 * 1024 * 1024
    host_memory_padding: int = 8 * 1024 * 1024
    preallocate_width_hint: int = 0
    preallocate_height_hint: int = 0


@dataclass(frozen=True)
class PipelineConfig:
    """Every knob a preset may set; each is documented in presets/default.toml."""

    num_threads: int = 0  # 0: this rank's share of its cores, plus one (default_threads)
    prefetch_queue_depth: int = 2
    # DALI pipelines of the graph taking batches in turn (torch_bridge.engines._pipe_ring), each
    # with its share of num_threads; 0: 2 for a graph whose augmentation policy runs on
    # DALI's own operators on the CPU backend with >= 2 cores, else 1.
    pipelines: int = 0
    # Worker processes preparing the external_source inputs of upcoming batches (reads,
    # PyAV decoding, alignment: a modality's feeds) beside DALI; 0: in the main process;
    # "auto": workers only for clips that go through the PyAV fallback, one per core of
    # this rank (torch_bridge.engines._autoworkers).
    py_num_workers: int | str = "auto"
    use_fast_idct: bool = False
    # Large JPEGs on the CPU backend: decode crop windows >= 2x the output at 1/2-1/8
    # scale in the feed (torch_bridge/modalities/image_scaled.py).
    scaled_jpeg_decode: bool = True
    antialias: bool = True
    # dali_pipes' fused CPU operators (dali_pipes/native) where they can be built
    native_ops: bool = True
    # CPU backend: JPEG crop windows decoded with libjpeg-turbo's partial decoding and
    # resized in one native operator (dali_pipes/pipelines/jpeg_partial.py); needs
    # native_ops and libjpeg-turbo's headers, else DALI's decoder
    jpeg_partial_decode: bool = True
    gpu_decode: GpuDecodeOptions = group(GpuDecodeOptions)

    def threads(self) -> int:
        """num_threads, or (0) the default: this rank's share of its CPU cores plus one
        (see `default_threads`)."""
        return self.num_threads if self.num_threads > 0 else default_threads()


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity)."""
    return _usable_cores()


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def ranks_per_node() -> int:
    """Processes sharing this node's CPUs: LOCAL_WORLD_SIZE (torchrun, also set by our
    SLURM / Kubernetes launch recipes), else 1; a malformed value is a ValueError naming it
    (`dali_pipes.launch_env`)."""
    return local_world_size()


def default_threads(cores: int | None = None, node_cores: int | None = None,
                    ranks: int | None = None) -> int:
    """DALI threads of one rank: its usable cores (CPU affinity) plus one. When the
    affinity is the whole node and `ranks` > 1 processes share it, each rank takes
    cores // ranks (at least 1) instead, so 8 ranks never start 8 x (cores + 1) threads.

    Args:
        cores: usable cores of this process (default: os.sched_getaffinity).
        node_cores: cores of the node (default: os.cpu_count()).
        ranks: processes per node (default: `ranks_per_node()`).
    Returns:
        the thread count, >= 1.
    """
    cores = _usable_cores() if cores is None else cores
    node_cores = (os.cpu_count() or cores) if node_cores is None else node_cores
    ranks = ranks_per_node() if ranks is None else ranks
    if ranks > 1 and cores >= node_cores:  # not pinned per rank by the launcher: share
        return max(1, cores // ranks)
    return cores + 1


def affine_threads() -> bool:
    """Whether DALI's mixed decoders may pin their threads to cores (`affine=`): only when
    this process has the node alone; ranks sharing a node would pin to the same cores."""
    return ranks_per_node() == 1


def available_presets() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml"))


def load_config(config: str | os.PathLike | Mapping[str, Any] | PipelineConfig | None
                ) -> PipelineConfig:
    """A PipelineConfig from a preset name, a TOML path, a mapping, or None (default)."""
    if isinstance(config, PipelineConfig):
        return config
    if config is None:
        config = "default"
    if isinstance(config, Mapping):
        return _from_mapping(dict(config), "<config mapping>")
    path = Path(config)
    if path.suffix != ".toml" and not path.exists():
        path = PRESET_DIR / f"{config}.toml"
        if not path.exists():
            raise ValueError(f"unknown decode preset {str(config)!r}; presets: "
                             f"{', '.join(available_presets())}, or a path to a .toml file")
    try:
        with open(path, "rb") as f:
            table = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML: {exc}") from exc
    return _from_mapping(table, str(path))


def config_values(config: PipelineConfig) -> dict[str, Any]:
    """Every setting of `config` by its preset key (flat: `hw_decoder_load`, not
    `gpu_decode.hw_decoder_load`), in the order of presets/default.toml."""
    return group_values(PipelineConfig, config, where="config")


def _from_mapping(table: dict[str, Any], where: str) -> PipelineConfig:
    table.pop("description", None)
    table = expand(table, (PipelineConfig,), where=where)  # a [gpu_decode] table: flat keys
    options = leaves(PipelineConfig)
    unknown = sorted(set(table) - set(options))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; known keys: {sorted(options)}")
    values: dict[str, Any] = {}  # each value's type is checked against the field's below
    for key, value in table.items():
        if key == "py_num_workers":
            values[key] = _check_workers(value, where)
            continue
        kind = type(options[key].default)
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if type(value) is not kind:
            raise ValueError(f"{where}: {key} must be {kind.__name__}, got {value!r}")
        values[key] = value
    cfg = build(PipelineConfig, values)
    if cfg.num_threads < 0 or cfg.prefetch_queue_depth < 1:
        raise ValueError(f"{where}: num_threads must be >= 0 and prefetch_queue_depth >= 1")
    if not 0 <= cfg.pipelines <= 8:
        raise ValueError(f"{where}: pipelines must be in [0, 8] (0: automatic), got "
                         f"{cfg.pipelines}")
    load = cfg.gpu_decode.hw_decoder_load
    if not 0.0 <= load <= 1.0:
        raise ValueError(f"{where}: hw_decoder_load must be in [0, 1], got {load}")
    return cfg


def _check_workers(value, where: str) -> int | str:
    """py_num_workers: an int >= 0 or "auto"."""
    if value == "auto" or (type(value) is int and value >= 0):
        return value
    raise ValueError(f"{where}: py_num_workers must be an int >= 0 or \"auto\", got {value!r}")


DaliDevice = Literal["cpu", "gpu"]  # a DALI graph's device: its CPU backend or the GPU


def check_device(device: str) -> None:
    if device not in ("cpu", "gpu"):
        raise ValueError(f"device must be 'cpu' or 'gpu', got {device!r}")


def define_pipeline(graph_fn, *, device: str, batch_size: int, config: PipelineConfig,
                    device_id: int | None = None, **graph_kwargs):
    """Define (not build) `graph_fn(device=device, **graph_kwargs)` as a pipeline with DALI
    conditionals, on the GPU (`device="gpu"`) or DALI's CPU backend (`device_id=None`)."""
    from nvidia.dali import pipeline_def

    check_device(device)
    make = pipeline_def(enable_conditionals=True)(graph_fn)
    return make(batch_size=batch_size, num_threads=config.threads(), seed=0,
                device_id=(device_id or 0) if device == "gpu" else None,
                prefetch_queue_depth=config.prefetch_queue_depth, exec_dynamic=True,
                device=device, **graph_kwargs)

"""The error for option names `make_loader` does not know: the closest valid name, and where
options of the engines go (`reference=` for the torch path's DataLoader, `config=` for the
DALI graph), instead of a list of every option."""
from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Sequence


def _squash(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


def closest(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate `name` most likely meant: the same letters without underscores
    (`batchsize` -> `batch_size`), else the closest spelling; None when none is close."""
    pool = sorted(set(candidates))
    same = [c for c in pool if _squash(c) == _squash(name)]
    if same:
        return same[0]
    near = difflib.get_close_matches(name, pool, n=1, cutoff=0.75)
    return near[0] if near else None


def _engine_fields() -> tuple[set[str], set[str]]:
    """(the torch path's `ReferenceOptions` fields, the DALI `PipelineConfig` fields)."""
    from dali_pipes.pipelines.config import PipelineConfig
    from torch_bridge.engines.reference import ReferenceOptions
    return ({f.name for f in dataclasses.fields(ReferenceOptions)},
            {f.name for f in dataclasses.fields(PipelineConfig)})


def _hint(name: str, valid: Sequence[str]) -> tuple[str, bool]:
    """What `name` likely means, and whether that was found."""
    reference, config = _engine_fields()
    if name in reference:
        return (f"{name} is a DataLoader option of the torch backend: pass "
                f"reference={{{name!r}: ...}} with backend='torch' (the DALI backend's feed "
                f"workers are config={{'py_num_workers': N}})", True)
    if name in config:
        return f"{name} is a DALI pipeline option: pass config={{{name!r}: ...}}", True
    guess = closest(name, [*valid, *reference, *config])
    if guess is None:
        return f"{name}: no option of that name", False
    where = ("" if guess in valid else " (in reference={...})" if guess in reference
             else " (in config={...})")
    return f"{name}: did you mean {guess}{where}?", True


def unknown_options_error(unknown: Sequence[str], options: Sequence[str],
                          keywords: Sequence[str], modality: str) -> ValueError:
    """A ValueError naming each unknown option with its likely meaning.

    Args:
        unknown: the names given that make_loader does not take.
        options: the modality's options.
        keywords: make_loader's own keywords (batch_size, shuffle, ...).
        modality: the modality's name.

    Returns:
        The error to raise; its message ends with the modality's option names.
    """
    found = [_hint(name, [*options, *keywords]) for name in unknown]
    hints = [text for text, _ in found]
    listed = "" if all(ok for _, ok in found) else (
        f". The {modality} options: {', '.join(options)} (defaults: docs/api.md)")
    return ValueError(f"unknown option{'s' * (len(unknown) > 1)} {', '.join(unknown)} for "
                      f"modality {modality!r}: {'; '.join(hints)}{listed}")

"""The error for option names `make_loader` does not know: the closest valid name (an
option, a group or a shorthand), and where options of the engines go (`reference=` /
`TorchBackend` for the torch path's DataLoader, `config=` / `DaliBackend` for the DALI
graph), instead of a list of every option."""
from __future__ import annotations

from collections.abc import Sequence

from dali_pipes.option_groups import closest, leaves


def _engine_fields() -> tuple[set[str], set[str]]:
    """(the torch path's `ReferenceOptions` fields, the DALI `PipelineConfig` keys)."""
    from dali_pipes.pipelines.config import PipelineConfig
    from torch_bridge.engines.reference import ReferenceOptions
    return set(leaves(ReferenceOptions)), set(leaves(PipelineConfig))


def _hint(name: str, valid: Sequence[str]) -> tuple[str, bool]:
    """What `name` likely means, and whether that was found."""
    reference, config = _engine_fields()
    if name in reference:
        return (f"{name} is a DataLoader option of the torch backend: pass "
                f"reference={{{name!r}: ...}} with backend='torch', or "
                f"backend=TorchBackend({name}=...) (the DALI backend's feed workers are "
                f"config={{'py_num_workers': N}})", True)
    if name in config:
        return (f"{name} is a DALI pipeline option: pass config={{{name!r}: ...}}, or "
                f"backend=DaliBackend(config={{{name!r}: ...}})", True)
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

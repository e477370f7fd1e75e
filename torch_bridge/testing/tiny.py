"""Tiny data sets of the registered modality kinds, for the loader contract and the tests.

`tiny_data_set(tmp_path_factory, kind)` writes kind's two tiny data sets (the registry's
`Kind.tiny` writer, sources 0 and 1) once per pytest session and gives a `TinyData`: the
folders and the make_loader options that keep its batches small (`Kind.tiny_options`).
"""
from __future__ import annotations

from pathlib import Path

from torch_bridge import registry

BACKENDS = ("dali", "torch")  # every backend of make_loader

_written: dict[tuple[str, str], TinyData] = {}  # (session's base folder, kind) -> data set


class TinyData:
    """One modality kind's tiny data set: `one` folder, `two` folders (two sources), and the
    make_loader options that keep its batches small; `loader()` builds a loader on it."""

    def __init__(self, kind: str, one, two: list):
        spec, entry = registry.KINDS[kind]
        self.kind, self.one, self.two = kind, one, two
        self.modality = spec.name
        self.options = dict(entry.tiny_options)

    def loader(self, backend: str = "dali", data=None, **overrides):
        """A loader on `data` (default: `one`) with the small options and `overrides`; the
        torch backend reads in its own process unless `reference` asks for workers (they
        cost seconds per loader)."""
        from torch_bridge import make_loader
        options = dict(self.options, backend=backend)
        options.update(overrides)
        if backend == "torch":
            options.setdefault("reference", {"num_workers": 0})
        return make_loader(self.modality, self.one if data is None else data, **options)


def tiny_data_set(tmp_path_factory, kind: str) -> TinyData:
    """`kind`'s tiny data set, written under the session's temporary folder on first use."""
    key = (str(tmp_path_factory.getbasetemp()), kind)
    if key not in _written:
        base: Path = tmp_path_factory.mktemp(f"tiny_{kind}")
        write = registry.KINDS[kind][1].tiny_writer()
        two = [write(base / f"{kind}_{source}", source) for source in (0, 1)]
        _written[key] = TinyData(kind, two[0], two)
    return _written[key]

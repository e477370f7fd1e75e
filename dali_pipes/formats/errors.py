"""The one error type every format reader raises for bad input."""
from __future__ import annotations

import os
from typing import Any


class FormatError(ValueError):
    """A file does not hold what it claims to hold.

    The message names the file, the offending field, the value found and, where known,
    what was expected, so a user can fix the file without reading our code.
    """

    def __init__(self, path: str | os.PathLike, field: str, message: str, *,
                 value: Any = None, expected: Any = None):
        self.path = os.fspath(path)
        self.field = field
        self.value = value
        self.expected = expected
        text = f"{self.path}: {field}: {message}"
        if value is not None:
            text += f" (found {value!r}"
            text += f", expected {expected})" if expected is not None else ")"
        elif expected is not None:
            text += f" (expected {expected})"
        super().__init__(text)

"""File-format readers (numpy only): each validates on open and raises FormatError."""
from dali_pipes.formats.errors import FormatError

__all__ = ["FormatError"]

"""File-format readers (numpy only): each validates on open and raises FormatError."""
from dali_pipes.formats.envi import EnviCube, EnviHeader, open_envi
from dali_pipes.formats.errors import FormatError
from dali_pipes.formats.spe import SpeFile, SpeHeader, SpeLayout, open_spe

__all__ = ["EnviCube", "EnviHeader", "FormatError", "SpeFile", "SpeHeader", "SpeLayout",
           "open_envi", "open_spe"]

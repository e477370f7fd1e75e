"""File-format readers (numpy only): each validates on open and raises FormatError."""
from dali_pipes.formats.envi import EnviCube, EnviHeader, open_envi
from dali_pipes.formats.errors import FormatError
from dali_pipes.formats.imu import ImuStream, read_imu, write_imu
from dali_pipes.formats.jpeg_scan import jpeg_size
from dali_pipes.formats.spe import SpeFile, SpeHeader, SpeLayout, open_spe

__all__ = ["EnviCube", "EnviHeader", "FormatError", "ImuStream", "SpeFile", "SpeHeader",
           "SpeLayout", "jpeg_size", "open_envi", "open_spe", "read_imu", "write_imu"]

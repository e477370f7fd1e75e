"""Index-addressable readers, one per modality (numpy only)."""
from dali_pipes.sources.folders import ClassFolderListing, list_class_folders
from dali_pipes.sources.image import ImageFolderSource

__all__ = ["ClassFolderListing", "ImageFolderSource", "list_class_folders"]

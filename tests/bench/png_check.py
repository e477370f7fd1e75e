"""A PNG check shared by the compare and tune tests: the picture has content."""
from pathlib import Path

import numpy as np


def assert_plot_has_content(path: Path, *, min_colours: int = 3) -> None:
    """The PNG is not blank: several distinct colours, and non-white pixels inside the
    central region where the axes are (not only in the margins)."""
    from PIL import Image
    pixels = np.asarray(Image.open(path).convert("RGB"))
    h, w, _ = pixels.shape
    colours = np.unique(pixels.reshape(-1, 3), axis=0)
    assert len(colours) >= min_colours, f"{path}: {len(colours)} colours"
    inner = pixels[h // 5: 4 * h // 5, w // 10: 9 * w // 10]
    drawn = (inner < 200).any(axis=2)  # clearly not white
    assert drawn.mean() > 0.01, f"{path}: plot area is {drawn.mean():.2%} drawn"
    saturated = (inner.max(axis=2).astype(int) - inner.min(axis=2)) > 80  # coloured marks
    assert saturated.sum() > 100, f"{path}: no coloured bars or lines"

"""Checks that a PNG the code wrote is a drawn figure, not just a valid file."""

from pathlib import Path

import numpy as np


def assert_drawn_png(path, *, min_width: int = 400, min_height: int = 300, min_colours: int = 8):
    """``path`` is a PNG of at least ``min_width`` x ``min_height`` pixels that is not
    blank: its pixels vary and it uses at least ``min_colours`` distinct colours."""
    from matplotlib.image import imread

    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    img = imread(path)  # (height, width, channels), floats in [0, 1]
    assert img.ndim == 3 and img.shape[0] >= min_height and img.shape[1] >= min_width, img.shape
    rgb = np.round(img[..., :3] * 255).astype(np.uint8).reshape(-1, 3)
    assert float(rgb.astype(np.float64).var()) > 100.0, f"{path} is (nearly) blank"
    colours = len(np.unique(rgb, axis=0))
    assert colours >= min_colours, f"{path} has only {colours} colours"
    # the background is not everything: at least 1% of the pixels are drawn on
    background = np.all(rgb == np.bincount(rgb[:, 0]).argmax(), axis=1)
    assert (~background).mean() > 0.01, f"{path} is almost all background"

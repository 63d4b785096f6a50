"""JPEG encoding of extracted frames."""

from __future__ import annotations

from io import BytesIO

import numpy as np
from PIL import Image


def encode_jpeg(rgb: np.ndarray, quality: int = 90) -> bytes:
    """Baseline JPEG of an HxWx3 uint8 image; same input and Pillow build give the same bytes."""
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
        raise ValueError(f"expected HxWx3 uint8, got {rgb.shape} {rgb.dtype}")
    buf = BytesIO()
    # No EXIF/ICC or timestamps are written; optimize=False keeps the default Huffman tables.
    Image.fromarray(rgb).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()

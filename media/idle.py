"""Where video frames come from when no explicit frame is scheduled: a `FrameSource`.

`frame(index, offsets)` draws frame `index` with face landmark offsets (speech) or None (idle).
The avatar renderer (`media.avatar.Avatar`) is the real source, with blinks and head motion;
`StillPortrait` is the transport-level fallback that shows the portrait as-is, so video never
depends on a model being loaded.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np


class FrameSource(Protocol):
    def frame(self, index: int, offsets: np.ndarray | None = None) -> np.ndarray:
        """RGB uint8 (H, W, 3) for video frame `index`; `offsets` [68, 2] or None (idle)."""
        ...


def default_portrait() -> np.ndarray:
    """`skimage.data.astronaut()`: a bundled public-domain portrait (NASA), 512x512 RGB."""
    from skimage import data

    return np.ascontiguousarray(data.astronaut(), dtype=np.uint8)


def fit_image(image: np.ndarray, width: int, height: int) -> np.ndarray:
    """Scale and centre-crop an RGB image to exactly (height, width, 3) uint8."""
    from skimage.transform import resize

    h, w = image.shape[:2]
    scale = max(width / w, height / h)
    if (h, w) != (height, width):
        new_h, new_w = max(height, round(h * scale)), max(width, round(w * scale))
        resized = resize(image, (new_h, new_w), order=1, anti_aliasing=True, preserve_range=True)
        top, left = (new_h - height) // 2, (new_w - width) // 2
        image = resized[top : top + height, left : left + width]
    return np.ascontiguousarray(image, dtype=np.uint8)


class StillPortrait:
    """The portrait as-is on every idle frame."""

    def __init__(self, image: np.ndarray, width: int, height: int) -> None:
        self._frame = fit_image(image, width, height)
        self._frame.setflags(write=False)

    def frame(self, index: int, offsets: np.ndarray | None = None) -> np.ndarray:
        return self._frame

"""Audio-to-landmark contract: what a session needs of a face engine.

Landmarks are 68 points in iBUG 300-W order (`common.face_geometry`), as offsets from a neutral
face in a normalized face frame, one row per video frame at the engine's `fps`. Every runtime
(`engines.face.runtime.FaceRuntime` and its subclasses) satisfies it, as does any test double.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from common.face_geometry import NUM_LANDMARKS


class FaceAnimator(Protocol):
    fps: int

    def animate(self, pcm: np.ndarray, sample_rate: int) -> np.ndarray:
        """Speech PCM -> landmark offsets [T, 68, 2] float32 at `fps`."""
        ...


__all__ = ["NUM_LANDMARKS", "FaceAnimator"]

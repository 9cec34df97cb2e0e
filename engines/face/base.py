"""Audio-to-landmark contract.

Landmarks are 68 points in iBUG 300-W order, as offsets from a neutral face in a normalized face
frame (see engines/face docs), one row per video frame at the model's `fps`.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

NUM_LANDMARKS = 68


class FaceModel(Protocol):
    fps: int

    def predict(self, features: np.ndarray) -> np.ndarray:
        """features [T_feat, n_mels] float32 -> landmark offsets [T_frames, 68, 2] float32."""
        ...

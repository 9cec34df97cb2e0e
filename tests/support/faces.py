"""Lip shapes for the renderer's tests: named articulation parameters -> landmark offsets."""

from __future__ import annotations

import numpy as np

from common.face_geometry import PARAMS, params_to_offsets


def offsets(**values: float) -> np.ndarray:
    """Offsets [68, 2] for the named parameters (`open`, `jaw`, ...), the others at rest."""
    params = np.zeros((1, len(PARAMS)), np.float32)
    for name, v in values.items():
        params[0, PARAMS.index(name)] = v
    return params_to_offsets(params)[0]

"""Portrait intake: a user's photo -> a checked RGB image and its 68 landmarks, once per portrait.

Apart from the face runtimes because it is a different job with a different model (dlib's
detector and shape predictor, run once per upload, not per frame). Contract in `intake.py`.
"""

from engines.portrait.errors import (
    NoFaceError,
    NotAnImageError,
    PortraitError,
    PortraitSizeError,
    SeveralFacesError,
)
from engines.portrait.intake import (
    MAX_BYTES,
    MAX_SIDE,
    MIN_FACE,
    MIN_SIDE,
    detect_faces,
    detect_portrait_landmarks,
    load_portrait,
    predictor_path,
)

__all__ = [
    "MAX_BYTES",
    "MAX_SIDE",
    "MIN_FACE",
    "MIN_SIDE",
    "NoFaceError",
    "NotAnImageError",
    "PortraitError",
    "PortraitSizeError",
    "SeveralFacesError",
    "detect_faces",
    "detect_portrait_landmarks",
    "load_portrait",
    "predictor_path",
]

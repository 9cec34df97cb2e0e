"""The normalized face frame and the articulation basis that turns mouth parameters into landmarks.

Normalized face frame (shared by the model's outputs and the renderer): origin at the midpoint of
the outer eye corners (iBUG points 36 and 45), x axis from point 36 to point 45 (image left to
right on an upright face), y axis perpendicular to it pointing down (image convention), unit
length = the distance between points 36 and 45. Landmark offsets are displacements of the 68
iBUG 300-W points from the portrait's neutral face in these units, so one offset sequence drives
any portrait at any size or roll.

Articulation parameters (one row per video frame, each 0..1):
  open   lip aperture: inner lips part, lower lip drops most;
  width  lips spread (as in "ee"): corners move out and up slightly;
  round  lips rounded/pursed (as in "oo", "w"): corners move in, outer lips bulge;
  jaw    jaw drop: chin and lower jaw line move down, the lower lip with them;
  brow   brows raised (emphasis).
`BASIS` [5, 68, 2] holds the displacement of every point at parameter value 1; offsets are the
linear combination. Magnitudes are proportions of a typical adult face (outer-eye-corner
distance ~ 90 mm, maximal speech lip gap ~ 22 mm, jaw drop ~ 12 mm at the chin).

This is the contract between the face model (`engines.face`, which predicts offsets) and the
renderer (`media.avatar`, which draws them), so it lives in `common`, which both may import:
pure NumPy, no model.
"""

from __future__ import annotations

import numpy as np

NUM_LANDMARKS = 68
PARAMS = ("open", "width", "round", "jaw", "brow")

# iBUG 300-W index groups used by the renderer and the metrics.
JAW = tuple(range(17))
BROWS = tuple(range(17, 27))
NOSE = tuple(range(27, 36))
RIGHT_EYE = tuple(range(36, 42))  # subject's right = image left
LEFT_EYE = tuple(range(42, 48))
OUTER_LIPS = tuple(range(48, 60))
INNER_LIPS = tuple(range(60, 68))
# (upper, lower) inner-lip pairs facing each other across the mouth opening.
INNER_LIP_PAIRS = ((61, 67), (62, 66), (63, 65))
# (upper lid, lower lid) pairs facing each other across each eye.
EYELID_PAIRS = ((37, 41), (38, 40), (43, 47), (44, 46))


def _basis() -> np.ndarray:
    b = np.zeros((len(PARAMS), NUM_LANDMARKS, 2), dtype=np.float32)
    opn, wid, rnd, jaw, brow = (b[i] for i in range(len(PARAMS)))
    # open: the lower lip travels most, the upper lip rises a little, corners drop and narrow.
    for i, dy in {61: -0.035, 62: -0.04, 63: -0.035, 49: -0.02, 50: -0.025, 51: -0.025,
                  52: -0.025, 53: -0.02, 65: 0.16, 66: 0.18, 67: 0.16, 55: 0.11, 56: 0.16,
                  57: 0.17, 58: 0.16, 59: 0.11, 48: 0.03, 54: 0.03, 60: 0.03, 64: 0.03}.items():
        opn[i, 1] = dy
    for i, dx in {48: 0.02, 60: 0.02, 54: -0.02, 64: -0.02}.items():
        opn[i, 0] = dx
    # width: symmetric horizontal spread, strongest at the corners.
    for left, right, dx in ((48, 54, 0.06), (60, 64, 0.05), (49, 53, 0.03), (59, 55, 0.03),
                            (61, 63, 0.015), (67, 65, 0.015), (50, 52, 0.015), (58, 56, 0.015)):
        wid[left, 0], wid[right, 0] = -dx, dx
    for i in (48, 54, 60, 64):
        wid[i, 1] = -0.012
    # round: corners pulled in, outer lip contour bulges vertically (protrusion seen frontally).
    for left, right, dx in ((48, 54, 0.07), (60, 64, 0.05), (49, 53, 0.035), (59, 55, 0.035),
                            (61, 63, 0.015), (67, 65, 0.015)):
        rnd[left, 0], rnd[right, 0] = dx, -dx
    for i in (50, 51, 52):
        rnd[i, 1] = -0.02
    for i in (56, 57, 58):
        rnd[i, 1] = 0.02
    # jaw: the chin leads, the jaw line follows with falling weight; the lower lip rides along.
    for i, dy in {8: 0.14, 7: 0.13, 9: 0.13, 6: 0.10, 10: 0.10, 5: 0.06, 11: 0.06, 4: 0.03,
                  12: 0.03, 3: 0.01, 13: 0.01}.items():
        jaw[i, 1] = dy
    for i in (55, 56, 57, 58, 59, 65, 66, 67):
        jaw[i, 1] = 0.05
    for i in (48, 54, 60, 64):
        jaw[i, 1] = 0.02
    # brow: raise, a little less at the outer ends.
    for i in BROWS:
        brow[i, 1] = -0.06
    for i in (17, 26):
        brow[i, 1] = -0.04
    b.setflags(write=False)
    return b


BASIS = _basis()


def params_to_offsets(params: np.ndarray) -> np.ndarray:
    """Articulation parameters [T, 5] -> landmark offsets [T, 68, 2] (float32)."""
    params = np.asarray(params, dtype=np.float32)
    flat = params @ BASIS.reshape(len(PARAMS), -1)
    return flat.reshape(len(params), NUM_LANDMARKS, 2)


def mouth_opening(offsets: np.ndarray) -> np.ndarray:
    """Change of the inner-lip gap [T] (normalized units) for offsets [T, 68, 2]."""
    upper = [u for u, _ in INNER_LIP_PAIRS]
    lower = [lo for _, lo in INNER_LIP_PAIRS]
    return (offsets[:, lower, 1] - offsets[:, upper, 1]).mean(axis=1)


def mouth_width(offsets: np.ndarray) -> np.ndarray:
    """Change of the outer-corner distance [T] (normalized units)."""
    return offsets[:, 54, 0] - offsets[:, 48, 0]


def face_frame(landmarks: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Origin [2], rotation [2, 2] (columns = unit x/y axes in pixels) and scale of a face.

    `landmarks` are 68 pixel points; offsets map to pixels as `origin + scale * R @ offset`.
    """
    p36, p45 = landmarks[36].astype(np.float64), landmarks[45].astype(np.float64)
    axis = p45 - p36
    scale = float(np.hypot(*axis))
    if scale <= 0:
        raise ValueError("degenerate landmarks: outer eye corners coincide")
    ux = axis / scale
    rot = np.array([[ux[0], -ux[1]], [ux[1], ux[0]]])  # y axis = x axis turned +90 deg (down)
    return (p36 + p45) / 2, rot, scale


def offsets_to_pixels(offsets: np.ndarray, landmarks: np.ndarray) -> np.ndarray:
    """Pixel displacements [..., 68, 2] of offsets [..., 68, 2] for a face with `landmarks`."""
    _, rot, scale = face_frame(landmarks)
    return (scale * offsets @ rot.T).astype(np.float32)

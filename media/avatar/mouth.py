"""The inner mouth drawn where the lips part: dark cavity, upper and lower teeth.

Contract: `draw_inner_mouth(frame, inner_lips [8, 2], scale, strength)` paints in place, inside
the polygon of the 8 inner-lip points (iBUG 60..67, output pixels), a cavity with an upper
teeth band hanging from the upper lip and a narrower lower band on the lower lip, antialiased
(polygons at 1/16 px, cv2.LINE_AA) and blended by `strength` (0..1; the caller ramps it in
over the first pixels of opening so parting lips do not pop). Works in a small box around the
mouth, so it costs ~0.1 ms.
"""

from __future__ import annotations

import cv2
import numpy as np

CAVITY_RGB = np.array([44.0, 12.0, 16.0], dtype=np.float32)
CAVITY_EDGE_RGB = np.array([105.0, 42.0, 46.0], dtype=np.float32)  # lit inner lip edge
UPPER_TEETH_RGB = np.array([232.0, 226.0, 212.0], dtype=np.float32)
LOWER_TEETH_RGB = np.array([170.0, 160.0, 150.0], dtype=np.float32)  # in the lip's shadow
UPPER_TEETH_H = 0.06  # tooth band height, in eye-corner distances
LOWER_TEETH_H = 0.03
SHIFT = 4  # fractional bits for cv2 polygon coordinates


def _mask(shape: tuple[int, int], polygon: np.ndarray) -> np.ndarray:
    mask = np.zeros(shape, dtype=np.uint8)
    pts = np.round(polygon * (1 << SHIFT)).astype(np.int32)
    cv2.fillPoly(mask, [pts], 255, lineType=cv2.LINE_AA, shift=SHIFT)
    return mask.astype(np.float32) / 255.0


def _band(lip: np.ndarray, inset: float, height: float) -> np.ndarray:
    """Polygon of a tooth band hanging from a lip curve (corner to corner), corners inset."""
    left, right = lip[0], lip[-1]
    width = right[0] - left[0]
    pulled = lip.copy()
    pulled[0, 0] += inset * width
    pulled[-1, 0] -= inset * width
    pulled[0, 1] = pulled[1, 1]  # start the band at the lip, not in the dark corner
    pulled[-1, 1] = pulled[-2, 1]
    return np.concatenate([pulled, pulled[::-1] + (0.0, height)])


def draw_inner_mouth(frame: np.ndarray, inner_lips: np.ndarray, scale: float,
                     strength: float = 1.0) -> None:
    if strength <= 0.0:
        return
    h, w = frame.shape[:2]
    lo = np.floor(inner_lips.min(axis=0)).astype(int) - 2
    hi = np.ceil(inner_lips.max(axis=0)).astype(int) + 3
    x0, y0 = max(lo[0], 0), max(lo[1], 0)
    x1, y1 = min(hi[0], w), min(hi[1], h)
    if x1 <= x0 or y1 <= y0:
        return
    local = inner_lips.astype(np.float32) - (x0, y0)
    box = (y1 - y0, x1 - x0)
    cavity = _mask(box, local)
    upper = local[[0, 1, 2, 3, 4]]  # left corner, upper inner lip, right corner
    lower = local[[0, 7, 6, 5, 4]]  # left corner, lower inner lip, right corner
    gap = float(np.mean(lower[1:4, 1] - upper[1:4, 1]))
    # Teeth show less when the lips barely part; bands follow the lip curves.
    up_h = min(UPPER_TEETH_H * scale, 0.42 * max(gap, 0.0))
    lo_h = min(LOWER_TEETH_H * scale, 0.18 * max(gap, 0.0))
    teeth_up = _mask(box, _band(upper, 0.16, up_h)) * cavity
    teeth_lo = _mask(box, _band(lower, 0.24, -lo_h)) * cavity * (1.0 - teeth_up)
    # Shading: teeth darken toward the corners; the cavity is lit near the lips, dark inside.
    xs = np.arange(box[1], dtype=np.float32)
    centre_x, half_w = (upper[0, 0] + upper[-1, 0]) / 2, max((upper[-1, 0] - upper[0, 0]) / 2, 1.0)
    side = np.clip(1.0 - 0.45 * ((xs - centre_x) / half_w) ** 2, 0.4, 1.0)[None, :, None]
    ys = np.arange(box[0], dtype=np.float32)[:, None]
    mid_y = float(np.mean(local[:, 1]))
    depth = np.clip(1.0 - np.abs(ys - mid_y) / max(gap / 2, 1.0), 0.0, 1.0)[..., None]
    cavity_rgb = CAVITY_EDGE_RGB + (CAVITY_RGB - CAVITY_EDGE_RGB) * depth
    rest = (1.0 - teeth_up - teeth_lo)[..., None]
    colour = (cavity_rgb * rest + UPPER_TEETH_RGB * side * teeth_up[..., None]
              + LOWER_TEETH_RGB * side * teeth_lo[..., None])
    alpha = (cv2.GaussianBlur(cavity, (3, 3), 0.6) * float(np.clip(strength, 0.0, 1.0)))[..., None]
    roi = frame[y0:y1, x0:x1].astype(np.float32)
    frame[y0:y1, x0:x1] = np.clip(roi * (1.0 - alpha) + colour * alpha, 0, 255).astype(np.uint8)

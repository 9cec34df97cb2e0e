"""The warp mesh of one portrait, precomputed once: vertices, triangles, per-pixel weights.

Contract: `WarpMesh(landmarks [68, 2], frame_size)` builds, in output-frame pixels,
- vertices = the 68 landmarks, RIGID_POINTS forehead/cheek points that follow head motion only,
  and fixed anchors on the border of a region of interest (ROI) around the head;
- a triangulation (Delaunay on a copy with the mouth and jaw opened, so the triangles between
  the lips span the mouth opening instead of crossing a lip);
- for every point of a grid over the ROI (every MAP_STEP-th pixel, at the centres of
  MAP_STEP x MAP_STEP blocks) its triangle and barycentric weights on the neutral mesh, stored
  as a sparse matrix W [n_points, n_vertices].
`WarpMesh.source_map(vertex_displacements)` then returns the backward map (where each output
pixel samples the portrait): the forward displacement field is W @ dV (piecewise linear), and its
inverse is found by fixed-point iteration s = p - D(s), with D sampled bilinearly (cv2.remap),
on the grid; the grid's displacement is then scaled up to every pixel (bilinear, cv2.resize).
The field is linear inside each triangle, so the grid loses only a blend across triangle
edges: away from the lips under 0.1 px at p99 (0.6 px at most), and along the lips' inner
edge, where the field is steepest, a few frame pixels differ (tests/media/
test_avatar_renderer.py). It makes the map 3-4x cheaper and a frame ~2x (3.3 -> 1.5 ms at
512x512 on the dev VM), the map being the largest part of rendering.
Shared read-only across sessions; `source_map` allocates its own outputs (thread-safe).
"""

from __future__ import annotations

import cv2
import numpy as np
import scipy.sparse
from scipy.spatial import Delaunay

from common.face_geometry import BASIS, face_frame
from media.errors import InvalidMediaError

FIXED_POINT_STEPS = 2  # inverse-warp iterations; 2 bring the error under 0.1 px for lip motion
ROI_MARGIN = 0.45  # ROI padding around the moving points, in eye-corner distances
ANCHORS_PER_SIDE = 5
MAP_STEP = 2  # the backward map is solved every MAP_STEP pixels and scaled up (see above)


def _rigid_points(landmarks: np.ndarray) -> np.ndarray:
    """Points that follow the head but not the mouth: forehead above the brows, a ring outside
    the jaw line (keeps the cheeks' outer edge steady while the jaw drops)."""
    origin, rot, scale = face_frame(landmarks)
    up = -rot[:, 1]
    brows = landmarks[[17, 19, 21, 22, 24, 26]]
    forehead = brows + up * 0.45 * scale
    centre = landmarks[[27, 30, 33]].mean(axis=0)
    ring_idx = [0, 2, 4, 12, 14, 16]
    ring = centre + (landmarks[ring_idx] - centre) * 1.18
    return np.concatenate([forehead, ring]).astype(np.float64)


class WarpMesh:
    def __init__(self, landmarks: np.ndarray, width: int, height: int,
                 step: int = MAP_STEP) -> None:
        if step < 1:
            raise InvalidMediaError(f"map step must be >= 1, got {step}")
        self.width, self.height = width, height
        self.step = step
        self.fixed_point_steps = FIXED_POINT_STEPS
        lm = np.asarray(landmarks, dtype=np.float64)
        rigid = _rigid_points(lm)
        moving = np.concatenate([lm, rigid])
        _, rot, scale = face_frame(lm)
        self.scale = scale
        # ROI: everything that can move, plus room for the jaw drop and the margin.
        lo = moving.min(axis=0) - ROI_MARGIN * scale
        hi = moving.max(axis=0) + ROI_MARGIN * scale
        hi[1] += 0.2 * scale  # the chin travels down
        x0, y0 = max(0, int(np.floor(lo[0]))), max(0, int(np.floor(lo[1])))
        x1, y1 = min(width - 1, int(np.ceil(hi[0]))), min(height - 1, int(np.ceil(hi[1])))
        self.roi = (x0, y0, x1 + 1, y1 + 1)  # x0, y0, x1 (exclusive), y1 (exclusive)
        xs = np.linspace(x0, x1, ANCHORS_PER_SIDE)
        ys = np.linspace(y0, y1, ANCHORS_PER_SIDE)
        border = [(x, y0) for x in xs] + [(x, y1) for x in xs]
        border += [(x0, y) for y in ys[1:-1]] + [(x1, y) for y in ys[1:-1]]
        anchors = np.array(border, dtype=np.float64)
        self.n_landmarks = len(lm)
        self.n_moving = len(moving)
        self.vertices = np.concatenate([moving, anchors])  # neutral (source) positions
        self.triangles = self._triangulate(lm, rot, scale)
        rw, rh = self.roi[2] - x0, self.roi[3] - y0
        # The grid: the centres of step x step blocks (cv2.resize's pixel convention), so
        # scaling the grid's map up by `step` puts every value back at its own pixel.
        self.grid_size = (-(-rw // step), -(-rh // step))  # (columns, rows), rounded up
        half = (step - 1) / 2.0
        gx, gy = np.meshgrid(x0 + half + step * np.arange(self.grid_size[0]),
                             y0 + half + step * np.arange(self.grid_size[1]))
        self.grid = np.stack([gx, gy], axis=-1).astype(np.float32)  # [gh, gw, 2] frame pixels
        px, py = np.meshgrid(np.arange(x0, x0 + rw, dtype=np.float32),
                             np.arange(y0, y0 + rh, dtype=np.float32))
        self.pixels = np.stack([px, py], axis=-1)  # [rh, rw, 2] every ROI pixel
        self.grid.setflags(write=False)
        self.pixels.setflags(write=False)
        self.weights = self._rasterize()
        self.vertices.setflags(write=False)

    def _triangulate(self, lm: np.ndarray, rot: np.ndarray, scale: float) -> np.ndarray:
        opened = self.vertices.copy()
        shape = BASIS[0] + BASIS[3]  # open + jaw at full scale
        opened[: len(lm)] += scale * shape @ rot.T
        return np.asarray(Delaunay(opened).simplices, dtype=np.int32)

    def _rasterize(self) -> scipy.sparse.csr_matrix:
        x0, y0, x1, y1 = self.roi
        rw, rh = x1 - x0, y1 - y0
        label = np.full((rh, rw), -1, dtype=np.int32)
        local = self.vertices - (x0, y0)
        for t, tri in enumerate(self.triangles):
            pts = np.round(local[tri] * 16).astype(np.int32)  # 4 fractional bits
            cv2.fillConvexPoly(label, pts, int(t), lineType=cv2.LINE_8, shift=4)
        # Each grid point takes the triangle of the pixel it lies in (its weights extrapolate
        # that triangle by under a pixel where a point falls on an edge: clipped below).
        p = self.grid.reshape(-1, 2).astype(np.float64)
        px = np.minimum(np.floor(p[:, 0]).astype(np.int64) - x0, rw - 1)
        py = np.minimum(np.floor(p[:, 1]).astype(np.int64) - y0, rh - 1)
        tri_idx = label[py, px]
        if np.any(tri_idx < 0):  # the anchors on the ROI's border make the mesh cover it
            raise InvalidMediaError("the warp mesh leaves part of its region uncovered")
        corners = self.vertices[self.triangles[tri_idx]]  # [n, 3, 2]
        v0, v1, v2 = corners[:, 0], corners[:, 1], corners[:, 2]
        d = (v1[:, 1] - v2[:, 1]) * (v0[:, 0] - v2[:, 0]) + (v2[:, 0] - v1[:, 0]) * (
            v0[:, 1] - v2[:, 1])
        d = np.where(np.abs(d) < 1e-9, 1e-9, d)  # degenerate (closed-mouth) triangles
        b0 = ((v1[:, 1] - v2[:, 1]) * (p[:, 0] - v2[:, 0])
              + (v2[:, 0] - v1[:, 0]) * (p[:, 1] - v2[:, 1])) / d
        b1 = ((v2[:, 1] - v0[:, 1]) * (p[:, 0] - v2[:, 0])
              + (v0[:, 0] - v2[:, 0]) * (p[:, 1] - v2[:, 1])) / d
        bary = np.clip(np.stack([b0, b1, 1.0 - b0 - b1], axis=1), -0.25, 1.25)
        bary /= bary.sum(axis=1, keepdims=True)
        rows = np.repeat(np.arange(len(p)), 3)
        cols = self.triangles[tri_idx].reshape(-1)
        return scipy.sparse.csr_matrix(
            (bary.reshape(-1).astype(np.float32), (rows, cols)),
            shape=(len(p), len(self.vertices)),
        )

    def source_map(self, displacement: np.ndarray) -> np.ndarray:
        """Backward map [rh, rw, 2] (x, y source pixels) for the ROI, given the displacement of
        the moving vertices [n_moving, 2] (anchors stay put)."""
        x0, y0, x1, y1 = self.roi
        rw, rh = x1 - x0, y1 - y0
        gw, gh = self.grid_size
        step = self.step
        half = (step - 1) / 2.0
        dv = np.zeros((len(self.vertices), 2), dtype=np.float32)
        dv[: self.n_moving] = displacement
        field = np.asarray(self.weights @ dv, dtype=np.float32).reshape(gh, gw, 2)
        src = self.grid - field
        for _ in range(self.fixed_point_steps):
            # D at the current source estimate, in the grid's coordinates.
            at = (src - np.array([x0 + half, y0 + half], dtype=np.float32)) / np.float32(step)
            sampled = cv2.remap(field, at, None,  # type: ignore[call-overload]  # one xy map
                                cv2.INTER_LINEAR,
                                borderMode=cv2.BORDER_CONSTANT, borderValue=0)
            src = self.grid - sampled
        if step == 1:
            return src
        # Scale up the displacement, not the coordinates: at the ROI's edges cv2.resize holds
        # the outermost grid value, which is right for a displacement (zero there).
        moved = cv2.resize(self.grid - src, (gw * step, gh * step),
                           interpolation=cv2.INTER_LINEAR)
        return self.pixels - moved[:rh, :rw]

    def flipped_triangles(self, displacement: np.ndarray, min_area: float = 0.5) -> int:
        """How many triangles (of area > min_area px^2 before and after) turn over under a
        displacement; a sound mesh keeps this at 0."""
        target = self.vertices.copy()
        target[: self.n_moving] += displacement
        before = _signed_areas(self.vertices, self.triangles)
        after = _signed_areas(target, self.triangles)
        real = (np.abs(before) > min_area) & (np.abs(after) > min_area)
        return int(np.sum(real & (before * after < 0)))


def _signed_areas(points: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    a, b, c = points[triangles[:, 0]], points[triangles[:, 1]], points[triangles[:, 2]]
    ab, ac = b - a, c - a
    return 0.5 * (ab[:, 0] * ac[:, 1] - ab[:, 1] * ac[:, 0])

"""Portrait + landmark offsets -> RGB video frames (the avatar renderer).

Contract:
- `AvatarRenderer(image, landmarks, width=512, height=512)` is built once per portrait (shared,
  read-only): it frames the portrait around the face (head-and-shoulders crop, `head_scale`
  face widths across, never beyond the image), scales it to the output size, closes the lips of
  the neutral face if the photo shows them parted (the model's neutral is lips together), and
  precomputes the warp mesh (`mesh.WarpMesh`). It never loads a model: landmarks come from
  `engines.portrait.detect_portrait_landmarks`.
- `renderer.render(offsets, pose, blink) -> uint8 [H, W, 3]` draws one frame: offsets [68, 2]
  in the normalized face frame (`common.face_geometry`) or None for the rest face, a head pose
  and an eyelid closure. A new array every call.
- `renderer.use_warp(warp)`: draw the warped region with `warp.warp(displacement)` (a `Warp`,
  e.g. `engines.face.gpu_warp.TorchWarp` on a GPU, wired by the server) instead of the mesh's
  map and cv2.remap here; the rest of the frame (the paste, the inner mouth) stays on the CPU.
- `renderer.session(fps=25, seed=0) -> Avatar`: per-session idle life; `Avatar.frame(index,
  offsets)` renders frame `index` at time index / fps with blinks and head motion running
  whether it speaks or not (`offsets` None: idle); an `Avatar` is a `media.idle.FrameSource`.
"""

from __future__ import annotations

import math
from typing import Protocol

import cv2
import numpy as np

from common.face_geometry import EYELID_PAIRS, INNER_LIP_PAIRS, INNER_LIPS, face_frame
from media.avatar.mesh import WarpMesh
from media.avatar.motion import IdleMotion, Pose
from media.avatar.mouth import draw_inner_mouth
from media.errors import InvalidMediaError

HEAD_SCALE = 4.0  # crop width in face widths (jaw line 0..16): head and shoulders
BLINK_DEPTH = 0.92  # share of the lid gap closed at the bottom of a blink
MOUTH_RAMP_PX = 2.5  # cavity fades in over this much lip parting (no pop)


def frame_portrait(image: np.ndarray, landmarks: np.ndarray, width: int, height: int,
                   head_scale: float | None = HEAD_SCALE) -> tuple[np.ndarray, np.ndarray]:
    """Crop around the face to the output aspect and scale to (height, width); returns the
    framed image and the landmarks in its pixels. head_scale None keeps the whole image
    (centre-cropped to the aspect)."""
    h, w = image.shape[:2]
    aspect = width / height
    lm = np.asarray(landmarks, dtype=np.float64)
    if head_scale is None:
        crop_w = min(w, h * aspect)
    else:
        face_w = float(np.ptp(lm[:17, 0])) or 1.0
        crop_w = min(w, h * aspect, head_scale * face_w)
    crop_h = crop_w / aspect
    centre = np.array([lm[:, 0].mean(), lm[:, 1].mean()])
    if head_scale is not None:
        centre[1] += 0.06 * crop_h  # the face sits a little above the middle, shoulders below
    left = float(np.clip(centre[0] - crop_w / 2, 0, w - crop_w))
    top = float(np.clip(centre[1] - crop_h / 2, 0, h - crop_h))
    sx, sy = width / crop_w, height / crop_h
    affine = np.array([[sx, 0.0, -left * sx], [0.0, sy, -top * sy]])
    interp = cv2.INTER_AREA if sx < 1 else cv2.INTER_CUBIC
    framed = cv2.warpAffine(np.ascontiguousarray(image), affine, (width, height), flags=interp,
                            borderMode=cv2.BORDER_REPLICATE)
    return framed, (lm * (sx, sy) - (left * sx, top * sy)).astype(np.float32)


def closed_lips(landmarks: np.ndarray) -> np.ndarray:
    """The same face with the inner lips meeting halfway (for portraits showing teeth)."""
    rest = landmarks.astype(np.float64).copy()
    for upper, lower in INNER_LIP_PAIRS:
        gap = rest[lower, 1] - rest[upper, 1]
        if gap > 0:
            rest[upper, 1] += gap / 2
            rest[lower, 1] -= gap / 2
    return rest


class Warp(Protocol):
    def warp(self, displacement: np.ndarray) -> np.ndarray:
        """The mesh ROI's pixels uint8 [rh, rw, 3] for the moving vertices' displacement."""
        ...


class AvatarRenderer:
    def __init__(self, image: np.ndarray, landmarks: np.ndarray, width: int = 512,
                 height: int = 512, head_scale: float | None = HEAD_SCALE) -> None:
        if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
            raise InvalidMediaError(f"portrait must be uint8 [H, W, 3], got {image.shape}")
        if np.shape(landmarks) != (68, 2):
            raise InvalidMediaError(f"landmarks must be [68, 2], got {np.shape(landmarks)}")
        if width < 64 or height < 64 or width % 2 or height % 2:
            raise InvalidMediaError(f"output size must be even and >= 64, got {width}x{height}")
        self.width, self.height = width, height
        self.image, self.landmarks = frame_portrait(image, landmarks, width, height, head_scale)
        self.image.setflags(write=False)
        self.mesh = WarpMesh(self.landmarks, width, height)
        # Rest face: lips together. Its offset from the photo is applied on every frame.
        self.rest = closed_lips(self.landmarks)
        self.origin, self.rot, self.scale = face_frame(self.landmarks)
        self._pivot = self.landmarks[8].astype(np.float64) + self.rot[:, 1] * 0.6 * self.scale
        self._warp: Warp | None = None  # None: the mesh's map and cv2.remap, here

    def use_warp(self, warp: Warp | None) -> None:
        """Warp the ROI with `warp` from now on (None: on the CPU again)."""
        self._warp = warp

    def _targets(self, offsets: np.ndarray | None, pose: Pose, blink: float) -> np.ndarray:
        """Target positions of the mesh's moving vertices for one frame."""
        pts = self.mesh.vertices[: self.mesh.n_moving].copy()
        pts[:68] = self.rest
        if offsets is not None:
            pts[:68] += self.scale * np.asarray(offsets, dtype=np.float64) @ self.rot.T
        if blink > 0.0:
            for upper, lower in EYELID_PAIRS:
                gap = pts[lower] - pts[upper]
                pts[upper] += gap * (BLINK_DEPTH * blink * 0.85)
                pts[lower] -= gap * (BLINK_DEPTH * blink * 0.15)
        # Head pose: rotate about a pivot in the neck, then shift (anchors stay fixed).
        angle = math.radians(pose.roll_deg)
        c, s = math.cos(angle), math.sin(angle)
        rotation = np.array([[c, -s], [s, c]])
        shift = self.scale * (self.rot @ np.array([pose.dx, pose.dy]))
        return (pts - self._pivot) @ rotation.T + self._pivot + shift

    def render(self, offsets: np.ndarray | None = None, pose: Pose | None = None,
               blink: float = 0.0) -> np.ndarray:
        """One RGB frame [H, W, 3] uint8 (see the module contract)."""
        if offsets is not None and np.shape(offsets) != (68, 2):
            raise InvalidMediaError(f"offsets must be [68, 2], got {np.shape(offsets)}")
        targets = self._targets(offsets, pose or Pose(), blink)
        displacement = (targets - self.mesh.vertices[: self.mesh.n_moving]).astype(np.float32)
        frame = self.image.copy()
        x0, y0, x1, y1 = self.mesh.roi
        if self._warp is not None:
            frame[y0:y1, x0:x1] = self._warp.warp(displacement)
        else:
            src = self.mesh.source_map(displacement)
            frame[y0:y1, x0:x1] = cv2.remap(  # type: ignore[call-overload]  # one xy map
                self.image, src, None, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
        inner = targets[list(INNER_LIPS)]
        gap = float(np.mean([inner[lo - 60, 1] - inner[up - 60, 1]
                             for up, lo in INNER_LIP_PAIRS]))
        if gap > 0.3:
            draw_inner_mouth(frame, inner, self.scale, min(1.0, gap / MOUTH_RAMP_PX))
        return frame

    def session(self, fps: int = 25, seed: int = 0) -> Avatar:
        return Avatar(self, fps, seed)


class Avatar:
    """One session's view of a shared renderer: idle motion keyed by frame index."""

    def __init__(self, renderer: AvatarRenderer, fps: int = 25, seed: int = 0) -> None:
        if fps <= 0:
            raise InvalidMediaError(f"fps must be positive, got {fps}")
        self.renderer = renderer
        self.fps = fps
        self.motion = IdleMotion(seed)

    @property
    def size(self) -> tuple[int, int]:
        return self.renderer.width, self.renderer.height

    def frame(self, index: int, offsets: np.ndarray | None = None) -> np.ndarray:
        """Frame `index` (time index / fps): speech offsets [68, 2] or None (idle)."""
        t = index / self.fps
        return self.renderer.render(offsets, self.motion.pose(t), self.motion.blink(t))

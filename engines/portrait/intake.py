"""Portrait intake: checked image loading and the one-time 68-point landmark fit (dlib).

Contract:
- `load_portrait(data)` takes uploaded bytes, a file path or an array and returns RGB uint8
  [H, W, 3]; it raises `NotAnImageError` (not JPEG/PNG/WebP, or undecodable) or
  `PortraitSizeError` (file over MAX_BYTES, image under MIN_SIDE or over MAX_SIDE pixels).
- `detect_portrait_landmarks(image)` returns the 68 iBUG 300-W points [68, 2] float32 (x, y in
  pixels) of the single face; it raises `NoFaceError`, `SeveralFacesError` or
  `PortraitSizeError` (face under MIN_FACE pixels wide). Messages are meant for end users.

dlib's HOG frontal-face detector runs without upsampling first and, only when that finds
nothing, once more with one upsampling for small faces; detections scoring under MIN_SCORE are
dropped (at dlib's default threshold the astronaut's suit patch counts as a second face).
The 68-point predictor is the file shipped in the `face_recognition_models` package (found by
path: importing that package needs pkg_resources). dlib objects are shared by the process and
used under one lock. A fit is kept in the engine cache (`portrait/<sha256 of the pixels>.npy`):
later starts on the same portrait neither load dlib nor fit again (so a machine that was given
the cached fit, like the GPU machine of bench/gpu_stage.py, needs neither dlib nor its 100 MB
predictor).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import io
import logging
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from engines.cache import cache_dir
from engines.errors import ModelLoadError
from engines.portrait.errors import (
    NoFaceError,
    NotAnImageError,
    PortraitSizeError,
    SeveralFacesError,
)
from engines.progress import load_step

logger = logging.getLogger(__name__)

MAX_BYTES = 10 * 1024 * 1024  # uploads larger than 10 MiB are refused before decoding
MIN_SIDE = 128  # pixels; smaller images cannot show a face worth animating
MAX_SIDE = 8192
MIN_FACE = 64  # pixels across the detected face box
# HOG detector confidence: real faces score > 1 in our checks, the suit patch of the astronaut
# photo and similar clutter 0..0.15 (dlib's own default threshold is 0).
MIN_SCORE = 0.4
DETECT_MAX_SIDE = 1024  # detection runs on a copy scaled down to this; points fit at full size
_MAGIC = ((b"\xff\xd8\xff", "JPEG"), (b"\x89PNG\r\n\x1a\n", "PNG"), (b"RIFF", "WebP"))
_lock = threading.Lock()


def _kind(data: bytes) -> str | None:
    for magic, kind in _MAGIC:
        if data.startswith(magic) and (kind != "WebP" or data[8:12] == b"WEBP"):
            return kind
    return None


def load_portrait(data: bytes | str | Path | np.ndarray) -> np.ndarray:
    """Decode and check a portrait (uploaded bytes, path or array) -> RGB uint8 [H, W, 3]."""
    if isinstance(data, np.ndarray):
        return _check_array(data)
    if isinstance(data, str | Path):
        path = Path(data)
        if not path.is_file():
            raise NotAnImageError(f"portrait file not found: {path}")
        if path.stat().st_size > MAX_BYTES:
            raise PortraitSizeError(f"portrait file is larger than {MAX_BYTES >> 20} MiB")
        data = path.read_bytes()
    if not isinstance(data, bytes | bytearray | memoryview):
        raise NotAnImageError(f"portrait must be bytes, a path or an array, not {type(data)}")
    raw = bytes(data)
    if len(raw) > MAX_BYTES:
        raise PortraitSizeError(f"portrait file is larger than {MAX_BYTES >> 20} MiB")
    if _kind(raw) is None:
        raise NotAnImageError("not a JPEG, PNG or WebP image")
    from PIL import Image, ImageOps

    try:
        with Image.open(io.BytesIO(raw)) as img:
            w, h = img.size  # header only: refuse huge images before decoding them
            if max(w, h) > MAX_SIDE:
                raise PortraitSizeError(f"image is {w}x{h}; at most {MAX_SIDE} px per side")
            rgb = ImageOps.exif_transpose(img).convert("RGB")
            array = np.asarray(rgb, dtype=np.uint8)
    except PortraitSizeError:
        raise
    except Exception as exc:  # PIL raises many types for truncated or corrupt files
        raise NotAnImageError(f"the image could not be decoded: {exc}") from exc
    return _check_array(array)


def _check_array(image: np.ndarray) -> np.ndarray:
    if not isinstance(image, np.ndarray) or image.dtype != np.uint8:
        raise NotAnImageError("portrait array must be uint8")
    if image.ndim == 2:
        image = np.stack([image] * 3, axis=-1)
    if image.ndim != 3 or image.shape[2] not in (3, 4):
        raise NotAnImageError(f"portrait array must be [H, W, 3], got {image.shape}")
    h, w = image.shape[:2]
    if min(h, w) < MIN_SIDE:
        raise PortraitSizeError(f"image is {w}x{h}; at least {MIN_SIDE} px per side needed")
    if max(h, w) > MAX_SIDE:
        raise PortraitSizeError(f"image is {w}x{h}; at most {MAX_SIDE} px per side")
    return np.ascontiguousarray(image[:, :, :3])


def predictor_path() -> Path:
    spec = importlib.util.find_spec("face_recognition_models")
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError("face_recognition_models is not installed (extra `face`)")
    path = Path(next(iter(spec.submodule_search_locations)))
    path = path / "models" / "shape_predictor_68_face_landmarks.dat"
    if not path.is_file():
        raise ModelLoadError(f"68-point predictor missing: {path}")
    return path


@functools.cache
def _dlib() -> tuple[Any, Any]:
    try:
        import dlib
    except ImportError as exc:  # pragma: no cover - depends on installed extras
        raise ModelLoadError("dlib is not installed (extra `face`: dlib-bin)") from exc
    with load_step(logger, "dlib face detector and 68-point predictor"):
        return dlib.get_frontal_face_detector(), dlib.shape_predictor(str(predictor_path()))


def detect_faces(image: np.ndarray) -> list[tuple[float, float, float, float]]:
    """Face boxes (left, top, right, bottom) in pixels of `image`, as the detector sees them."""
    detector, _ = _dlib()
    h, w = image.shape[:2]
    scale = min(1.0, DETECT_MAX_SIDE / max(h, w))
    small = image
    if scale < 1.0:
        from PIL import Image

        small = np.asarray(
            Image.fromarray(image).resize(
                (round(w * scale), round(h * scale)), Image.Resampling.BILINEAR
            )
        )
    with _lock:
        rects, scores, _ = detector.run(small, 0, MIN_SCORE)
        if len(rects) == 0:
            rects, scores, _ = detector.run(small, 1, MIN_SCORE)
    return [(r.left() / scale, r.top() / scale, r.right() / scale, r.bottom() / scale)
            for r in rects]


def landmarks_cache_path(image: np.ndarray) -> Path:
    """Where the fit of this (checked) image is kept: named by the sha256 of its pixels."""
    digest = hashlib.sha256(f"{image.shape}".encode())
    digest.update(np.ascontiguousarray(image).tobytes())
    return cache_dir("portrait") / f"{digest.hexdigest()[:32]}.npy"


def detect_portrait_landmarks(image: np.ndarray, *, cache: bool = True) -> np.ndarray:
    """The 68 landmarks [68, 2] (x, y pixels, float32) of the one face in an RGB portrait
    (from the cache when this image was fitted before; `cache=False`, for uploads: neither
    read nor written, so users' photos leave no file behind)."""
    image = _check_array(image)
    if not cache:
        return _fit_landmarks(image)
    path = landmarks_cache_path(image)
    try:
        cached = np.load(path)
        if cached.shape == (68, 2) and np.isfinite(cached).all():
            return cached.astype(np.float32)
    except (OSError, ValueError):
        pass  # not fitted yet (or an unreadable file): fit again
    points = _fit_landmarks(image)
    tmp = path.with_name(f"{path.stem}.tmp{os.getpid()}.npy")
    try:
        np.save(tmp, points)
        os.replace(tmp, path)
    except OSError as exc:  # a read-only cache costs a fit per start, nothing else
        logger.warning("portrait landmarks not cached: %s", exc)
    return points


def _fit_landmarks(image: np.ndarray) -> np.ndarray:
    import dlib

    boxes = detect_faces(image)
    if not boxes:
        raise NoFaceError("no face found: use a front-facing photo with one clearly visible face")
    if len(boxes) > 1:
        raise SeveralFacesError(f"{len(boxes)} faces found: use a photo with exactly one face")
    left, top, right, bottom = boxes[0]
    if right - left < MIN_FACE:
        raise PortraitSizeError(
            f"the face is {right - left:.0f} px wide; at least {MIN_FACE} px needed"
        )
    _, predictor = _dlib()
    rect = dlib.rectangle(round(left), round(top), round(right), round(bottom))
    with _lock:
        shape = predictor(image, rect)
    points = np.array([(shape.part(i).x, shape.part(i).y) for i in range(68)], dtype=np.float32)
    return points

"""Portrait intake: checked loading and one-face landmark detection with dlib (real models)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from skimage import data

from engines.portrait import MAX_BYTES, detect_portrait_landmarks, load_portrait
from engines.portrait.errors import (
    NoFaceError,
    NotAnImageError,
    PortraitError,
    PortraitSizeError,
    SeveralFacesError,
)


def _png(image: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def astronaut() -> np.ndarray:
    return np.ascontiguousarray(data.astronaut())


def test_astronaut_landmarks_are_a_plausible_face(astronaut: np.ndarray) -> None:
    lm = detect_portrait_landmarks(astronaut)
    assert lm.shape == (68, 2) and lm.dtype == np.float32
    eyes_y = lm[36:48, 1].mean()
    mouth_y = lm[48:68, 1].mean()
    chin_y = lm[8, 1]
    assert eyes_y < lm[30, 1] < mouth_y < chin_y  # eyes, nose tip, mouth, chin from top down
    assert 40 < lm[45, 0] - lm[36, 0] < 120  # outer eye corners, image left to right
    # The face sits in the upper middle of the photo (Eileen Collins, around x=180..270).
    assert 170 < lm[:, 0].mean() < 280 and 80 < lm[:, 1].mean() < 200


def test_uploaded_png_bytes_decode_to_the_same_pixels(astronaut: np.ndarray) -> None:
    image = load_portrait(_png(astronaut))
    assert image.shape == (512, 512, 3) and image.dtype == np.uint8
    assert np.array_equal(image, astronaut)


def test_path_and_rgba_are_accepted(tmp_path: Path, astronaut: np.ndarray) -> None:
    rgba = np.dstack([astronaut, np.full(astronaut.shape[:2], 255, np.uint8)])
    path = tmp_path / "face.png"
    path.write_bytes(_png(rgba))
    assert load_portrait(path).shape == (512, 512, 3)


@pytest.mark.parametrize(
    "payload",
    [b"hello, I am text", b"\x89PNG\r\n\x1a\n" + b"\x00" * 100, b"GIF89a" + b"\x00" * 50, b""],
)
def test_not_an_image_is_refused_clearly(payload: bytes) -> None:
    with pytest.raises(NotAnImageError):
        load_portrait(payload)


def test_oversized_upload_is_refused_before_decoding() -> None:
    with pytest.raises(PortraitSizeError, match="MiB"):
        load_portrait(b"\xff\xd8\xff" + b"\x00" * MAX_BYTES)


def test_tiny_image_is_refused(astronaut: np.ndarray) -> None:
    tiny = np.asarray(Image.fromarray(astronaut).resize((64, 64)))
    with pytest.raises(PortraitSizeError, match="at least"):
        load_portrait(_png(tiny))
    with pytest.raises(PortraitSizeError):
        detect_portrait_landmarks(tiny)


def test_no_face_is_a_clear_error() -> None:
    with pytest.raises(NoFaceError, match="no face"):
        detect_portrait_landmarks(np.ascontiguousarray(data.coffee()))


def test_two_faces_are_refused(astronaut: np.ndarray) -> None:
    two = np.concatenate([astronaut, astronaut], axis=1)
    with pytest.raises(SeveralFacesError, match="2 faces"):
        detect_portrait_landmarks(two)


def test_errors_share_one_user_facing_base_class() -> None:
    with pytest.raises(PortraitError):
        load_portrait(b"not an image")
    assert issubclass(PortraitError, ValueError)


def test_a_fit_is_cached_by_the_pixels(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                       astronaut: np.ndarray) -> None:
    """A second start on the same portrait reads the fit back (no dlib); a corrupt cache file
    is fitted again; another image is another file."""
    from engines.portrait import intake

    monkeypatch.setenv("RTC_AVATAR_CACHE", str(tmp_path))
    fitted = detect_portrait_landmarks(astronaut)
    path = intake.landmarks_cache_path(astronaut)
    assert path.is_file() and path.parent == tmp_path / "portrait"

    def no_dlib(image: np.ndarray) -> np.ndarray:
        raise AssertionError("fitted again")

    monkeypatch.setattr(intake, "_fit_landmarks", no_dlib)
    assert np.array_equal(detect_portrait_landmarks(astronaut), fitted)
    path.write_bytes(b"garbage")
    monkeypatch.setattr(intake, "_fit_landmarks", lambda image: fitted + 1)
    assert np.array_equal(detect_portrait_landmarks(astronaut), fitted + 1)
    assert intake.landmarks_cache_path(astronaut[:, ::-1]) != path
    # An upload's fit is neither read from nor written to the cache.
    path.unlink()
    assert np.array_equal(detect_portrait_landmarks(astronaut, cache=False), fitted + 1)
    assert not path.exists()

"""The avatar renderer on the real astronaut portrait with its real dlib landmarks."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest
from skimage import data

from engines.portrait import detect_portrait_landmarks
from media.avatar import AvatarRenderer, Pose
from media.avatar.mesh import MAP_STEP, WarpMesh
from media.avatar.motion import IdleMotion
from media.avatar.video import write_mp4
from media.errors import InvalidMediaError
from tests.support.faces import offsets as _offsets


@pytest.fixture(scope="module")
def renderer() -> AvatarRenderer:
    image = np.ascontiguousarray(data.astronaut())
    return AvatarRenderer(image, detect_portrait_landmarks(image))


def _box(renderer: AvatarRenderer, idx: slice, pad: float) -> tuple[slice, slice]:
    pts = renderer.landmarks[idx]
    lo = np.floor(pts.min(axis=0) - pad * renderer.scale).astype(int)
    hi = np.ceil(pts.max(axis=0) + pad * renderer.scale).astype(int)
    return slice(max(lo[1], 0), hi[1]), slice(max(lo[0], 0), hi[0])


def _diff(a: np.ndarray, b: np.ndarray, box: tuple[slice, slice]) -> float:
    return float(np.abs(a[box].astype(np.int16) - b[box].astype(np.int16)).mean())


def test_frames_have_the_configured_size(renderer: AvatarRenderer) -> None:
    frame = renderer.render()
    assert frame.shape == (512, 512, 3) and frame.dtype == np.uint8
    small = AvatarRenderer(renderer.image.copy(), renderer.landmarks, 320, 240)
    assert small.render(_offsets(open=0.5)).shape == (240, 320, 3)


def test_open_mouth_changes_the_mouth_region_and_not_far_from_it(
    renderer: AvatarRenderer,
) -> None:
    rest = renderer.render()
    opened = renderer.render(_offsets(open=0.8, jaw=0.6))
    mouth = _box(renderer, slice(48, 68), 0.05)
    assert _diff(opened, rest, mouth) > 25  # the lips part: a dark cavity and teeth appear
    cavity = opened[mouth].reshape(-1, 3).astype(int).sum(axis=1)
    assert (cavity < 200).mean() > 0.1  # dark pixels inside the mouth
    eyes = _box(renderer, slice(36, 48), 0.05)
    assert _diff(opened, rest, eyes) < 1.0  # eyes untouched
    x0, y0, x1, y1 = renderer.mesh.roi
    outside = np.ones(rest.shape[:2], bool)
    outside[y0:y1, x0:x1] = False
    assert np.array_equal(opened[outside], rest[outside])  # background, shoulders: identical


def test_lip_shapes_differ_from_each_other(renderer: AvatarRenderer) -> None:
    mouth = _box(renderer, slice(48, 68), 0.1)
    wide = renderer.render(_offsets(open=0.3, width=1.0))
    round_ = renderer.render(_offsets(open=0.3, round=1.0))
    assert _diff(wide, round_, mouth) > 5


def test_blink_closes_the_eyes(renderer: AvatarRenderer) -> None:
    eyes = _box(renderer, slice(36, 48), 0.02)
    open_eyes = renderer.render()
    shut = renderer.render(blink=1.0)
    assert _diff(shut, open_eyes, eyes) > 5
    mouth = _box(renderer, slice(48, 68), 0.0)
    assert _diff(shut, open_eyes, mouth) < 1.0


def test_head_pose_moves_the_face(renderer: AvatarRenderer) -> None:
    face = _box(renderer, slice(0, 68), 0.0)
    still = renderer.render()
    tilted = renderer.render(pose=Pose(roll_deg=1.5, dx=0.02))
    assert _diff(tilted, still, face) > 2


def test_mesh_never_folds_over_for_extreme_articulation(renderer: AvatarRenderer) -> None:
    mesh = renderer.mesh
    for values in ({"open": 1.0, "jaw": 1.0}, {"width": 1.0, "brow": 1.0}, {"round": 1.0},
                   {"open": 1.0, "round": 1.0, "jaw": 1.0}):
        targets = renderer._targets(_offsets(**values), Pose(roll_deg=1.2, dx=0.02), 1.0)
        moved = targets - mesh.vertices[: mesh.n_moving]
        assert mesh.flipped_triangles(moved) == 0, values


def test_idle_sessions_are_deterministic_and_independent(renderer: AvatarRenderer) -> None:
    a, b, c = renderer.session(seed=1), renderer.session(seed=1), renderer.session(seed=2)
    assert np.array_equal(a.frame(100), b.frame(100))
    assert np.array_equal(a.frame(37), a.frame(37, None))  # idle is the default
    blinks_1 = [IdleMotion(1).blink(k / 25) > 0.5 for k in range(500)]
    blinks_2 = [IdleMotion(2).blink(k / 25) > 0.5 for k in range(500)]
    assert 2 <= sum(np.diff(np.array(blinks_1, int)) == 1) <= 10  # 20 s: blinks every 2-6 s
    assert blinks_1 != blinks_2
    assert not np.array_equal(a.frame(300), c.frame(300))


def test_bad_inputs_are_refused(renderer: AvatarRenderer) -> None:
    with pytest.raises(InvalidMediaError):
        renderer.render(np.zeros((20, 2), np.float32))
    with pytest.raises(InvalidMediaError):
        AvatarRenderer(np.zeros((100, 100), np.uint8), renderer.landmarks)
    with pytest.raises(InvalidMediaError):
        AvatarRenderer(renderer.image.copy(), renderer.landmarks, 511, 512)


def test_mp4_holds_h264_video_and_aac_audio(tmp_path: Path, renderer: AvatarRenderer) -> None:
    avatar = renderer.session()
    frames = [avatar.frame(k, _offsets(open=0.5 * (k % 2))) for k in range(20)]
    tone = (3000 * np.sin(2 * np.pi * 220 * np.arange(38400) / 48000)).astype(np.int16)
    path = tmp_path / "clip.mp4"
    assert write_mp4(path, frames, 25, tone, 48000) == 20
    with av.open(str(path)) as container:
        video = container.streams.video[0]
        audio = container.streams.audio[0]
        assert video.codec_context.name == "h264" and audio.codec_context.name == "aac"
        decoded = [f.to_ndarray(format="rgb24") for f in container.decode(video)]
    assert len(decoded) == 20 and decoded[0].shape == (512, 512, 3)
    assert np.abs(decoded[0].astype(int) - frames[0].astype(int)).mean() < 4  # lossy but close


def test_the_coarse_map_draws_what_the_exact_one_draws(renderer: AvatarRenderer) -> None:
    """The backward map solved every MAP_STEP pixels and scaled up (media/avatar/mesh.py)
    against the same map solved at every pixel."""
    exact = AvatarRenderer(renderer.image.copy(), renderer.landmarks)
    exact.mesh = WarpMesh(exact.landmarks, exact.width, exact.height, step=1)
    assert renderer.mesh.step == MAP_STEP > 1
    x0, y0, x1, y1 = renderer.mesh.roi
    lips = _box(renderer, slice(48, 68), 0.15)
    away = np.ones((y1 - y0, x1 - x0), bool)
    away[lips[0].start - y0:lips[0].stop - y0, lips[1].start - x0:lips[1].stop - x0] = False
    rng = np.random.default_rng(3)
    for _ in range(8):
        values = dict(zip(("open", "jaw", "width", "round"), rng.uniform(0, 1, 4), strict=True))
        pose = Pose(roll_deg=float(rng.uniform(-1, 1)), dx=float(rng.uniform(-0.02, 0.02)))
        offsets = _offsets(**values)
        moved = (renderer._targets(offsets, pose, 0.0)
                 - renderer.mesh.vertices[: renderer.mesh.n_moving]).astype(np.float32)
        error = np.abs(renderer.mesh.source_map(moved) - exact.mesh.source_map(moved)).max(-1)
        # linear inside each triangle: only a blend across triangle edges (0.08 / 0.63 px
        # at most over 30 articulations of this portrait)
        assert np.percentile(error[away], 99) < 0.15, values
        assert error[away].max() < 1.0, values
        a, b = renderer.render(offsets, pose), exact.render(offsets, pose)
        diff = np.abs(a.astype(np.int16) - b.astype(np.int16)).max(-1)
        assert (diff[y0:y1, x0:x1] <= 2).mean() > 0.985, values  # >= 99.28% in those 30
        assert diff[lips].mean() < 1.5, values  # the lips' inner edge differs (<= 0.85)

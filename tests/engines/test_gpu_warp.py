"""The portrait's warp in torch (engines/face/gpu_warp.py) draws what the renderer's cv2 path
draws: run here with torch on the CPU (the same arithmetic as on a GPU, without its graph),
on the real astronaut portrait with its dlib landmarks, over random articulations and poses."""

from __future__ import annotations

import numpy as np
import pytest
from skimage import data

from engines.face.errors import InvalidInputError
from engines.face.gpu_warp import TorchWarp
from engines.portrait import detect_portrait_landmarks
from media.avatar import AvatarRenderer, Pose
from tests.support.faces import offsets

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def renderers() -> tuple[AvatarRenderer, AvatarRenderer]:
    image = np.ascontiguousarray(data.astronaut())
    landmarks = detect_portrait_landmarks(image)
    on_cpu, in_torch = AvatarRenderer(image, landmarks), AvatarRenderer(image, landmarks)
    in_torch.use_warp(TorchWarp(in_torch.mesh, in_torch.image, device="cpu"))
    return on_cpu, in_torch


def test_torch_warp_draws_what_cv2_draws(renderers: tuple[AvatarRenderer, AvatarRenderer]) -> None:
    on_cpu, in_torch = renderers
    x0, y0, x1, y1 = on_cpu.mesh.roi
    rng = np.random.default_rng(5)
    moved_any = False
    for _ in range(8):
        values = dict(zip(("open", "jaw", "width", "round"), rng.uniform(0, 1, 4), strict=True))
        pose = Pose(roll_deg=float(rng.uniform(-2, 2)), dx=float(rng.uniform(-0.03, 0.03)),
                    dy=float(rng.uniform(-0.02, 0.02)))
        lips, blink = offsets(**values), float(rng.uniform(0, 1))
        a, b = on_cpu.render(lips, pose, blink), in_torch.render(lips, pose, blink)
        rest = on_cpu.render()
        moved_any |= bool(np.abs(a.astype(np.int16) - rest.astype(np.int16)).max() > 50)
        diff = np.abs(a.astype(np.int16) - b.astype(np.int16)).max(-1)
        assert np.array_equal(a[:y0], b[:y0]) and np.array_equal(a[y1:], b[y1:])  # pasted
        # cv2 interpolates in 1/32-pixel steps, torch exactly: a level here and there (on
        # this portrait 99.9% of the ROI within 1, all but a few pixels within 2, at most 3)
        assert (diff[y0:y1, x0:x1] <= 2).mean() > 0.999, values
        assert diff[y0:y1, x0:x1].max() <= 6 and diff[y0:y1, x0:x1].mean() < 0.3, values
    assert moved_any  # the articulations really moved the face


def test_a_displacement_of_the_wrong_shape_is_refused(
    renderers: tuple[AvatarRenderer, AvatarRenderer],
) -> None:
    warp = TorchWarp(renderers[0].mesh, renderers[0].image, device="cpu")
    with pytest.raises(InvalidInputError, match="displacement"):
        warp.warp(np.zeros((3, 2), np.float32))

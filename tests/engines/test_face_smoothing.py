"""Kalman smoothing: cuts jitter at least in half, lags a step by at most one frame."""

from __future__ import annotations

import numpy as np
import pytest

from engines.face import FaceConfig, create_smoother
from engines.face.smoothing import KalmanSmoother, smooth_sequence


def _jitter(seq: np.ndarray) -> float:
    """Frame-to-frame jitter: std of first differences."""
    return float(np.std(np.diff(seq, axis=0)))


def test_jitter_on_noisy_landmarks_is_at_least_halved() -> None:
    rng = np.random.default_rng(1)
    t = np.arange(500)[:, None, None]
    clean = 0.1 * np.sin(2 * np.pi * t / 60.0) * np.ones((1, 68, 2))  # slow speech-like motion
    noisy = clean + rng.normal(0.0, 0.01, size=(500, 68, 2))
    smoothed = smooth_sequence(noisy)
    assert _jitter(smoothed - clean) <= 0.5 * _jitter(noisy - clean)
    still = rng.normal(0.0, 0.01, size=(500, 68, 2))  # a face holding still, noisy detector
    assert _jitter(smooth_sequence(still)) <= 0.5 * _jitter(still)
    # ...while still following the signal closely.
    assert np.sqrt(np.mean((smoothed[50:] - clean[50:]) ** 2)) < 0.01


def test_step_change_lags_at_most_one_frame() -> None:
    step = np.concatenate([np.zeros(40), np.full(40, 0.2)])[:, None]
    out = smooth_sequence(step)[:, 0]
    crossed = int(np.argmax(out >= 0.1))  # half-way point of the output
    assert crossed - 40 <= 1
    assert abs(out[-1] - 0.2) < 1e-3  # settles on the new value


def test_more_measurement_noise_smooths_more() -> None:
    rng = np.random.default_rng(2)
    noisy = rng.normal(0.0, 0.01, size=(300, 4))
    calm = smooth_sequence(noisy, process_noise=0.003, measurement_noise=0.05)
    default = smooth_sequence(noisy)
    assert _jitter(calm) < _jitter(default)


def test_state_carries_across_calls_and_reset_forgets() -> None:
    seq = np.linspace(0.0, 1.0, 20)[:, None]
    whole = KalmanSmoother().smooth(seq)
    k = KalmanSmoother()
    parts = np.concatenate([k.smooth(seq[:7]), k.smooth(seq[7:])])
    np.testing.assert_allclose(parts, whole, atol=1e-7)
    k.reset()
    np.testing.assert_allclose(k.step(np.array([5.0])), [5.0])  # first frame passes through


def test_factory_and_bad_parameters() -> None:
    assert create_smoother(FaceConfig(smoothing=False)) is None
    assert isinstance(create_smoother(FaceConfig()), KalmanSmoother)
    with pytest.raises(ValueError):
        KalmanSmoother(process_noise=0.0)

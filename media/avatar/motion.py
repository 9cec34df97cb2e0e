"""Idle life of the avatar: blinks and slight head motion, as pure functions of time and a seed.

Contract: `IdleMotion(seed)` gives, for any time t (seconds since the session started),
`blink(t)` (eyelid closure 0..1) and `pose(t)` (roll in degrees, dx, dy in face units). Values are
deterministic for (seed, t), so any frame can be rendered in any order or twice; per-session seeds
keep several avatars of one portrait from blinking in step.

Numbers: adults blink ~15-20 times a minute, each blink ~100-150 ms closing and a slower opening,
~250-400 ms in all (Stern et al. 1984; Kwon et al. 2013); intervals here are 2-6 s, a little
calmer than conversation, which reads as attentive. Head motion is a sum of three slow sines per
axis (0.05-0.3 Hz, incommensurate), roll within +-1.2 degrees and drift within +-0.02 face units,
plus breathing (0.25 Hz, 0.004 face units vertically).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

BLINK_CLOSE_S = 0.10
BLINK_HOLD_S = 0.04
BLINK_OPEN_S = 0.18
BLINK_MIN_GAP_S = 2.0
BLINK_MAX_GAP_S = 6.0
BREATH_HZ = 0.25


@dataclass(frozen=True)
class Pose:
    roll_deg: float = 0.0
    dx: float = 0.0  # face units (outer-eye-corner distances)
    dy: float = 0.0


class IdleMotion:
    def __init__(self, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self._rng = rng
        self._blinks: list[float] = [float(rng.uniform(0.8, 3.0))]
        self._freqs = rng.uniform(0.05, 0.3, size=(3, 3))  # axis x component
        self._phases = rng.uniform(0.0, 2 * math.pi, size=(3, 3))
        self._amps = np.array([1.2, 0.02, 0.012]) / 1.8  # sum of three unit sines peaks ~1.8

    def _blink_starts_until(self, t: float) -> None:
        while self._blinks[-1] <= t:
            gap = float(self._rng.uniform(BLINK_MIN_GAP_S, BLINK_MAX_GAP_S))
            self._blinks.append(self._blinks[-1] + gap)

    def blink(self, t: float) -> float:
        """Eyelid closure at time t: 0 open, 1 closed."""
        if t < 0:
            return 0.0
        self._blink_starts_until(t)
        i = bisect.bisect_right(self._blinks, t) - 1
        if i < 0:
            return 0.0
        dt = t - self._blinks[i]
        if dt < BLINK_CLOSE_S:
            return _ease(dt / BLINK_CLOSE_S)
        dt -= BLINK_CLOSE_S
        if dt < BLINK_HOLD_S:
            return 1.0
        dt -= BLINK_HOLD_S
        if dt < BLINK_OPEN_S:
            return 1.0 - _ease(dt / BLINK_OPEN_S)
        return 0.0

    def pose(self, t: float) -> Pose:
        waves = np.sin(2 * math.pi * self._freqs * t + self._phases).sum(axis=1) * self._amps
        breath = 0.004 * math.sin(2 * math.pi * BREATH_HZ * t)
        return Pose(float(waves[0]), float(waves[1]), float(waves[2]) + breath)


def _ease(x: float) -> float:
    return 0.5 - 0.5 * math.cos(math.pi * min(max(x, 0.0), 1.0))

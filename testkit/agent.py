"""Helpers for end-to-end agent tests and benchmarks: config, mouth and voice measurements."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import soxr

from rtc_server.config import AgentConfig, Config, IceConfig, ProfileConfig, ServerConfig
from rtc_server.engine_set import Engines
from testkit.peer import Received

# aiortc's receiver hold per frame (see tests/test_loopback.py): audio until the 4th next
# 20 ms frame, video until the next frame.
AUDIO_HOLD_S = 0.080


def agent_config(greeting: str = "", **agent: Any) -> Config:
    """Agent mode on the embedded defaults, loopback-only ICE, deterministic sampling, and the
    `fixed` profile: the models and settings do not depend on how fast this machine is."""
    base = Config()
    return dataclasses.replace(
        base,
        server=ServerConfig(mode="agent"),
        profile=ProfileConfig(mode="fixed"),
        ice=IceConfig(loopback_only=True),
        agent=dataclasses.replace(AgentConfig(greeting=greeting), **agent),
        llm=dataclasses.replace(base.llm, seed=1234, temperature=0.0),
    )


def patient(config: Config) -> Config:
    """`config` with the LLM's resilience deadlines far out, for tests on the real model: a
    loaded machine (a browser beside the model on 2 cores) must not turn an answer into a
    holding phrase, an apology or a cut (the deadlines are tested on scripted engines)."""
    llm = dataclasses.replace(config.llm, first_token_deadline_s=120.0,
                              answer_deadline_s=240.0, stall_timeout_s=120.0)
    return dataclasses.replace(config, llm=llm)


def transcribe(engines: Engines, pcm48: np.ndarray) -> str:
    """What the server's own ASR hears in 48 kHz audio a peer received (fed in 1 s pieces)."""
    pcm = np.asarray(soxr.resample(pcm48, 48000, 16000), dtype=np.int16)
    stream = engines.asr.open()
    for start in range(0, len(pcm), 16000):
        stream.feed(pcm[start : start + 16000])
    return stream.finish()


class MouthMeter:
    """Mouth opening seen in a received frame: the share of dark pixels (the mouth cavity)
    in a box around the portrait's lips. Knows where the lips are from the renderer."""

    def __init__(self, landmarks: np.ndarray) -> None:
        lips = np.asarray(landmarks)[48:68]
        x0, y0 = lips.min(axis=0)
        x1, y1 = lips.max(axis=0)
        h = y1 - y0
        self.box = (int(x0), int(y0 - 0.3 * h), int(x1) + 1, int(y1 + 0.8 * h) + 1)

    def __call__(self, image: np.ndarray) -> float:
        x0, y0, x1, y1 = self.box
        region = image[y0:y1, x0:x1].astype(np.float32).mean(axis=2)
        return float((region < 60).mean())


def audio_timeline(received: Received) -> tuple[np.ndarray, np.ndarray]:
    """Per-20 ms-frame arrival time (receiver hold removed) and RMS of the received audio."""
    times = np.array(received.audio_arrival) - AUDIO_HOLD_S
    rms = np.array([np.sqrt(np.mean(a.astype(np.float64) ** 2)) for a in received.audio])
    return times, rms


def video_timeline(received: Received, fps: int) -> tuple[np.ndarray, np.ndarray]:
    return np.array(received.video_arrival) - 1.0 / fps, np.array(received.video, dtype=float)


def best_lag(
    a_t: np.ndarray, a: np.ndarray, v_t: np.ndarray, v: np.ndarray, max_lag_s: float = 0.3,
    step_s: float = 0.02,
) -> tuple[float, float]:
    """Lag (s, positive = video later) maximizing the correlation of video series `v` with
    audio series `a`, both resampled on a common grid; returns (lag, correlation)."""
    lo, hi = max(a_t[0], v_t[0]) + max_lag_s, min(a_t[-1], v_t[-1]) - max_lag_s
    grid = np.arange(lo, hi, step_s)
    audio = np.interp(grid, a_t, a)
    best = (0.0, -2.0)
    for lag in np.arange(-max_lag_s, max_lag_s + 1e-9, step_s):
        video = np.interp(grid + lag, v_t, v)
        if audio.std() == 0 or video.std() == 0:
            continue
        corr = float(np.corrcoef(audio, video)[0, 1])
        if corr > best[1]:
            best = (float(lag), corr)
    return best

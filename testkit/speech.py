"""Generated test speech from the project's own TTS engines, cached on disk.

For tests and benchmarks of every stage that needs spoken input (ASR, VAD, face):

- `synth(text, engine="piper"|"espeak"|"kokoro", sample_rate=16000, voice=None, speed=1.0,
  pitch=None)`
  -> int16 mono PCM at `sample_rate` (resampled with soxr);
- `synth_with_timings(...)` -> `engines.tts.Speech` with the same PCM and phoneme timings (ms,
  following `engines.tts.phonemes`; times are scaled so the last phoneme ends with the audio);
- `add_noise(pcm, snr_db, seed=0, kind="white"|"babble", sample_rate=16000)` -> noisy PCM;
- `babble(duration_s, dbfs, seed)` -> several espeak-ng talkers at once, no foreground voice;
  `music(duration_s, seed)` (plucked notes and drum hits) and `clicks(duration_s, seed)`
  (a train of sharp clicks): sounds without speech that the endpointer still hears;
- `voiced_bounds(pcm)` -> first and last voiced sample (10 ms frames within 40 dB of the
  loudest), the truth for where speech starts and ends.

`voice` is a piper `.onnx` path (None = joe), an espeak-ng voice name such as "en-gb+f3"
(None = "en-us") or a Kokoro voice (None = zm_yunxia; "zm_yunxi" asks a question in Mandarin,
"af_heart" in English; Kokoro gives no phoneme timings, so its `Speech.phonemes` is empty);
`pitch` (0..100) exists only for espeak. Results are cached under
`engines.cache.cache_dir("test-speech")`, keyed by every argument, so repeated runs cost nothing;
voices load once per process.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from typing import Literal, ParamSpec

import numpy as np

from engines.cache import cache_dir
from engines.tts.base import TTS, PhonemeTiming, Speech, join_speech, resample_speech

Engine = Literal["piper", "espeak", "kokoro"]
Noise = Literal["white", "babble"]
P = ParamSpec("P")
_CACHE_VERSION = 2  # bump when the engines' output format or the cache layout changes
_BABBLE_LINES = (
    "The meeting moved to Thursday afternoon because the room was booked.",
    "Could you pass the salt and the pepper, please?",
    "We walked along the river until the sun went down behind the hills.",
    "Prices rose again last month, mostly for food and energy.",
    "She said the train would be twenty minutes late this evening.",
    "I think the blue one looks better than the green one.",
)
_BABBLE_VOICES = ("en-us+m3", "en-gb+f2", "en-us+f4", "en-gb-x-rp+m1", "en-us+m7", "en-gb+f5")


@functools.lru_cache(maxsize=16)
def _engine(engine: Engine, voice: str | None, speed: float, pitch: int | None) -> TTS:
    if engine == "piper":
        if pitch is not None:
            raise ValueError("pitch is only supported by the espeak engine")
        from engines.tts.piper_tts import PiperTTS

        return PiperTTS(voice, speed=speed)
    if engine == "espeak":
        from engines.tts.espeak import EspeakTTS

        return EspeakTTS(voice or "en-us", speed=speed, pitch=pitch)
    if engine == "kokoro":
        if pitch is not None:
            raise ValueError("pitch is only supported by the espeak engine")
        from engines.tts.kokoro import DEFAULT_VOICE, KokoroTTS

        return KokoroTTS(voice or DEFAULT_VOICE, speed=speed)
    raise ValueError(f"unknown engine {engine!r}")


def synth_with_timings(
    text: str,
    engine: Engine = "piper",
    sample_rate: int = 16000,
    voice: str | None = None,
    speed: float = 1.0,
    pitch: int | None = None,
) -> Speech:
    """Speech for `text` at `sample_rate` with phoneme timings (cached on disk).

    The voice's own rate is what is cached; other rates are resampled from it, so one text
    is the same utterance at every rate (the voices are not bit-exact between runs).
    """
    return resample_speech(_native(text, engine, voice, speed, pitch), sample_rate)


def _native(
    text: str, engine: Engine, voice: str | None, speed: float, pitch: int | None
) -> Speech:
    key = json.dumps([_CACHE_VERSION, text, engine, voice, speed, pitch])
    path = cache_dir("test-speech") / (hashlib.sha256(key.encode()).hexdigest()[:32] + ".npz")
    if path.exists():
        with np.load(path, allow_pickle=False) as data:
            return Speech(
                pcm=data["pcm"],
                sample_rate=int(data["sample_rate"]),
                phonemes=tuple(
                    PhonemeTiming(str(ph), float(s), float(d))
                    for ph, s, d in zip(data["labels"], data["starts"], data["durs"], strict=True)
                ),
                text=text,
            )
    tts = _engine(engine, voice, float(speed), pitch)
    speech = join_speech(list(tts.synthesize(text)), text)
    # Write-then-rename: concurrent test workers never read a half-written file.
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".npz")
    with os.fdopen(fd, "wb") as f:
        np.savez(
            f,
            pcm=speech.pcm,
            sample_rate=np.int64(speech.sample_rate),
            labels=np.array([p.phoneme for p in speech.phonemes], dtype=str),
            starts=np.array([p.start_ms for p in speech.phonemes], dtype=np.float64),
            durs=np.array([p.dur_ms for p in speech.phonemes], dtype=np.float64),
        )
    os.replace(tmp, path)
    return speech


def _pcm_only(speak: Callable[P, Speech]) -> Callable[P, np.ndarray]:
    def pcm(*args: P.args, **kwargs: P.kwargs) -> np.ndarray:
        return speak(*args, **kwargs).pcm

    pcm.__doc__ = "int16 mono PCM of `text` spoken by `engine` at `sample_rate` (cached on disk)."
    return pcm


synth = _pcm_only(synth_with_timings)


def voiced_bounds(pcm: np.ndarray, frame: int = 160) -> tuple[int, int]:
    """First and last sample of the `frame`-sample frames within 40 dB of the loudest."""
    n = pcm.shape[0] // frame * frame
    frames = pcm[:n].astype(np.float64).reshape(-1, frame)
    db = 10 * np.log10(np.mean(frames**2, axis=1) + 1e-9)
    voiced = np.flatnonzero(db > db.max() - 40)
    return int(voiced[0] * frame), int((voiced[-1] + 1) * frame)


def _babble(sample_rate: int) -> np.ndarray:
    """Several espeak speakers talking at once (a few seconds, looped by the caller)."""
    tracks = [
        synth(line, "espeak", sample_rate, voice)
        for line, voice in zip(_BABBLE_LINES, _BABBLE_VOICES, strict=True)
    ]
    n = max(len(t) for t in tracks)
    mix = np.zeros(n, dtype=np.float64)
    for i, t in enumerate(tracks):
        # Rotate each talker so pauses do not line up.
        padded = np.zeros(n)
        padded[: len(t)] = t
        mix += np.roll(padded, i * n // len(tracks))
    return mix


def _looped(base: np.ndarray, start: int, n: int) -> np.ndarray:
    """`n` samples of `base` played in a loop, from sample `start`."""
    return np.tile(base, -(-(start + n) // len(base)))[start : start + n]


def babble(duration_s: float, dbfs: float = -25.0, seed: int = 0,
           sample_rate: int = 16000) -> np.ndarray:
    """`duration_s` of babble (six espeak-ng talkers, looped) at an RMS of `dbfs`; int16."""
    base = _babble(sample_rate)
    start = int(np.random.default_rng(seed).integers(0, len(base)))
    mix = _looped(base, start, int(duration_s * sample_rate))
    mix *= 10 ** (dbfs / 20) * 32768 / max(float(np.sqrt(np.mean(mix**2))), 1e-9)
    return np.clip(np.round(mix), -32768, 32767).astype(np.int16)


def music(duration_s: float, seed: int = 0, sample_rate: int = 16000) -> np.ndarray:
    """Plucked harmonic notes four per second, half with a drum hit; peak -4 dBFS; int16."""
    rng = np.random.default_rng(seed)
    n = int(duration_s * sample_rate)
    out = np.zeros(n + sample_rate)
    t = np.arange(int(0.4 * sample_rate)) / sample_rate
    for start in range(0, n, sample_rate // 4):
        f0 = 220.0 * 2 ** (int(rng.integers(0, 12)) / 12)
        note = sum(0.6**k * np.sin(2 * np.pi * f0 * (k + 1) * t) for k in range(6))
        out[start : start + t.shape[0]] += note * np.exp(-6 * t)
        if rng.random() < 0.5:
            out[start : start + 800] += rng.standard_normal(800) * np.exp(-np.arange(800) / 100)
    out = out[:n] / max(float(np.abs(out).max()), 1e-9) * 0.63 * 32767
    return out.astype(np.int16)


def clicks(duration_s: float, seed: int = 0, sample_rate: int = 16000) -> np.ndarray:
    """5 ms clicks at random intervals of 50-300 ms; int16."""
    rng = np.random.default_rng(seed)
    n = int(duration_s * sample_rate)
    out = np.zeros(n)
    click = np.exp(-np.arange(80) / 10)
    for pos in np.cumsum(rng.integers(sample_rate // 20, sample_rate * 3 // 10, size=n // 800)):
        if pos + 80 < n:
            out[pos : pos + 80] += rng.standard_normal(80) * click * 20000
    return np.clip(out, -32768, 32767).astype(np.int16)


def add_noise(
    pcm: np.ndarray,
    snr_db: float,
    seed: int = 0,
    kind: Noise = "white",
    sample_rate: int = 16000,
) -> np.ndarray:
    """Mix noise into int16 `pcm` at `snr_db` (signal power over the whole clip); int16 out."""
    signal = np.asarray(pcm, dtype=np.float64)
    rng = np.random.default_rng(seed)
    if kind == "white":
        noise = rng.standard_normal(len(signal))
    elif kind == "babble":
        base = _babble(sample_rate)
        noise = _looped(base, int(rng.integers(0, len(base))), len(signal))
    else:
        raise ValueError(f"unknown noise kind {kind!r}")
    p_signal = float(np.mean(signal**2)) if len(signal) else 0.0
    p_noise = float(np.mean(noise**2)) if len(noise) else 0.0
    if p_signal == 0.0 or p_noise == 0.0:
        return np.asarray(pcm, dtype=np.int16).copy()
    noise *= np.sqrt(p_signal / (p_noise * 10.0 ** (snr_db / 10.0)))
    return np.clip(np.round(signal + noise), -32768, 32767).astype(np.int16)

"""Synthetic talking-face data: speech from the project's TTS voices + viseme trajectories.

Contract: `build_dataset(plan, progress)` -> list of `Utterance` (16 kHz int16 PCM, phoneme
timings, voice label, held-out flag), generated with `engines.tts` (piper at several speeds,
espeak-ng voices at several speeds and pitches) and cached under
`engines.cache.cache_dir("face-train")` keyed by the plan, so a second run reads it back.
`targets(utt)` -> (features [4K, 80], offsets [K, 68, 2], params [K, 5]) for K video frames.

Determinism: piper's VITS samples noise inside its ONNX graph; onnxruntime seeds those kernels
when a session is created, so `onnxruntime.set_seed` right before each voice is loaded, and a
fixed synthesis order, make the speech identical from run to run (checked: same bytes).
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from common.face_geometry import params_to_offsets
from engines.cache import cache_dir
from engines.face.features import SAMPLE_RATE, log_mel, num_frames
from engines.face.training.corpus import sentences
from engines.face.training.visemes import brow_from_audio, trajectory
from engines.tts.base import PhonemeTiming, join_speech, resample_speech

logger = logging.getLogger(__name__)

DATA_VERSION = 1  # bump when synthesis or storage changes


@dataclass(frozen=True)
class VoiceSpec:
    engine: str  # "piper" or "espeak"
    voice: str  # espeak voice name; "joe" for the bundled piper voice
    speed: float
    pitch: int = 50

    @property
    def label(self) -> str:
        return f"{self.engine}:{self.voice}:x{self.speed:g}:p{self.pitch}"


DEFAULT_VOICES = (
    VoiceSpec("piper", "joe", 0.85), VoiceSpec("piper", "joe", 1.0), VoiceSpec("piper", "joe", 1.2),
    VoiceSpec("espeak", "en-us", 1.0, 50), VoiceSpec("espeak", "en-gb", 0.9, 40),
    VoiceSpec("espeak", "en-us+f3", 1.15, 70), VoiceSpec("espeak", "en-us+m3", 0.85, 35),
    VoiceSpec("espeak", "en-gb+f2", 1.0, 65), VoiceSpec("espeak", "en-gb-x-rp+m1", 1.1, 45),
    VoiceSpec("espeak", "en-us+f4", 1.25, 80), VoiceSpec("espeak", "en-us+m7", 0.95, 30),
)


@dataclass(frozen=True)
class DataPlan:
    n_sentences: int = 360  # distinct sentences in the corpus
    held_out: int = 36  # the first sentences of a seeded shuffle: never trained on
    per_voice: int = 100  # training sentences each voice speaks (a seeded subset)
    held_out_per_voice: int = 10
    voices: tuple[VoiceSpec, ...] = DEFAULT_VOICES
    seed: int = 0

    def key(self) -> str:
        text = "\n".join(sentences(self.n_sentences, self.seed))  # corpus edits change the key
        raw = json.dumps([DATA_VERSION, asdict(self), text], sort_keys=True)
        return hashlib.sha256(raw.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Utterance:
    pcm: np.ndarray  # int16 mono, SAMPLE_RATE
    phonemes: tuple[PhonemeTiming, ...]
    text: str
    voice: str
    held_out: bool


def _assignments(plan: DataPlan) -> list[tuple[VoiceSpec, str, bool]]:
    lines = sentences(plan.n_sentences, plan.seed)
    rng = random.Random(plan.seed)
    order = list(range(len(lines)))
    rng.shuffle(order)
    test_idx, train_idx = order[: plan.held_out], order[plan.held_out :]
    jobs: list[tuple[VoiceSpec, str, bool]] = []
    for spec in plan.voices:
        for i in rng.sample(train_idx, min(plan.per_voice, len(train_idx))):
            jobs.append((spec, lines[i], False))
        for i in rng.sample(test_idx, min(plan.held_out_per_voice, len(test_idx))):
            jobs.append((spec, lines[i], True))
    return jobs


def _tts(spec: VoiceSpec, seed: int) -> object:
    import onnxruntime

    from engines.tts import TTSConfig, create_tts

    onnxruntime.set_seed(seed)  # before the voice's session exists (see module docstring)
    if spec.engine == "piper":
        return create_tts(TTSConfig(engine="piper", speed=spec.speed))
    return create_tts(TTSConfig(engine="espeak", espeak_voice=spec.voice, speed=spec.speed,
                                pitch=spec.pitch))


def _speak(tts: object, text: str) -> tuple[np.ndarray, tuple[PhonemeTiming, ...]]:
    """All sentences of `text` joined, resampled to 16 kHz, timings rescaled to match."""
    joined = join_speech(list(tts.synthesize(text)), text)  # type: ignore[attr-defined]
    speech = resample_speech(joined, SAMPLE_RATE)
    return speech.pcm, speech.phonemes


def build_dataset(plan: DataPlan, progress: Callable[[int, int], None] | None = None,
                  ) -> list[Utterance]:
    """Synthesize (or read back from the cache) every utterance of the plan."""
    path = cache_dir("face-train") / f"speech-{plan.key()}.npz"
    jobs = _assignments(plan)
    if path.exists():
        logger.info("reading cached training speech %s", path)
        return _load(path, jobs)
    utterances: list[Utterance] = []
    tts_for: dict[VoiceSpec, object] = {}
    for n, (spec, text, held) in enumerate(jobs):
        if spec not in tts_for:
            tts_for.clear()  # one voice at a time keeps memory flat
            tts_for[spec] = _tts(spec, plan.seed + plan.voices.index(spec))
        pcm, phonemes = _speak(tts_for[spec], text)
        utterances.append(Utterance(pcm, phonemes, text, spec.label, held))
        if progress:
            progress(n + 1, len(jobs))
    _save(path, utterances)
    return utterances


def _save(path: object, utts: list[Utterance]) -> None:
    import os
    import tempfile
    from pathlib import Path

    target = Path(str(path))
    lengths = np.array([len(u.pcm) for u in utts])
    n_ph = np.array([len(u.phonemes) for u in utts])
    fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".npz")
    with os.fdopen(fd, "wb") as f:
        np.savez(
            f, pcm=np.concatenate([u.pcm for u in utts]), lengths=lengths, n_ph=n_ph,
            labels=np.array([p.phoneme for u in utts for p in u.phonemes], dtype=str),
            starts=np.array([p.start_ms for u in utts for p in u.phonemes]),
            durs=np.array([p.dur_ms for u in utts for p in u.phonemes]),
        )
    os.replace(tmp, target)


def _load(path: object, jobs: list[tuple[VoiceSpec, str, bool]]) -> list[Utterance]:
    with np.load(str(path), allow_pickle=False) as data:
        pcm, lengths, n_ph = data["pcm"], data["lengths"], data["n_ph"]
        labels, starts, durs = data["labels"], data["starts"], data["durs"]
    out: list[Utterance] = []
    a = b = 0
    for (spec, text, held), n, m in zip(jobs, lengths, n_ph, strict=True):
        ph = tuple(PhonemeTiming(str(labels[j]), float(starts[j]), float(durs[j]))
                   for j in range(b, b + int(m)))
        out.append(Utterance(pcm[a : a + int(n)], ph, text, spec.label, held))
        a, b = a + int(n), b + int(m)
    return out


def targets(utt: Utterance) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features [4K, 80], landmark offsets [K, 68, 2] and parameters [K, 5] of an utterance."""
    k = num_frames(len(utt.pcm), SAMPLE_RATE)
    params = trajectory(utt.phonemes, k)
    params[:, 4] = brow_from_audio(utt.pcm, SAMPLE_RATE, k)
    return log_mel(utt.pcm, SAMPLE_RATE), params_to_offsets(params), params

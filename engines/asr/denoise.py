"""Noise suppression of the audio Whisper decodes (WebRTC's, `webrtc-noise-gain`).

Whisper base and tiny.en lose words in noise, most of all on voices unlike their training's.
Whole clips of a robotic espeak-ng voice in white noise at 15 dB went from 0.37 WER to 0.21
with WebRTC's suppression at level 2, but through the streaming path (a 0.5 s pre-roll, the
context pad) the gain was small for base and none for tiny.en, so `[asr] noise_suppression`
is off by default (bench/RESULTS.md, section asr). WebRTC's suppressor is the one in
browsers' `getUserMedia` (`noiseSuppression`): a per-band Wiener filter on a noise estimate
it learns as it goes, 10 ms at a time, with a high-pass filter in front.

Only Whisper's input is cleaned: the endpointer, the speech gate and Smart Turn hear the
microphone as it is (their thresholds and the turn model's training are on unsuppressed
audio). Each decode cleans its own audio with a fresh suppressor, from the utterance's
start: a decode is then a pure function of its audio (the second opinion, a re-decode and
the offline path see the same samples). Its cost: ~5 ms for 2 s of audio on the dev VM, a
few per cent of a Whisper decode, but paid again by each partial (their CPU +15%).
"""

from __future__ import annotations

import numpy as np

from engines.asr.errors import AsrModelLoadError

CHUNK = 160  # WebRTC's audio processing takes 10 ms at a time (16 kHz)
DELAY = 96  # samples its suppressor's output lags its input (the overlap of its 16 kHz frames)


def check_suppressor() -> None:
    """At start-up, where `[asr] noise_suppression` is on: the package is there."""
    try:
        import webrtc_noise_gain  # noqa: F401
    except ImportError as exc:
        raise AsrModelLoadError(
            "[asr] noise_suppression needs the webrtc-noise-gain package (the `asr` extra: "
            "pip install -e '.[asr]'), or set it to 0") from exc


def suppress_noise(pcm: np.ndarray, level: int) -> np.ndarray:
    """`pcm` (16 kHz mono int16) with WebRTC's noise suppression at `level` (1-4: low,
    moderate, high, very high; 0: as is).

    The output is as long as the input and aligned with it: the input is padded with
    silence for the suppressor's lag (`DELAY`) and whole 10 ms chunks, and the lag cut off
    the front, so a word's end stays where it was."""
    if level == 0 or pcm.size == 0:
        return pcm
    from webrtc_noise_gain import AudioProcessor  # the `asr` extra

    processor = AudioProcessor(0, level)
    padded = np.zeros(-(-(pcm.size + DELAY) // CHUNK) * CHUNK, np.int16)
    padded[: pcm.size] = pcm
    data = padded.tobytes()
    out = b"".join(processor.Process10ms(data[i : i + 2 * CHUNK]).audio
                   for i in range(0, len(data), 2 * CHUNK))
    return np.frombuffer(out, np.int16)[DELAY : DELAY + pcm.size].copy()

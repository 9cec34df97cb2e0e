"""The silence a voice puts around each chunk, cut to what the chunk's end calls for: the
cut keeps every sound, phoneme times follow it, and the real piper voice loses its lead-in
(delay before an answer's first word) and, in mid-sentence, its final pause."""

from __future__ import annotations

import numpy as np
import pytest

from engines.tts.base import PhonemeTiming, Speech, join_speech, trim_silence
from engines.tts.phonemes import SILENCE
from engines.tts.piper_tts import PiperTTS
from engines.voicing import CLAUSE_TRAIL_MS, LEAD_MS, WORDS_TRAIL_MS, chunk_pauses, speak

RATE = 16000


def _speech(lead_s: float, sound_s: float, trail_s: float) -> Speech:
    pcm = np.concatenate([
        np.zeros(int(lead_s * RATE), np.int16),
        (3000 * np.sin(np.arange(int(sound_s * RATE)) * 0.3)).astype(np.int16),
        np.zeros(int(trail_s * RATE), np.int16),
    ])
    phonemes = (
        PhonemeTiming(SILENCE, 0.0, lead_s * 1000),
        PhonemeTiming("a", lead_s * 1000, sound_s * 1000),
        PhonemeTiming(SILENCE, (lead_s + sound_s) * 1000, trail_s * 1000),
    )
    return Speech(pcm, RATE, phonemes, "a")


def test_quiet_is_cut_to_the_limits_and_the_sound_kept() -> None:
    speech = _speech(0.1, 0.5, 0.3)
    out = trim_silence(speech, lead_ms=10, trail_ms=30)
    assert out.duration_s == pytest.approx(0.01 + 0.5 + 0.03, abs=0.011)
    loud = np.abs(speech.pcm) > 0
    assert np.count_nonzero(np.abs(out.pcm) > 0) == np.count_nonzero(loud)  # no sound lost
    starts = [p.start_ms for p in out.phonemes]
    assert starts[0] == 0.0 and starts == sorted(starts)
    assert out.phonemes[-1].end_ms == pytest.approx(out.duration_s * 1000)
    assert out.phonemes[1].phoneme == "a"
    assert out.phonemes[1].start_ms == pytest.approx(10, abs=10)  # moved with the audio
    assert out.phonemes[1].dur_ms == pytest.approx(500, abs=1)


def test_trail_none_keeps_the_end_and_quiet_speech_is_unchanged() -> None:
    speech = _speech(0.1, 0.5, 0.3)
    out = trim_silence(speech, lead_ms=10, trail_ms=None)
    assert len(out.pcm) - len(speech.pcm) == -int(0.09 * RATE)
    assert out.pcm[-int(0.3 * RATE):].max() == 0  # the sentence's own pause stays
    quiet = Speech(np.zeros(RATE, np.int16), RATE, (PhonemeTiming(SILENCE, 0, 1000),), "")
    assert trim_silence(quiet, lead_ms=0, trail_ms=0) is quiet
    short = _speech(0.0, 0.5, 0.0)
    assert trim_silence(short, lead_ms=10, trail_ms=30) is short  # nothing to cut


@pytest.mark.parametrize(
    ("chunk", "trail"),
    [
        ("The museum opens at nine. ", None),
        ("Is it open?\" ", None),
        ("It is,", CLAUSE_TRAIL_MS),
        ("好的，", CLAUSE_TRAIL_MS),
        ("The museum is ", WORDS_TRAIL_MS),
        ("Line one\n", None),
    ],
)
def test_pauses_follow_how_a_chunk_ends(chunk: str, trail: float | None) -> None:
    assert chunk_pauses(chunk) == (LEAD_MS, trail)


def test_piper_chunks_lose_the_lead_in_and_the_mid_sentence_pause() -> None:
    piper = PiperTTS()
    raw = np.concatenate([s.pcm for s in piper.synthesize("The museum is")])
    cut = speak(piper, "The museum is ")
    assert cut is not None
    frame = piper.sample_rate // 100

    def quiet_ends(pcm: np.ndarray) -> tuple[int, int]:
        rms = np.sqrt(np.mean(pcm[: len(pcm) // frame * frame].astype(np.float64).reshape(
            -1, frame) ** 2, axis=1))
        loud = np.flatnonzero(rms > 20)
        return int(loud[0]), int(len(rms) - 1 - loud[-1])

    raw_lead, raw_trail = quiet_ends(raw)
    lead, trail = quiet_ends(cut.pcm)
    # 10 ms frames; piper is not bit-exact between runs: its final pause measured 70-140 ms
    assert raw_trail >= 5 and trail <= 3  # in mid-sentence cut to ~30 ms
    assert lead <= 1 <= raw_lead
    # A sentence keeps the voice's final pause: compared on one synthesis, as piper draws
    # its pause anew each time (measured 50-140 ms).
    text = "The museum is open."
    said = join_speech(list(piper.synthesize(text)), text)
    lead_ms, trail_ms = chunk_pauses(text)
    kept = trim_silence(said, lead_ms=lead_ms, trail_ms=trail_ms)
    assert trail_ms is None and quiet_ends(kept.pcm)[1] == quiet_ends(said.pcm)[1] >= 1
    assert cut.phonemes[-1].end_ms == pytest.approx(cut.duration_s * 1000)

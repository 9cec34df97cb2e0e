"""The embedded ASR (faster-whisper tiny.en) on speech the tests generate (piper, espeak-ng).

Word error rate limits come from measurements of exactly these 50 words per condition:
measured piper clean 0%, piper 10 dB SNR 2% (1 word), espeak clean 0%, espeak 10 dB 16%; the
benchmark's larger set (bench/asr.py, 18 sentences) gives up to 30% for espeak in noise (the
tiny model on a robotic voice in white noise). Each limit leaves room for a few words of
variation between runs and stays far below what a broken pipeline produces (a lost decode, a
cut-off end or a hallucination costs 30-100% on these sets).
"""

from __future__ import annotations

import math
import threading
import wave
from pathlib import Path

import numpy as np
import pytest

from engines.asr import AsrConfig, create_asr
from engines.asr.errors import InvalidAudioError, StreamClosedError
from engines.asr.streaming import WhisperStream, WhisperStreamingASR
from engines.asr.text import word_error_rate
from tests.support.speech import add_noise, synth

SR = 16000
FRAME = 320
SENTENCES = (
    "Turn on the lights, please.",
    "Please remind me to call my mother tomorrow morning.",
    "How far is the nearest train station from here?",
    "I am looking for a quiet place to read and drink some coffee.",
    "Please transfer the money to my savings account before the end of the month.",
)
WER_LIMITS = {
    ("piper", "clean"): 0.06,
    ("piper", "noisy"): 0.10,
    ("espeak", "clean"): 0.10,
    ("espeak", "noisy"): 0.35,
}


@pytest.fixture(scope="session")
def asr() -> WhisperStreamingASR:
    engine = create_asr(AsrConfig())
    assert isinstance(engine, WhisperStreamingASR)
    return engine


def utterance(text: str, engine: str, noisy: bool) -> tuple[np.ndarray, int]:
    """0.3 s lead, the speech, 0.6 s tail (noise throughout if noisy); and the speech's end."""
    speech = synth(text, engine)  # type: ignore[arg-type]
    lead, tail = np.zeros(int(0.3 * SR), np.int16), np.zeros(int(0.6 * SR), np.int16)
    audio = np.concatenate([lead, speech, tail])
    if noisy:  # 10 dB below the speech's own power (add_noise averages over the whole clip)
        snr = 10.0 + 10 * math.log10(speech.shape[0] / audio.shape[0])
        audio = add_noise(audio, snr, seed=len(text))
    return audio, lead.shape[0] + speech.shape[0]


def stream_through(
    stream: WhisperStream, audio: np.ndarray
) -> tuple[list[tuple[int, str]], str]:
    partials = []
    for i in range(0, audio.shape[0], FRAME):
        partial = stream.feed(audio[i : i + FRAME])
        if partial is not None:
            partials.append((i + FRAME, partial))
    return partials, stream.finish()


@pytest.fixture(scope="session")
def transcripts(
    asr: WhisperStreamingASR,
) -> dict[tuple[str, str], list[tuple[str, str, list[tuple[int, str]], int]]]:
    """(engine, condition) -> [(reference, final, partials, speech end sample)]."""
    out: dict[tuple[str, str], list[tuple[str, str, list[tuple[int, str]], int]]] = {}
    for engine in ("piper", "espeak"):
        for condition in ("clean", "noisy"):
            rows = out.setdefault((engine, condition), [])
            for text in SENTENCES:
                audio, end = utterance(text, engine, condition == "noisy")
                partials, final = stream_through(asr.open(), audio)
                rows.append((text, final, partials, end))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("key", list(WER_LIMITS))
def test_word_error_rate_within_measured_limits(
    transcripts: dict[tuple[str, str], list[tuple[str, str, list[tuple[int, str]], int]]],
    key: tuple[str, str],
) -> None:
    rows = transcripts[key]
    wer = word_error_rate([r[0] for r in rows], [r[1] for r in rows])
    assert wer <= WER_LIMITS[key], [(r[0], r[1]) for r in rows]


@pytest.mark.slow
def test_partials_arrive_before_the_utterance_ends(
    transcripts: dict[tuple[str, str], list[tuple[str, str, list[tuple[int, str]], int]]],
) -> None:
    for text, final, partials, end in transcripts[("piper", "clean")]:
        early = [p for at, p in partials if at < end]
        assert early, f"no partial before the end of {text!r}"
        # a partial is a prefix-ish of what is finally said: its words appear in the final
        first_word = early[-1].split()[0].strip(",.?!").lower()
        assert first_word in final.lower()


@pytest.mark.slow
def test_final_is_decoded_ahead_during_the_hangover(asr: WhisperStreamingASR) -> None:
    """The decode at the pause holds the final: finish() after the hangover decodes nothing."""
    audio, end = utterance(SENTENCES[2], "piper", noisy=False)
    stream = asr.open()
    for i in range(0, end + int(0.45 * SR), FRAME):  # speech + the endpointer's 400 ms
        stream.feed(audio[i : i + FRAME])
    decodes = stream.decodes
    final = stream.finish()
    assert stream.decodes == decodes
    assert word_error_rate([SENTENCES[2]], [final]) == 0.0


@pytest.mark.slow
def test_pause_hint_decodes_ahead_at_once(asr: WhisperStreamingASR) -> None:
    audio, end = utterance(SENTENCES[0], "piper", noisy=False)
    stream = asr.open()
    for i in range(0, end + int(0.12 * SR), FRAME):
        stream.feed(audio[i : i + FRAME])
    text = stream.pause_hint()
    decodes = stream.decodes
    assert stream.pause_hint() == text and stream.decodes == decodes  # nothing new: no decode
    final = stream.finish()
    assert stream.decodes == decodes
    assert final == text
    assert word_error_rate([SENTENCES[0]], [final]) == 0.0


@pytest.mark.slow
def test_streams_share_the_model_across_threads(asr: WhisperStreamingASR) -> None:
    texts = SENTENCES[1:4]
    results: dict[int, str] = {}

    def run(k: int) -> None:
        audio, _ = utterance(texts[k], "piper", noisy=False)
        results[k] = stream_through(asr.open(), audio)[1]

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert word_error_rate(list(texts), [results[k] for k in range(len(texts))]) <= 0.05


# --- garbage in --------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    ["silence", "white noise -20 dBFS", "white noise -6 dBFS", "clipped white noise", "hum"],
)
def test_no_transcript_from_silence_or_noise(asr: WhisperStreamingASR, name: str) -> None:
    rng = np.random.default_rng(7)
    n = 4 * SR
    if name == "silence":
        audio = np.zeros(n, np.int16)
    elif name.startswith("white"):
        level = 10 ** (float(name.split()[2]) / 20) * 32767
        audio = np.clip(rng.standard_normal(n) * level, -32768, 32767).astype(np.int16)
    elif name == "clipped white noise":
        audio = np.clip(rng.standard_normal(n) * 40000, -32768, 32767).astype(np.int16)
    else:
        t = np.arange(n) / SR
        audio = (8000 * np.sin(2 * np.pi * 50 * t) + 3000 * np.sin(2 * np.pi * 150 * t))
        audio = audio.astype(np.int16)
    partials, final = stream_through(asr.open(), audio)
    assert final == "" and partials == []


@pytest.mark.slow
def test_clipped_speech_is_still_recognised(asr: WhisperStreamingASR) -> None:
    audio, _ = utterance(SENTENCES[1], "piper", noisy=False)
    clipped = np.clip(audio.astype(np.int32) * 8, -32768, 32767).astype(np.int16)
    assert np.mean(np.abs(clipped) == 32767) > 0.05  # really clipped
    final = stream_through(asr.open(), clipped)[1]
    assert word_error_rate([SENTENCES[1]], [final]) <= 0.25


@pytest.mark.slow
def test_thirty_second_monologue_is_transcribed_in_segments(asr: WhisperStreamingASR) -> None:
    lines = [
        "The old lighthouse on the northern coast was repaired last summer.",
        "Now visitors can climb the stairs to enjoy the view over the sea.",
        "On a clear day you can see the islands and the fishing boats.",
        "In the evening the keeper tells stories about the storms of the past.",
        "Many people come back every year with their children and friends.",
        "The small museum next to it shows old maps and photographs.",
        "There is also a cafe that serves fresh bread and hot soup.",
        "Tickets are cheap, and the money helps to keep the building in good shape.",
        "Please do not feed the seagulls near the steps.",
    ]
    pieces = []
    for line in lines:
        pieces += [synth(line), np.zeros(int(0.25 * SR), np.int16)]  # short pauses only
    audio = np.concatenate(pieces)
    assert audio.shape[0] > 30 * SR
    stream = asr.open()
    partials, final = stream_through(stream, audio)
    assert len(partials) >= 5
    assert word_error_rate([" ".join(lines)], [final]) <= 0.15
    assert "lighthouse" in final.lower() and "seagulls" in final.lower()


@pytest.mark.slow
def test_audio_at_the_wrong_rate_does_not_crash(asr: WhisperStreamingASR) -> None:
    import soxr

    speech = synth(SENTENCES[0])
    fast = soxr.resample(speech, SR, 48000).astype(np.int16)  # 48 kHz fed as if 16 kHz
    stream_through(asr.open(), fast)
    slow = soxr.resample(speech, SR, 8000).astype(np.int16)  # 8 kHz fed as if 16 kHz
    stream_through(asr.open(), slow)


@pytest.mark.parametrize(
    "bad",
    [np.zeros(320, np.float32), np.zeros((320, 2), np.int16), np.zeros(320, np.int32)],
)
def test_bad_audio_raises_typed_error(asr: WhisperStreamingASR, bad: np.ndarray) -> None:
    with pytest.raises(InvalidAudioError):
        asr.open().feed(bad)


def test_stream_cannot_be_used_after_finish(asr: WhisperStreamingASR) -> None:
    stream = asr.open()
    stream.feed(np.zeros(320, np.int16))
    assert stream.finish() == ""
    with pytest.raises(StreamClosedError):
        stream.feed(np.zeros(320, np.int16))
    with pytest.raises(StreamClosedError):
        stream.finish()


def test_empty_feed_and_empty_stream(asr: WhisperStreamingASR) -> None:
    stream = asr.open()
    assert stream.feed(np.zeros(0, np.int16)) is None
    assert stream.finish() == ""


@pytest.mark.slow
def test_cli_transcribes_a_44k_stereo_wav(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python -m engines.asr FILE.wav`: other rates and channels are converted, not misread."""
    import soxr

    import common.logs
    from engines.asr.__main__ import main

    # the CLI configures process-wide logging; keep the test session's logging as it is
    monkeypatch.setattr(common.logs, "setup_logging", lambda level="INFO": None)

    speech = synth(SENTENCES[2])
    pcm = np.concatenate([np.zeros(SR // 2, np.int16), speech, np.zeros(SR // 2, np.int16)])
    stereo = soxr.resample(pcm.astype(np.float32) / 32768, SR, 44100)
    frames = (np.stack([stereo, stereo * 0.5], axis=1) * 32767).astype("<i2")
    path = tmp_path / "speech.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(44100)
        w.writeframes(frames.tobytes())
    assert main([str(path)]) == 0
    out = capsys.readouterr().out
    finals = [line.split("): ", 1)[1] for line in out.splitlines() if "FINAL" in line]
    assert len(finals) == 1 and word_error_rate([SENTENCES[2]], finals) <= 0.1
    assert "partial" in out

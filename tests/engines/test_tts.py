"""TTS engines: real piper and espeak-ng voices, timings, config factory, ASR round trip."""

from __future__ import annotations

import re
import threading

import numpy as np
import pytest

from engines.asr.base import StreamingASR
from engines.tts import Speech, TTSConfig, create_tts
from engines.tts.errors import InvalidInputError, ModelLoadError
from engines.tts.espeak import EspeakTTS
from engines.tts.phonemes import SILENCE
from engines.tts.piper_tts import PiperTTS
from testkit.speech import Engine


@pytest.fixture(scope="session")
def piper() -> PiperTTS:
    return PiperTTS()


@pytest.fixture(scope="session")
def espeak() -> EspeakTTS:
    return EspeakTTS("en-us")


def _one(tts: PiperTTS | EspeakTTS, text: str) -> Speech:
    parts = list(tts.synthesize(text))
    assert len(parts) == 1
    return parts[0]


def _rms(pcm: np.ndarray) -> float:
    return float(np.sqrt(np.mean(pcm.astype(np.float64) ** 2)))


def _f0_hz(s: Speech) -> float:
    """Median pitch of the voiced 40 ms frames (autocorrelation peak in 60..400 Hz)."""
    x = s.pcm.astype(np.float64)
    n, hop = int(0.04 * s.sample_rate), int(0.01 * s.sample_rate)
    lo, hi = s.sample_rate // 400, s.sample_rate // 60
    loud = 0.3 * np.sqrt(np.mean(x**2))
    f0 = []
    for start in range(0, len(x) - n, hop):
        frame = x[start : start + n] - x[start : start + n].mean()
        if np.sqrt(np.mean(frame**2)) < loud:
            continue
        ac = np.correlate(frame, frame, "full")[n - 1 :]
        lag = lo + int(np.argmax(ac[lo:hi]))
        if ac[lag] > 0.3 * ac[0]:
            f0.append(s.sample_rate / lag)
    return float(np.median(f0))


def _same_voice(a: Speech, b: Speech) -> bool:
    """espeak-ng is not bit-exact between calls (a few samples of jitter): compare loosely."""
    return (
        abs(len(a.pcm) - len(b.pcm)) < 0.01 * len(a.pcm)
        and abs(_f0_hz(a) - _f0_hz(b)) < 0.06 * _f0_hz(a)
        and [p.phoneme for p in a.phonemes] == [p.phoneme for p in b.phonemes]
    )


def _check_timings(speech: Speech) -> None:
    ph = speech.phonemes
    assert ph, "no phoneme timings"
    assert ph[0].start_ms == 0.0
    for a, b in zip(ph, ph[1:], strict=False):
        assert a.dur_ms > 0
        assert b.start_ms == pytest.approx(a.start_ms + a.dur_ms, abs=1e-6)  # contiguous
    assert ph[-1].start_ms + ph[-1].dur_ms == pytest.approx(1000 * speech.duration_s, abs=0.5)
    assert sum(p.phoneme != SILENCE for p in ph) >= 3
    assert not any(p.phoneme.startswith(("ˈ", "ˌ")) for p in ph)


@pytest.mark.parametrize("name", ["piper", "espeak"])
def test_speech_is_audible_and_grows_with_text(
    name: str, piper: PiperTTS, espeak: EspeakTTS
) -> None:
    tts = piper if name == "piper" else espeak
    short = _one(tts, "Hello.")
    long = _one(tts, "Hello, and thank you for calling us about your new account today.")
    assert short.pcm.dtype == np.int16 and short.sample_rate == tts.sample_rate == 22050
    assert _rms(short.pcm) > 500 and _rms(long.pcm) > 500
    assert long.duration_s > 2.5 * short.duration_s
    _check_timings(short)
    _check_timings(long)


def test_piper_yields_one_speech_per_sentence(piper: PiperTTS) -> None:
    parts = list(piper.synthesize("It is sunny. Let us go out! Shall we?"))
    assert len(parts) == 3
    for part in parts:
        _check_timings(part)


def _energy(s: Speech, pause: bool) -> float:
    pcm = s.pcm.astype(np.float64)
    rate = s.sample_rate / 1000
    parts = [
        pcm[int(p.start_ms * rate) : int(p.end_ms * rate)]
        for p in s.phonemes
        if (p.phoneme == SILENCE) == pause and (pause or p.phoneme[0] in "aeiouæɛɪʊəɑɔ")
    ]
    return float(np.sqrt(np.mean(np.concatenate(parts) ** 2)))


def test_timings_line_up_with_sound(piper: PiperTTS) -> None:
    """Pauses must fall on quiet audio and vowels on loud audio (piper samples noise inside
    the model, so compare energies over all segments, not single ones)."""
    for _ in range(3):
        s = _one(piper, "Yes, I can help with that, or maybe with this.")
        assert _energy(s, pause=False) > 3 * _energy(s, pause=True)


def test_piper_speed_changes_duration() -> None:
    slow = _one(PiperTTS(speed=0.8), "This sentence is a little bit longer.")
    fast = _one(PiperTTS(speed=1.5), "This sentence is a little bit longer.")
    assert fast.duration_s < 0.8 * slow.duration_s


def test_espeak_variants_sound_different(espeak: EspeakTTS) -> None:
    text = "The quick brown fox jumps over the lazy dog."
    base = _one(espeak, text)
    high = _one(EspeakTTS("en-us", pitch=90), text)
    female = _one(EspeakTTS("en-us+f3"), text)
    british = _one(EspeakTTS("en-gb"), text)
    fast = _one(EspeakTTS("en-us", speed=1.6), text)
    assert fast.duration_s < 0.8 * base.duration_s
    for other in (high, female, british, fast):
        assert not _same_voice(base, other)
    # The shared espeak state must not leak between instances.
    assert _same_voice(_one(espeak, text), base)


def test_espeak_is_thread_safe(espeak: EspeakTTS) -> None:
    texts = [f"Number {i} is here." for i in range(6)]
    expected = {t: _one(espeak, t) for t in texts}
    other = EspeakTTS("en-us+f3", pitch=80, speed=1.5)
    results: dict[str, Speech] = {}

    def work(t: str) -> None:
        _one(other, "Distracting speech from another voice.")
        results[t] = _one(espeak, t)

    threads = [threading.Thread(target=work, args=(t,)) for t in texts]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for t in texts:
        assert _same_voice(results[t], expected[t])


def test_bad_input_and_config(espeak: EspeakTTS, piper: PiperTTS) -> None:
    assert list(espeak.synthesize("   ")) == []
    assert list(piper.synthesize("")) == []
    with pytest.raises(InvalidInputError):
        list(piper.synthesize(b"bytes"))  # type: ignore[arg-type]
    with pytest.raises(ModelLoadError):
        EspeakTTS("no-such-voice")
    with pytest.raises(ModelLoadError):
        PiperTTS("/nonexistent/voice.onnx")
    with pytest.raises(InvalidInputError):
        create_tts(TTSConfig(engine="nope"))
    tts = create_tts(TTSConfig(engine="espeak", espeak_voice="en-us+m3", speed=1.2, pitch=40))
    assert isinstance(tts, EspeakTTS) and tts.sample_rate == 22050


def test_piper_without_noise_repeats_itself(piper: PiperTTS) -> None:
    """Noise off (benchmarks comparing runtimes): the same text, the same samples; with the
    voice's noise two takes differ."""
    quiet = PiperTTS(noise_scale=0.0, noise_w_scale=0.0)
    text = "The capital of France is Paris."
    takes = [np.concatenate([s.pcm for s in quiet.synthesize(text)]) for _ in range(2)]
    assert np.array_equal(takes[0], takes[1])
    noisy = [np.concatenate([s.pcm for s in piper.synthesize(text)]) for _ in range(2)]
    assert len(noisy[0]) != len(noisy[1]) or not np.array_equal(noisy[0], noisy[1])


def test_piper_on_cuda_without_the_cuda_provider_stops_at_load() -> None:
    """`use_cuda` on an onnxruntime without its CUDA provider (this machine's CPU build):
    a clear load error naming the key, not a silent fall-back to the CPU."""
    import onnxruntime

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        pytest.skip("this onnxruntime has its CUDA provider")
    with pytest.warns(UserWarning), pytest.raises(ModelLoadError, match=r"\[tts\] use_cuda"):
        PiperTTS(use_cuda=True)


def _words(text: str) -> list[str]:
    return re.sub(r"[^a-z0-9' ]", " ", text.lower()).split()


def wer(ref: str, hyp: str) -> float:
    r, h = _words(ref), _words(hyp)
    d = list(range(len(h) + 1))
    for i in range(1, len(r) + 1):
        prev, d[0] = d[0], i
        for j in range(1, len(h) + 1):
            cur = min(d[j] + 1, d[j - 1] + 1, prev + (r[i - 1] != h[j - 1]))
            prev, d[j] = d[j], cur
    return d[len(h)] / max(len(r), 1)


SENTENCES = (
    "please tell me the balance of my savings account",
    "the weather will be warm and sunny tomorrow morning",
    "can you help me learn a few words in spanish",
)


@pytest.fixture(scope="session")
def asr() -> StreamingASR:
    from engines.asr import create_asr

    return create_asr()


@pytest.mark.slow
@pytest.mark.parametrize(("engine", "limit"), [("piper", 0.15), ("espeak", 0.35)])
def test_round_trip_through_asr(engine: Engine, limit: float, asr: StreamingASR) -> None:
    """TTS -> the project's ASR (engines.asr default, Whisper tiny.en) gives the words back."""
    from testkit.speech import synth

    errors = []
    for text in SENTENCES:
        pcm = synth(text, engine=engine, sample_rate=16000)
        stream = asr.open()
        for start in range(0, len(pcm), 1600):  # 100 ms pieces, as the server feeds it
            stream.feed(pcm[start : start + 1600])
        errors.append(wer(text, stream.finish()))
    assert float(np.mean(errors)) < limit, errors

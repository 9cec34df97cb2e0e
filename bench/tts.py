"""Benchmark: the TTS stage, per voice: speed (real-time factor, first-chunk latency) and how
well Whisper base hears it back (WER for English, CER for Mandarin after Simplified conversion).

Every sentence of `testkit.sentences` (22 English, 22 Mandarin: numbers, dates, money, times,
names) is said as the agent says an answer: cut by the agent's chunker, each chunk normalized
and synthesized (`engines.voicing.speak`). Per voice: `first chunk ms` p50/p95 of the first
chunk's synthesis (what the voice adds to an answer's first audio); `rtf` synthesis time over
audio length per sentence; `cpu` the process's CPU time over audio length (on a shared machine
the CPU time says what the voice costs); `WER / CER` the audio at 16 kHz through Whisper base,
both sides normalized for speech (`testkit.sentences.spoken_reference` / `heard_reference`);
`syllables` (Mandarin) the same as pinyin syllables, with and without tones (a homophone
Whisper writes counts in the CER, not here).

    .venv/bin/python bench/tts.py [--voices zf_xiaoyi af_heart piper ...] [--sentences 22]
        [--threads 2] [--sessions 1] [--optimization all]
        [--max-tokens 200] [--no-asr] [--show] [--json FILE]

`piper` as a voice is the English piper default (the CPU profile's voice).
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.stats import pct, publish  # noqa: E402
from common.logs import setup_logging  # noqa: E402
from engines.asr.config import AsrConfig  # noqa: E402
from engines.asr.text import (  # noqa: E402
    char_error_rate,
    corpus_error_rate,
    normalize_chars,
    word_error_rate,
)
from engines.pcm import resample  # noqa: E402
from engines.tts import TTS, TTSConfig, create_tts  # noqa: E402
from engines.tts.kokoro import language_of  # noqa: E402
from engines.voicing import SpokenChunks, speak  # noqa: E402
from testkit.sentences import (  # noqa: E402
    EN_SENTENCES,
    ZH_SENTENCES,
    heard_reference,
    spoken_reference,
)

ZH_VOICES = ("zf_xiaobei", "zf_xiaoni", "zf_xiaoxiao", "zf_xiaoyi", "zm_yunjian", "zm_yunxi",
             "zm_yunxia", "zm_yunyang")
EN_VOICES = ("af_heart", "af_bella", "am_michael", "bf_emma", "piper")


@dataclass
class VoiceResult:
    voice: str
    language: str
    load_s: float
    first_ms: list[float] = field(default_factory=list)
    rtf: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    audio_s: float = 0.0
    refs: list[str] = field(default_factory=list)
    hyps: list[str] = field(default_factory=list)
    error_rate: float = float("nan")
    syllable_rates: tuple[float, float] = (float("nan"), float("nan"))  # (toned, toneless)


def _tts(voice: str, args: argparse.Namespace) -> TTS:
    if voice == "piper":
        return create_tts(TTSConfig())
    return create_tts(TTSConfig(
        engine="kokoro", voice=voice, kokoro_threads=args.threads,
        kokoro_sessions=args.sessions, kokoro_optimization=args.optimization,
        kokoro_max_tokens=args.max_tokens,
    ))


def run_voice(voice: str, args: argparse.Namespace, runner: dict[str, object]) -> VoiceResult:
    language = "en" if voice == "piper" else language_of(voice)[:2]
    start = time.perf_counter()
    tts = _tts(voice, args)
    result = VoiceResult(voice, language, time.perf_counter() - start)
    sentences = (ZH_SENTENCES if language == "zh" else EN_SENTENCES)[: args.sentences]
    speak(tts, sentences[0])  # warm-up: the first call pays onnxruntime's set-up
    for text in sentences:
        pcm: list[np.ndarray] = []
        took = 0.0
        for i, chunk in enumerate(SpokenChunks().all(text)):
            t0, c0 = time.perf_counter(), time.process_time()
            speech = speak(tts, chunk)
            dt = time.perf_counter() - t0
            result.cpu_s += time.process_time() - c0
            took += dt
            if i == 0:
                result.first_ms.append(dt * 1000)
            if speech is not None:
                pcm.append(speech.pcm)
        audio = np.concatenate(pcm) if pcm else np.zeros(0, np.int16)
        seconds = len(audio) / tts.sample_rate
        result.audio_s += seconds
        result.rtf.append(took / max(seconds, 1e-3))
        if runner:
            from engines.asr.whisper import WhisperModelRunner

            whisper = runner[language]
            assert isinstance(whisper, WhisperModelRunner)
            heard = whisper.decode(resample(audio, tts.sample_rate, 16000)).text
            result.refs.append(spoken_reference(text))
            result.hyps.append(heard_reference(heard))
    if result.refs:
        rate = char_error_rate if language == "zh" else word_error_rate
        result.error_rate = rate(result.refs, result.hyps)
        if language == "zh":
            result.syllable_rates = syllable_error_rates(result.refs, result.hyps)
    return result


def syllable_error_rates(refs: list[str], hyps: list[str]) -> tuple[float, float]:
    """Corpus error rates of the pinyin syllables (with tones, without tones)."""
    from pypinyin import Style, lazy_pinyin

    def toned(text: str) -> list[str]:
        chars = "".join(normalize_chars(text))
        return list(lazy_pinyin(chars, style=Style.TONE3, neutral_tone_with_five=True))

    def toneless(text: str) -> list[str]:
        return [s.rstrip("12345") for s in toned(text)]

    return corpus_error_rate(refs, hyps, toned), corpus_error_rate(refs, hyps, toneless)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--voices", nargs="+", default=[*ZH_VOICES, *EN_VOICES])
    parser.add_argument("--sentences", type=int, default=22)
    parser.add_argument("--threads", type=int, default=TTSConfig.kokoro_threads)
    parser.add_argument("--sessions", type=int, default=TTSConfig.kokoro_sessions)
    parser.add_argument("--optimization", default=TTSConfig.kokoro_optimization)
    parser.add_argument("--max-tokens", type=int, default=TTSConfig.kokoro_max_tokens)
    parser.add_argument("--no-asr", action="store_true", help="speed only")
    parser.add_argument("--show", action="store_true", help="print every wrong transcript")
    parser.add_argument("--json", default=None)
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args()
    setup_logging(args.log_level)

    runner: dict[str, object] = {}
    if not args.no_asr:
        from engines.asr.whisper import WhisperModelRunner

        for lang in ("en", "zh"):
            runner[lang] = WhisperModelRunner(AsrConfig(language=lang, cpu_threads=2))
    results = []
    for voice in args.voices:
        results.append(run_voice(voice, args, runner))
        r = results[-1]
        print(f"{voice}: rtf p50 {pct(r.rtf, 0.5):.2f}, cpu {r.cpu_s / max(r.audio_s, 1e-3):.2f} "
              f"s/s, error {r.error_rate:.3f}", file=sys.stderr, flush=True)
    lines = [
        f"# tts: {platform.processor() or platform.machine()}, threads={args.threads} "
        f"sessions={args.sessions} opt={args.optimization} "
        f"max_tokens={args.max_tokens}, {args.sentences} sentences per voice",
        "| voice | lang | load s | first chunk ms p50 / p95 | rtf p50 / p95 | cpu s / audio s "
        "| audio s | WER / CER | syllables toned / toneless |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        rate = "—" if np.isnan(r.error_rate) else f"{r.error_rate * 100:.1f}%"
        kind = "CER" if r.language == "zh" else "WER"
        toned, toneless = r.syllable_rates
        syl = "—" if np.isnan(toned) else f"{toned * 100:.1f}% / {toneless * 100:.1f}%"
        lines.append(
            f"| {r.voice} | {r.language} | {r.load_s:.1f} | {pct(r.first_ms, 0.5):.0f} / "
            f"{pct(r.first_ms, 0.95):.0f} | {pct(r.rtf, 0.5):.2f} / {pct(r.rtf, 0.95):.2f} | "
            f"{r.cpu_s / max(r.audio_s, 1e-3):.2f} | {r.audio_s:.0f} | {kind} {rate} | {syl} |"
        )
    if args.show:
        for r in results:
            for ref, hyp in zip(r.refs, r.hyps, strict=True):
                if ref.replace(" ", "") != hyp.replace(" ", ""):
                    lines.append(f"{r.voice}: {ref!r} -> {hyp!r}")
    raw = [{"voice": r.voice, "language": r.language, "first_ms": r.first_ms, "rtf": r.rtf,
            "cpu_s": r.cpu_s, "audio_s": r.audio_s,
            "error_rate": r.error_rate, "syllable_rates": r.syllable_rates,
            "refs": r.refs, "hyps": r.hyps} for r in results]
    return publish("\n".join(lines), raw, args.json)


if __name__ == "__main__":
    raise SystemExit(main())

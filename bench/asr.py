"""Benchmark: hearing (endpointer + streaming ASR) on generated speech, in real time.

Each utterance (piper or espeak-ng voice, clean or with white noise at 10 dB SNR relative to
the speech) is played like a live microphone: 20 ms frames at wall-clock pace go through the
endpointer (as the server's event loop does), and the ASR stream's feed()/finish() run
serially on one worker thread (as the server's per-session lane does). Measured per utterance:

- final latency from SpeechEnded: finish() returned - the moment the frame that made the
  endpointer emit SpeechEnded was pushed (what the conversation waits for);
- final latency from the true end of speech: finish() returned - the moment the last voiced
  sample of the clean speech was pushed (includes the endpointer's 400 ms hangover);
- text ready after the true end: when the decode whose text became the final returned (the
  decode ahead at a pause runs before the hangover is over);
- RTF (decode seconds over audio seconds, all decodes of the stream, and one offline final
  decode), WER of the finals, partial counts, process CPU use.

    .venv/bin/python bench/asr.py [--conditions piper-clean,espeak-noisy] [--limit N]
        [--pause-hint-ms 0] [--end-silence-ms 400]

Runs take about as long as the audio (~6 min for all 72 utterances).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import queue
import resource
import statistics
import sys
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engines.asr import AsrConfig, create_asr  # noqa: E402
from engines.asr.streaming import WhisperStream, WhisperStreamingASR  # noqa: E402
from engines.asr.text import word_error_rate  # noqa: E402
from engines.vad import SpeechEnded, SpeechStarted, VadConfig, create_endpointer  # noqa: E402
from tests.support.speech import add_noise, synth  # noqa: E402

SR = 16000
FRAME = 320
LEAD_S, TAIL_S = 0.5, 1.2
SENTENCES = (
    "Hello there.",
    "What time is it?",
    "Turn on the lights, please.",
    "Can you hear me clearly now?",
    "I would like to book a table for two.",
    "The weather is lovely today, isn't it?",
    "Please remind me to call my mother tomorrow morning.",
    "How far is the nearest train station from here?",
    "My account was charged twice for the same order last week.",
    "Could you explain how photosynthesis works in simple words?",
    "I am looking for a quiet place to read and drink some coffee.",
    "The children played in the garden until it started to rain heavily.",
    "Please transfer the money to my savings account before the end of the month.",
    "When the museum opens again, we should visit the new exhibition about ancient Egypt.",
    "Yesterday I forgot my umbrella on the bus, and by the time I got home I was completely "
    "soaked.",
    "Our teacher asked us to write a short essay about the history of our town and the "
    "people who built it.",
    "If you have a moment after lunch, could you look at the report I sent you and tell me "
    "whether the numbers in the second table make sense?",
    "The old lighthouse on the northern coast was repaired last summer, and now visitors can "
    "climb the stairs to enjoy the view over the sea.",
)
CONDITIONS = ("piper-clean", "piper-noisy", "espeak-clean", "espeak-noisy")


@dataclass
class Clip:
    text: str
    condition: str
    audio: np.ndarray  # lead silence + speech + tail silence (noise throughout if noisy)
    speech_start: float  # s, first voiced sample of the clean speech
    speech_end: float  # s, last voiced sample of the clean speech

    @property
    def duration(self) -> float:
        return self.speech_end - self.speech_start


@dataclass
class Run:
    finals: list[str] = field(default_factory=list)
    partials: list[tuple[float, str]] = field(default_factory=list)  # (audio time s, text)
    ended_wall: float = math.nan  # wall time SpeechEnded was emitted (last utterance)
    final_wall: float = math.nan  # wall time finish() returned (last utterance)
    ready_wall: float = math.nan  # wall time the final's decode returned
    finish_decoded: bool = False
    decode_s: float = 0.0
    decodes: int = 0


def voiced_bounds(clean: np.ndarray) -> tuple[int, int]:
    """First and last sample of 10 ms frames within 40 dB of the loudest frame."""
    n = clean.shape[0] // 160 * 160
    frames = clean[:n].astype(np.float64).reshape(-1, 160)
    db = 10 * np.log10(np.mean(frames**2, axis=1) + 1e-9)
    voiced = np.flatnonzero(db > db.max() - 40)
    return int(voiced[0] * 160), int((voiced[-1] + 1) * 160)


def make_clip(text: str, condition: str) -> Clip:
    engine, kind = condition.split("-")
    speech = synth(text, engine)  # type: ignore[arg-type]
    first, last = voiced_bounds(speech)
    speech = speech[first:last]
    lead, tail = np.zeros(int(LEAD_S * SR), np.int16), np.zeros(int(TAIL_S * SR), np.int16)
    audio = np.concatenate([lead, speech, tail])
    if kind == "noisy":
        # add_noise measures signal power over the whole clip: correct for the silences so
        # the SNR is 10 dB relative to the speech itself.
        snr = 10.0 + 10 * math.log10(speech.shape[0] / audio.shape[0])
        audio = add_noise(audio, snr, seed=zlib.crc32(text.encode()) % 1000)
    return Clip(text, condition, audio, LEAD_S, LEAD_S + speech.shape[0] / SR)


def play(clip: Clip, asr: WhisperStreamingASR, vad: VadConfig, hint_ms: int) -> Run:
    """Play `clip` in real time through endpointer + ASR lane; see module docstring."""
    run = Run()
    lane: queue.Queue[tuple[str, np.ndarray | None, float]] = queue.Queue()

    def worker() -> None:
        stream: WhisperStream | None = None
        while True:
            op, frame, t_audio = lane.get()
            if op == "stop":
                return
            if op == "open":
                stream = asr.open()
            assert stream is not None
            if op in ("open", "feed"):
                assert frame is not None
                partial = stream.feed(frame)
                if partial is not None:
                    run.partials.append((t_audio, partial))
            elif op == "hint":
                stream.pause_hint()
            elif op == "finish":
                before = stream.decodes
                run.finals.append(stream.finish())
                run.final_wall = time.perf_counter()
                run.finish_decoded = stream.decodes > before
                run.ready_wall = stream.last_decode_done if stream.decodes else run.final_wall
                run.decode_s += stream.decode_seconds
                run.decodes += stream.decodes
                stream = None

    thread = threading.Thread(target=worker, name="asr-lane")
    thread.start()
    endpointer = create_endpointer(vad)
    in_speech = hinted = False
    wall0 = time.perf_counter()
    audio = clip.audio
    for i in range(0, audio.shape[0] - FRAME + 1, FRAME):
        t_audio = (i + FRAME) / SR
        time.sleep(max(0.0, wall0 + t_audio - time.perf_counter()))
        frame = audio[i : i + FRAME]
        event = endpointer.push(frame)
        if isinstance(event, SpeechStarted):
            lane.put(("open", event.audio, t_audio))
            in_speech, hinted = True, False
        elif isinstance(event, SpeechEnded):
            run.ended_wall = time.perf_counter()
            lane.put(("finish", None, t_audio))
            in_speech = False
        elif in_speech:
            lane.put(("feed", frame, t_audio))
            silence = endpointer.trailing_silence_ms
            if hint_ms and silence >= hint_ms and not hinted:
                lane.put(("hint", None, t_audio))
                hinted = True
            elif silence == 0:
                hinted = False
    if in_speech:  # the endpointer never ended it: finish at the end of the clip
        run.ended_wall = time.perf_counter()
        lane.put(("finish", None, audio.shape[0] / SR))
    lane.put(("stop", None, 0.0))
    thread.join()
    run.ended_wall -= wall0
    run.final_wall -= wall0
    run.ready_wall -= wall0
    return run


def pct(values: list[float], q: float) -> float:
    ordered = sorted(v for v in values if not math.isnan(v))
    if not ordered:
        return math.nan
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def ms(values: list[float]) -> str:
    return f"{pct(values, 0.5) * 1000:.0f} / {pct(values, 0.95) * 1000:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--conditions", default=",".join(CONDITIONS))
    parser.add_argument("--limit", type=int, default=len(SENTENCES), help="sentences per condition")
    parser.add_argument("--pause-hint-ms", type=int, default=0)
    parser.add_argument("--end-silence-ms", type=int, default=400)
    parser.add_argument("--decode-ahead-ms", type=int, default=AsrConfig.decode_ahead_ms)
    parser.add_argument("--beam-size", type=int, default=1)
    args = parser.parse_args()

    config = AsrConfig(decode_ahead_ms=args.decode_ahead_ms, beam_size=args.beam_size)
    vad = VadConfig(end_silence_ms=args.end_silence_ms)
    t0 = time.perf_counter()
    asr = create_asr(config)
    assert isinstance(asr, WhisperStreamingASR)
    asr.warm_up()
    load_s = time.perf_counter() - t0
    conditions = args.conditions.split(",")
    clips = [make_clip(s, c) for c in conditions for s in SENTENCES[: args.limit]]
    print(f"# {len(clips)} utterances, {sum(c.duration for c in clips):.0f} s of speech; "
          f"model load + warm-up {load_s:.1f} s", file=sys.stderr)

    load_before = os.getloadavg()[0]
    usage0, wall0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    runs = []
    for k, clip in enumerate(clips, 1):
        run = play(clip, asr, vad, args.pause_hint_ms)
        runs.append(run)
        print(f"# {k}/{len(clips)} {clip.condition} {clip.duration:.1f}s "
              f"event->final {(run.final_wall - run.ended_wall) * 1000:.0f} ms | "
              f"{' / '.join(run.finals)}", file=sys.stderr)
    usage1, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - wall0
    cpu_s = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)

    offline_rtf = []
    for clip in clips:
        speech = clip.audio[int(clip.speech_start * SR) : int(clip.speech_end * SR) + 3200]
        offline_rtf.append(asr.runner.decode(speech).seconds / clip.duration)

    print(f"\nMachine: {platform.machine()}, {os.cpu_count()} cores; {time.strftime('%Y-%m-%d')}; "
          f"1-min load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after the run "
          "(other processes share these cores: compare runs at similar load)")
    print(f"Config: faster-whisper tiny.en int8, beam {config.beam_size}, context pad "
          f"{config.context_pad_s} s, decode ahead {config.decode_ahead_ms} ms, endpointer "
          f"hangover {vad.end_silence_ms} ms, pause hint {args.pause_hint_ms or 'off'}\n")
    print("| utterances | n | final after SpeechEnded p50 / p95 ms | final after true end "
          "p50 / p95 ms | text ready after true end p50 / p95 ms | finish() had to decode |")
    print("|---|---|---|---|---|---|")
    groups = {"1-5 s": lambda c: c.duration <= 5.0, "> 5 s": lambda c: c.duration > 5.0,
              "all": lambda c: True}
    for name, pick in groups.items():
        sel = [(c, r) for c, r in zip(clips, runs, strict=True) if pick(c)]
        if not sel:
            continue
        ev = [r.final_wall - r.ended_wall for _, r in sel]
        true = [r.final_wall - c.speech_end for c, r in sel]
        ready = [r.ready_wall - c.speech_end for c, r in sel]
        decoded = sum(r.finish_decoded for _, r in sel)
        print(f"| {name} | {len(sel)} | {ms(ev)} | {ms(true)} | {ms(ready)} | "
              f"{decoded}/{len(sel)} |")

    print("\n| condition | WER | partials per utterance | first partial after speech "
          "start p50 ms | utterances >= 2 s with a partial before the end | stream RTF |")
    print("|---|---|---|---|---|---|")
    for cond in conditions:
        sel = [(c, r) for c, r in zip(clips, runs, strict=True) if c.condition == cond]
        wer = word_error_rate([c.text for c, _ in sel], [" ".join(r.finals) for _, r in sel])
        n_partials = statistics.mean(len(r.partials) for _, r in sel)
        first = [r.partials[0][0] - c.speech_start for c, r in sel if r.partials]
        long = [(c, r) for c, r in sel if c.duration >= 2.0]
        early = sum(any(t < c.speech_end for t, _ in r.partials) for c, r in long)
        rtf = sum(r.decode_s for _, r in sel) / sum(c.duration for c, _ in sel)
        print(f"| {cond} | {wer * 100:.1f}% | {n_partials:.1f} | {pct(first, 0.5) * 1000:.0f} | "
              f"{early}/{len(long)} | {rtf:.2f} |")

    print(f"\nOne offline decode of the whole utterance: RTF p50 {pct(offline_rtf, 0.5):.3f}, "
          f"p95 {pct(offline_rtf, 0.95):.3f}.")
    print(f"Process CPU during the real-time run: {cpu_s:.0f} s over {wall:.0f} s wall = "
          f"{cpu_s / wall:.2f} cores on average; {cpu_s / sum(c.duration for c in clips):.2f} "
          "CPU-s per second of speech.")


if __name__ == "__main__":
    main()

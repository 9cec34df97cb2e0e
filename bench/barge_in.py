"""Benchmark: talking over the agent, through the real WebRTC path, on the embedded defaults.

The server runs as its own process; a loopback aiortc peer asks a question that gets a long
answer, and 1.2 s after the answer's voice arrives it talks over it:
- real interruptions: a second question in one of several voices (piper, espeak-ng en-us and
  en-us+m3, piper at 0.85 speed). Measured at the client: how long after the interrupting
  speech began the agent's audio stopped arriving, the interrupting question's final
  transcript (WER),
  and whether the reply answers it (a keyword of the right answer);
- false interruptions: a cough (shaped noise bursts), clicks, a hummed "mm-hm" (two voiced
  nasal syllables: the TTS voices spell "Mm-hm" out as letters) and spoken backchannels
  ("yeah", "okay", "right"), a television 15 dB and music 10 dB under the asking voice, 4 s
  of each. Measured: how often the answer ended (no more agent audio
  within 4 s of the sound, or an answer to the sound) instead of going on.
Prints p50/p95 tables (markdown).

    unshare -n sh -c 'ip link set lo up && exec .venv/bin/python bench/barge_in.py [--trials 10]'
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.server_process import agent_toml, running_server  # noqa: E402
from bench.slow_machine import SlowMachine, add_options, modes  # noqa: E402
from bench.stats import pct  # noqa: E402
from common.logs import setup_logging  # noqa: E402
from engines.asr.text import word_error_rate  # noqa: E402
from rtc_server.ice import restrict_host_candidates_to_loopback  # noqa: E402
from testkit.agent import audio_timeline  # noqa: E402
from testkit.peer import LoopbackPeer, PcmMicrophone  # noqa: E402
from testkit.speech import Engine, music, synth, voiced_bounds  # noqa: E402

RATE = 16000
LONG = (
    "Tell me about the history of the Roman Empire.",
    "Explain how airplanes stay in the air.",
    "Describe a walk through the old town of Prague.",
    "Tell me a long story about a brave knight and a dragon.",
    "Explain how the internet works.",
)
QUESTIONS = (
    ("What is the capital of Japan?", ("tokyo",)),
    ("How many legs does a spider have?", ("eight", "8")),
    ("Who wrote Romeo and Juliet?", ("shakespeare",)),
    ("What is the largest ocean on Earth?", ("pacific",)),
    ("What color do you get when you mix blue and yellow?", ("green",)),
    ("Which planet is known as the red planet?", ("mars",)),
    ("What is the capital of Italy?", ("rome",)),
    ("What language do people speak in Brazil?", ("portuguese",)),
    ("How many days are there in a week?", ("seven", "7")),
    ("What is the freezing point of water in Celsius?", ("zero", "0")),
)
# (engine, voice, speed). espeak's en-gb+f3 was dropped: Whisper base misreads it even
# offline, from the clean file (WER 1.4 on "Who wrote Romeo and Juliet?").
VOICES: tuple[tuple[Engine, str | None, float], ...] = (
    ("piper", None, 1.0), ("espeak", "en-us", 1.0), ("piper", None, 0.85),
    ("espeak", "en-us+m3", 1.0), ("kokoro", "am_eric", 1.0), ("espeak", "en-gb+f2", 1.0),
)
DETECTED_MS = 1500.0  # the agent's audio stopped this soon after the interruption began
FALSE = ("cough", "clicks", "mm-hm", "yeah", "okay", "right", "tv", "music")
# Background sounds, dB under the asking voice (power over each one's voiced span):
# a television's presenter (a voice nobody asks in) and music in the room, 4 s of each.
UNDER_DB = {"tv": 15.0, "music": 10.0}
TV = ("Good evening. Heavy rain is on its way to the north tonight, and in the markets, shares "
      "closed higher after a difficult week.")
LOUD_RMS = 200.0
LEAD_S = 0.5


def cough(seed: int) -> np.ndarray:
    """Two bursts of band-limited noise with a fast attack: what a cough sounds like to a VAD."""
    rng = np.random.default_rng(seed)
    parts = []
    for length_s in (0.18, 0.12):
        n = int(RATE * length_s)
        noise = np.convolve(rng.standard_normal(n), np.ones(4) / 4, mode="same")
        envelope = np.exp(-np.linspace(0, 5, n)) * np.minimum(1, np.linspace(0, 30, n))
        parts += [noise * envelope * 9000, np.zeros(int(RATE * 0.08))]
    return np.concatenate(parts).astype(np.int16)


def clicks() -> np.ndarray:
    out = np.zeros(int(RATE * 0.6), np.int16)
    for k in range(5):
        out[k * 1900 : k * 1900 + 24] = 20000
    return out


def hum() -> np.ndarray:
    """"Mm-hm": two hummed syllables (a 110-130 Hz glottal tone through a nasal-ish filter)."""
    parts = []
    for length_s, f0 in ((0.22, 120.0), (0.3, 135.0)):
        t = np.arange(int(RATE * length_s)) / RATE
        tone = sum(np.sin(2 * np.pi * f0 * k * t) / k**1.5 for k in range(1, 12))
        envelope = np.minimum(1, np.minimum(t / 0.03, (length_s - t) / 0.05))
        parts += [tone * envelope * 6000, np.zeros(int(RATE * 0.09))]
    return np.concatenate(parts).astype(np.int16)


def under(pcm: np.ndarray, voice: np.ndarray, db: float) -> np.ndarray:
    """`pcm` scaled to `db` under `voice` (the power of each one's voiced span)."""
    def power(x: np.ndarray) -> float:
        first, last = voiced_bounds(x)
        return float(np.mean(x[first:last].astype(np.float64) ** 2))
    gain = math.sqrt(power(voice) / power(pcm) / 10 ** (db / 10))
    return np.clip(pcm * gain, -32768, 32767).astype(np.int16)


def sound(kind: str, seed: int, asking: np.ndarray) -> np.ndarray:
    if kind in UNDER_DB:
        pcm = synth(TV, engine="kokoro", voice="bm_lewis") if kind == "tv" else music(4.0, seed)
        return under(pcm[: RATE * 4], asking, UNDER_DB[kind])
    if kind == "cough":
        return cough(seed)
    if kind == "clicks":
        return clicks()
    if kind == "mm-hm":
        return hum()
    return synth(kind.capitalize() + ".", engine="piper")


def onset(pcm: np.ndarray) -> float:
    loud = np.flatnonzero(np.abs(pcm.astype(np.int32)) > 500)
    return float(loud[0] / RATE) if len(loud) else 0.0


@dataclass
class Trial:
    kind: str  # "question" or a false-interruption kind
    voice: str
    was_speaking: bool
    stop_ms: float = float("nan")
    wer: float = float("nan")
    answered: bool = False
    ended: bool = False
    silent_ms: float = float("nan")  # false ones: the answer's longest silence from the sound on
    heard: str = ""
    reply: str = ""


async def talk_over(url: str, first: str, audio: np.ndarray) -> tuple[LoopbackPeer, float, float]:
    """Ask `first`, then play `audio` 1.2 s into the answer's voice. Returns the peer and the
    onset and end of the sound (monotonic, at the client)."""
    mic = PcmMicrophone(np.concatenate([np.zeros(int(RATE * LEAD_S), np.int16),
                                        synth(first, engine="piper")]), RATE)
    peer = LoopbackPeer(url, microphone=mic)
    await peer.connect()
    await peer.wait_event(lambda e: e["type"] == "timings" and "first_audio_sent" in
                          e.get("marks_ms", {}), 90)
    await asyncio.sleep(1.2)
    padded = np.concatenate([np.zeros(int(RATE * 0.3), np.int16), audio])
    mic.set_audio(padded, RATE)
    await asyncio.wait_for(mic.playing.wait(), 5)
    assert mic.started_at is not None
    start = mic.started_at + onset(padded)
    end = mic.started_at + len(padded) / RATE
    return peer, start, end


def was_speaking(peer: LoopbackPeer, start: float) -> bool:
    """The agent's voice was arriving in the 0.4 s before the sound began (not a pause)."""
    a_t, rms = audio_timeline(peer.received)
    before = (a_t > start - 0.4) & (a_t < start)
    return bool(before.any() and rms[before].max() > LOUD_RMS)


def silences(peer: LoopbackPeer, start: float, stop: float = math.inf) -> list[tuple[float, float]]:
    """The runs of the agent's silence between `start` and `stop`: (when each began, seconds)."""
    a_t, rms = audio_timeline(peer.received)
    within = (a_t >= start) & (a_t < stop)
    quiet = np.concatenate([[0], (rms[within] <= LOUD_RMS).astype(np.int8), [0]])
    edges = np.flatnonzero(np.diff(quiet))  # where each run begins, then where it ends
    t = a_t[within]
    return [(float(t[b]), (e - b) * 0.02) for b, e in zip(edges[::2], edges[1::2], strict=True)]


def stop_time(peer: LoopbackPeer, start: float, quiet_s: float = 0.6) -> float | None:
    """The start of the first silence of `quiet_s` after `start` (pauses between the answer's
    sentences are shorter)."""
    return next((t for t, seconds in silences(peer, start) if seconds >= quiet_s), None)


def longest_silence(peer: LoopbackPeer, start: float, stop: float) -> float:
    """The longest of the agent's silences between `start` and `stop` (seconds): how long a
    sound paused the answer (a pause between its sentences is ~0.3 s)."""
    return max((seconds for _, seconds in silences(peer, start, stop)), default=0.0)


async def real_trial(url: str, i: int, under_db: float | None = None) -> Trial:
    question, accept = QUESTIONS[i % len(QUESTIONS)]
    engine, voice, speed = VOICES[i % len(VOICES)]
    speech = synth(question, engine=engine, voice=voice, speed=speed)
    first = LONG[i % len(LONG)]
    if under_db is not None:  # a quieter (or louder) interrupter than the asking voice
        speech = under(speech, synth(first, engine="piper"), under_db)
    peer, start, _ = await talk_over(url, first, speech)
    trial = Trial("question", f"{voice or engine}" + (f" x{speed}" if speed != 1.0 else ""), True)
    try:
        final = await peer.wait_event(
            lambda e: e["type"] == "transcript" and e["final"] and e["turn_id"] > 1 and e["text"],
            30,
        )
        trial.heard = final["text"]
        trial.wer = word_error_rate([question], [final["text"]])
        await peer.wait_event(lambda e: e["type"] == "agent_text" and e["final"]
                              and e["turn_id"] == final["turn_id"], 60)
        trial.reply = " ".join(e["text"] for e in peer.received.events_of("agent_text")
                               if e["turn_id"] == final["turn_id"])
        trial.answered = any(word in trial.reply.lower() for word in accept)
    except TimeoutError:
        pass
    trial.was_speaking = was_speaking(peer, start)
    stop = stop_time(peer, start)
    trial.stop_ms = (stop - start) * 1000 if stop is not None else float("nan")
    await peer.close()
    return trial


async def false_trial(url: str, i: int, kinds: tuple[str, ...] = FALSE) -> Trial:
    kind = kinds[i % len(kinds)]
    first = LONG[i % len(LONG)]
    peer, start, end = await talk_over(url, first, sound(kind, i, synth(first, engine="piper")))
    await asyncio.sleep(end + 4.0 - time.monotonic())
    trial = Trial(kind, kind, was_speaking(peer, start))
    a_t, rms = audio_timeline(peer.received)
    after = (a_t > end + 0.2) & (a_t < end + 4.0)
    went_on = bool(after.any() and rms[after].max() > LOUD_RMS)
    answered_it = any(e["text"] and e["turn_id"] > 1 for e in peer.received.events_of("agent_text"))
    trial.ended = not went_on or answered_it
    trial.silent_ms = longest_silence(peer, start, end + 4.0) * 1000
    trial.heard = " ".join(e["text"] for e in peer.received.events_of("transcript")
                           if e["final"] and e["turn_id"] > 1)
    await peer.close()
    return trial


async def run(args: argparse.Namespace, slow: SlowMachine | None) -> list[Trial]:
    restrict_host_candidates_to_loopback()
    log = logging.getLogger("bench")
    trials: list[Trial] = []
    profile = {"mode": args.profile} if args.profile else None
    async with running_server(agent_toml(args.port, profile=profile), slow):
        url = f"http://127.0.0.1:{args.port}"
        for i in range(args.trials):
            trial = await real_trial(url, i, args.under_db)
            trials.append(trial)
            log.info("question %d: stop %.0f ms, heard %r (WER %.2f), reply %r", i,
                     trial.stop_ms, trial.heard, trial.wer, trial.reply[:80])
        for i in range(args.trials if args.false_trials is None else args.false_trials):
            trial = await false_trial(url, i, args.false_kinds)
            trials.append(trial)
            log.info("%s %d: %s (heard %r)", trial.kind, i, "ENDED" if trial.ended else "went on",
                     trial.heard)
    return trials


def report(trials: list[Trial], args: argparse.Namespace, mode: str, label: str) -> str:
    real = [t for t in trials if t.kind == "question"]
    valid = [t for t in real if t.was_speaking]
    stops = [t.stop_ms for t in valid if t.stop_ms == t.stop_ms]
    wers = [t.wer for t in real if t.wer == t.wer]
    false = [t for t in trials if t.kind != "question" and t.was_speaking]
    by_voice = {v: [t.wer for t in real if t.voice == v and t.wer == t.wer]
                for v in dict.fromkeys(t.voice for t in real)}
    lines = [
        f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, {label}, "
        f"`unshare -n sh -c 'ip link set lo up && exec .venv/bin/python bench/barge_in.py "
        f"--trials {args.trials} --modes {mode}"
        + (f" --profile {args.profile}" if args.profile else "")
        + (f" --under-db {args.under_db:g}" if args.under_db is not None else "")
        + (f" --false-trials {args.false_trials}" if args.false_trials is not None else "")
        + (f" --false-kinds {','.join(args.false_kinds)}" if args.false_kinds != FALSE else "")
        + "'`",
        "",
        "| measure | result |",
        "| --- | --- |",
        f"| agent audio stops after the interrupting speech began, p50 / p95 | "
        f"{pct(stops, 0.5):.0f} / {pct(stops, 0.95):.0f} ms ({len(stops)} trials) |",
        f"| interrupting question, WER (mean over {len(wers)}) | "
        f"{np.mean(wers) if wers else float('nan'):.2f} ("
        + ", ".join(f"{v} {np.mean(w):.2f}" for v, w in by_voice.items() if w) + ") |",
        f"| replies that answer the interrupting question | "
        f"{sum(t.answered for t in real)}/{len(real)} |",
        f"| false interruptions that ended the answer | {sum(t.ended for t in false)}/"
        f"{len(false)} |",
    ]
    for kind in FALSE:
        these = [t for t in false if t.kind == kind]
        if these:
            silent = [t.silent_ms for t in these]
            lines.append(f"| - {kind} | {sum(t.ended for t in these)}/{len(these)} ended; the "
                         f"answer's longest silence {pct(silent, 0.5):.0f} ms p50, "
                         f"{max(silent):.0f} max |")
    lines += ["", "| voice | detected (stopped within 1.5 s) | stop p50 ms | WER | answered |",
              "| --- | --- | --- | --- | --- |"]
    for voice in by_voice:
        these = [t for t in valid if t.voice == voice]
        hit = [t.stop_ms for t in these if t.stop_ms <= DETECTED_MS]
        lines.append(f"| {voice} | {len(hit)}/{len(these)} | "
                     f"{pct(hit, 0.5) if hit else float('nan'):.0f} | "
                     f"{np.mean(by_voice[voice]) if by_voice[voice] else float('nan'):.2f} | "
                     f"{sum(t.answered for t in real if t.voice == voice)}/"
                     f"{sum(t.voice == voice for t in real)} |")
    skipped = len(real) - len(valid)
    if skipped:
        lines.append(f"\n{skipped} trial(s) talked over a pause between chunks (not timed).")
    lines.append("\nNot answered or misheard:")
    lines += [f"- {t.voice}: heard {t.heard!r}, reply {t.reply[:100]!r}" for t in real
              if not t.answered or t.wer > 0.2]
    lines += [f"- {t.kind}: ended (heard {t.heard!r})" for t in false if t.ended]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--port", type=int, default=8766)
    parser.add_argument("--under-db", type=float, default=None,
                        help="play each interrupting question this many dB under the asking "
                        "voice (power over the voiced spans; negative: louder); default: as "
                        "synthesized (-7 to 0 dB under piper's)")
    parser.add_argument("--false-kinds", default=",".join(FALSE),
                        type=lambda v: tuple(k for k in v.split(",") if k),
                        help=f"false interruptions to cycle through (default: {','.join(FALSE)})")
    parser.add_argument("--false-trials", type=int, default=None,
                        help="false interruptions to try (default: --trials)")
    add_options(parser)
    args = parser.parse_args()
    if not args.false_kinds or set(args.false_kinds) - set(FALSE):
        parser.error(f"--false-kinds: choose among {','.join(FALSE)}")
    setup_logging("INFO")
    for mode, slow in modes(parser, args):
        label = slow.label() if slow is not None else "as is"
        trials = asyncio.run(run(args, slow))
        print(report(trials, args, mode, label))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())

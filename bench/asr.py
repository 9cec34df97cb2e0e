"""Benchmark: hearing (endpointer + Smart Turn + streaming Whisper) on generated and real speech.

Deterministic sections run offline in audio time through `engines.asr.offline.listen` (the
same logic the server runs live), so they measure the same on a busy or an idle machine:
- `wer`: word error rate per voice (`--voices`: piper, espeak-ng, `kokoro:NAME`) and noise
  (clean, white noise at each of `--snrs` dB relative to the speech), 18 sentences each, and
  the CPU the streaming partials cost;
- `turn`: end-of-turn delay (endpoint minus the true end of the voice, audio time) on 20
  complete questions per voice and noise, and false cut-offs on 20 questions with a pause of
  0.5-0.9 s in mid-sentence (`testkit/pauses.py`), with the turn model and with
  today's fixed 400 ms hangover;
- `session`: the same questions as one speaker's session, the speaker's pauses learnt
  (`[turn] speaker_floor_ms`, engines/turn/speaker.py) against one long limit for all: the
  complete questions first (end of turn, those over 900 ms, and separately the turns whose
  words were misheard), then the paused ones (false cut-offs), each condition its own speaker;
The wall-clock section runs the server's own `rtc_server.hearing.Hearing` on a real clock:
- `realtime`: N utterances played at microphone pace; final transcript after the endpoint,
  endpoint and final after the true end of the voice. Inflated on a shared machine: the
  1-min load average is printed beside it.

    .venv/bin/python bench/asr.py [--sections wer,turn,session,realtime] [--model base|tiny.en]
        [--second base|tiny.en|none]
        [--pause-ms 200] [--decode-ahead-ms 80] [--turn smart-turn-v3.2|none]
        [--turn-runtime onnxruntime|torch] [--turn-device cpu|cuda] [--speaker-floor-ms 700]
        [--voices piper,espeak,kokoro:am_michael] [--snrs 15,5] [--limit N]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import math
import os
import platform
import statistics
import sys
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.stats import pct  # noqa: E402
from engines.asr import AsrConfig, create_asr  # noqa: E402
from engines.asr.base import StreamingASR  # noqa: E402
from engines.asr.offline import HeardUtterance, listen  # noqa: E402
from engines.asr.text import word_error_rate  # noqa: E402
from engines.turn import TurnConfig, TurnModel, load_turn_model  # noqa: E402
from engines.turn.speaker import SpeakerPauses, speaker_pauses  # noqa: E402
from engines.vad import SpeechEnded, VadConfig, create_endpointer  # noqa: E402
from testkit.pauses import COMPLETE_QUESTIONS, PAUSE_QUESTIONS, paused_question  # noqa: E402
from testkit.speech import Engine, add_noise, synth, voiced_bounds  # noqa: E402

SR = 16000
LEAD_S, TAIL_S = 0.5, 2.0
VOICES = ("piper", "espeak")  # or "kokoro:NAME" (`--voices`)
NOISES = ("clean", "15 dB")  # clean, or white noise at that SNR (`--snrs`)
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


@dataclass
class Clip:
    text: str
    voice: str
    noise: str
    audio: np.ndarray  # lead silence + speech + tail silence (noise throughout if noisy)
    voice_end: float  # s, true end of the voice
    pause: tuple[float, float] | None = None  # s, a mid-sentence pause (start, end)


def _place(pcm: np.ndarray, text: str, noise: str) -> np.ndarray:
    lead, tail = np.zeros(int(LEAD_S * SR), np.int16), np.zeros(int(TAIL_S * SR), np.int16)
    audio = np.concatenate([lead, pcm, tail])
    if noise != "clean":  # add_noise measures power over the clip: relative to the speech
        snr = float(noise.split()[0]) + 10 * math.log10(pcm.shape[0] / audio.shape[0])
        audio = add_noise(audio, snr, seed=zlib.crc32(text.encode()) % 1000)
    return audio


def _engine(voice: str) -> tuple[Engine, str | None]:
    """"kokoro:am_michael" -> ("kokoro", "am_michael"); "espeak" -> ("espeak", None)."""
    engine, _, name = voice.partition(":")
    assert engine in ("piper", "espeak", "kokoro"), voice
    return engine, name or None  # type: ignore[return-value]


def sentence_clip(text: str, voice: str, noise: str) -> Clip:
    engine, name = _engine(voice)
    speech = synth(text, engine, voice=name)
    first, last = voiced_bounds(speech)
    speech = speech[first:last]
    return Clip(text, voice, noise, _place(speech, text, noise), LEAD_S + speech.shape[0] / SR)


class Ears:
    """`ears(text, voice, noise="clean")`: `text` spoken in `voice` (and noise), as the
    server's Whisper `model` hears it with `persona`'s facts as its prompt (utterances
    joined), the endpointer and turn model as deployed; `second`: the second opinion's model
    ("auto": the other bundled model, as the profile sets it where the budget allows; "none");
    `words`: the app's names for this user (RTVI `vocabulary`), as a session's prompt.
    `unsure` then says whether the agent
    would ask back: the last utterance's final reused a pause decode whose confidence was
    under `[agent] unsure_below` (rtc_server/agent.py `_unsure`)."""

    def __init__(self, model: str, persona: str = "bank", second: str = "auto",
                 words: tuple[str, ...] = ()) -> None:
        from engines.llm import LLMConfig, build_prompt
        from engines.text.vocabulary import prompt_from
        from rtc_server.config import AgentConfig
        from rtc_server.profile import second_asr

        self._unsure_below = AgentConfig.unsure_below
        facts = build_prompt(LLMConfig(persona=persona)).facts
        self._asr = create_asr(AsrConfig(
            model=model, prompt=prompt_from(facts, (LLMConfig.agent_name,)),
            second_model=second_asr(model, "en") if second == "auto" else second))
        # A session's prompt when its app sent `words` (rtc_server.engine_set.words_prompt)
        self._session = prompt_from(facts, (LLMConfig.agent_name, *words)) if words else None
        self._turn = TurnConfig()
        self._turn_model = load_turn_model(self._turn)
        self.unsure = False

    def __call__(self, text: str, voice: str, noise: str = "clean") -> str:
        clip = sentence_clip(text, voice, noise)
        heard = listen(clip.audio, self._asr, turn=self._turn, turn_model=self._turn_model,
                       prompt=self._session)
        last = heard[-1].pauses[-1] if heard and heard[-1].pauses else None
        self.unsure = bool(last and last.text == heard[-1].text.strip() and (
            last.confidence is not None and last.confidence < self._unsure_below))
        return " ".join(u.text for u in heard).strip()


def paused_clip(k: int, voice: str, noise: str) -> Clip:
    prefix, rest = PAUSE_QUESTIONS[k]
    pause_s = 0.5 + 0.1 * (k % 5)  # 0.5 .. 0.9 s
    ps = paused_question(prefix, rest, pause_s, *_engine(voice))
    audio = _place(ps.pcm, ps.text, noise)
    pause = (LEAD_S + ps.pause_start, LEAD_S + ps.pause_end)
    return Clip(ps.text, voice, noise, audio, LEAD_S + ps.pcm.shape[0] / SR, pause)


def ms(values: list[float]) -> str:
    return f"{pct(values, 0.5) * 1000:.0f} / {pct(values, 0.95) * 1000:.0f}"


Hear = Callable[[Clip], list[HeardUtterance]]


def section_wer(hear: Hear, limit: int, voices: list[str], noises: list[str]) -> None:
    print("\n| voice | noise | WER | partials per utterance | partial decode CPU-s per s "
          "of speech | utterances per sentence |")
    print("|---|---|---|---|---|---|")
    pooled: dict[str, tuple[list[str], list[str]]] = {n: ([], []) for n in noises}
    for voice in voices:
        for noise in noises:
            clips = [sentence_clip(s, voice, noise) for s in SENTENCES[:limit]]
            heard = [hear(c) for c in clips]
            refs, hyps = [c.text for c in clips], [" ".join(u.text for u in h) for h in heard]
            pooled[noise][0].extend(refs)
            pooled[noise][1].extend(hyps)
            speech_s = sum(c.voice_end - LEAD_S for c in clips)
            partial_s = sum(u.partial_compute_s for h in heard for u in h)
            n_partials = statistics.mean(sum(len(u.partials) for u in h) for h in heard)
            per_clip = statistics.mean(len(h) for h in heard)
            print(f"| {voice} | {noise} | {word_error_rate(refs, hyps) * 100:.1f}% | "
                  f"{n_partials:.1f} | {partial_s / speech_s:.3f} | {per_clip:.2f} |")
            for ref, hyp in zip(refs, hyps, strict=True):
                if word_error_rate([ref], [hyp]) > 0:
                    print(f"#   {voice}-{noise}: {ref!r} -> {hyp!r}", file=sys.stderr)
    for noise, (refs, hyps) in pooled.items():
        print(f"| all | {noise} | {word_error_rate(refs, hyps) * 100:.1f}% | | | |")


def _cut_off(clip: Clip, heard: list[HeardUtterance]) -> bool:
    """The turn ended inside the mid-sentence pause (before the rest began)."""
    assert clip.pause is not None
    return any(u.reason != "open" and u.ended_at < clip.pause[1] for u in heard)


def _hangover_cut_off(clip: Clip, vad: VadConfig) -> bool:
    """Today's behaviour (no turn model, fixed hangover): no ASR needed to know."""
    assert clip.pause is not None
    endpointer = create_endpointer(vad)
    for i in range(0, clip.audio.shape[0] - 320 + 1, 320):
        if isinstance(endpointer.push(clip.audio[i : i + 320]), SpeechEnded):
            return (i + 320) / SR < clip.pause[1]
    return False


def section_turn(hear: Hear, vad: VadConfig, limit: int, voices: list[str],
                 noises: list[str]) -> None:
    print("\n| voice | noise | complete questions: end of turn after the voice p50 / p95 ms "
          "| ended by the model | split into 2+ turns | mid-sentence pause 0.5-0.9 s: false "
          "cut-offs (turn model) | false cut-offs (400 ms hangover, today) | paused questions "
          "not cut: end of turn p50 / p95 ms, ended by the model |")
    print("|---|---|---|---|---|---|---|---|")
    totals = [0, 0, 0]
    for voice in voices:
        for noise in noises:
            complete = [sentence_clip(q, voice, noise) for q in COMPLETE_QUESTIONS[:limit]]
            delays, by_model, split = [], 0, 0
            for clip in complete:
                heard = [u for u in hear(clip) if u.reason != "open"]
                split += len(heard) > 1
                if heard:
                    delays.append(heard[-1].ended_at - clip.voice_end)
                    by_model += heard[-1].reason == "complete"
            paused = [paused_clip(k, voice, noise) for k in range(min(limit, len(PAUSE_QUESTIONS)))]
            cuts, paused_delays, paused_by_model = [], [], 0
            for clip in paused:
                heard = hear(clip)
                if _cut_off(clip, heard):
                    cuts.append(clip)
                    checks = [(round(p.probability or 0, 2), p.text) for p in heard[0].pauses]
                    print(f"#   cut off: {voice}-{noise} {clip.text!r}: {checks}", file=sys.stderr)
                elif ended_ := [u for u in heard if u.reason != "open"]:
                    paused_delays.append(ended_[-1].ended_at - clip.voice_end)
                    paused_by_model += ended_[-1].reason == "complete"
            today = sum(_hangover_cut_off(c, vad) for c in paused)
            totals = [totals[0] + len(cuts), totals[1] + today, totals[2] + len(paused)]
            print(f"| {voice} | {noise} | {ms(delays)} | {by_model}/{len(complete)} | "
                  f"{split}/{len(complete)} | {len(cuts)}/{len(paused)} | "
                  f"{today}/{len(paused)} | {ms(paused_delays)}, "
                  f"{paused_by_model}/{len(paused_delays)} |")
    print(f"\nFalse cut-offs overall: {totals[0]}/{totals[2]} "
          f"({totals[0] / max(totals[2], 1) * 100:.0f}%) with the turn model, "
          f"{totals[1]}/{totals[2]} ({totals[1] / max(totals[2], 1) * 100:.0f}%) today.")


def _session(clips: list[Clip], hear: Callable[[Clip, SpeakerPauses | None],
             list[HeardUtterance]], speaker: SpeakerPauses | None, turn: TurnConfig,
             first_turns: bool = False) -> list[tuple[Clip, list[HeardUtterance]]]:
    """`clips` heard in order by one speaker record (None: not learnt); `first_turns`: each
    by a new record instead (every clip a session's first turn)."""
    if first_turns:
        return [(clip, hear(clip, speaker_pauses(turn))) for clip in clips]
    return [(clip, hear(clip, speaker)) for clip in clips]


SESSION_MODES = ("one limit", "learnt", "first turns")


def section_session(hear: Callable[[Clip, SpeakerPauses | None], list[HeardUtterance]],
                    turn: TurnConfig, limit: int, voices: list[str], noises: list[str]) -> None:
    print("\n| voice | noise | speaker's pauses | complete questions: end of turn p50 / p95 "
          "ms | over 900 ms | misheard (WER > 0): end of turn p50 / max ms | ended by the "
          "speaker's limit | mid-sentence pause 0.5-0.9 s: false cut-offs |")
    print("|---|---|---|---|---|---|---|---|")
    cut_total = dict.fromkeys(SESSION_MODES, 0)
    for voice in voices:
        for noise in noises:
            complete = [sentence_clip(q, voice, noise) for q in COMPLETE_QUESTIONS[:limit]]
            paused = [paused_clip(k, voice, noise)  # (cut at a word gap: piper, espeak-ng)
                      for k in range(min(limit, len(PAUSE_QUESTIONS)))
                      if _engine(voice)[0] != "kokoro"]
            for mode in SESSION_MODES:
                speaker = speaker_pauses(turn) if mode == "learnt" else None
                first = mode == "first turns"
                heard = _session(complete, hear, speaker, turn, first)
                delays, misheard, by_speaker = [], [], 0
                for clip, utterances in heard:
                    ended = [u for u in utterances if u.reason != "open"]
                    if not ended:
                        continue
                    delay = ended[-1].ended_at - clip.voice_end
                    delays.append(delay)
                    by_speaker += ended[-1].by_speaker_limit
                    text = " ".join(u.text for u in utterances)
                    if word_error_rate([clip.text], [text]) > 0:
                        misheard.append(delay)
                cuts = 0
                for clip, utterances in _session(paused, hear, speaker, turn, first):
                    if _cut_off(clip, utterances):
                        cuts += 1
                        print(f"#   cut off ({mode}): {voice}-{noise} {clip.text!r}: "
                              f"{[u.text for u in utterances]}", file=sys.stderr)
                cut_total[mode] += cuts
                over = sum(d > 0.9 for d in delays)
                slow = (f"{pct(misheard, 0.5) * 1000:.0f} / {max(misheard) * 1000:.0f} "
                        f"({len(misheard)})" if misheard else "none")
                print(f"| {voice} | {noise} | {mode} | {ms(delays)} | {over}/{len(delays)} | "
                      f"{slow} | {by_speaker} | {cuts}/{len(paused)} |")
    print("\nFalse cut-offs overall: " + ", ".join(f"{m} {n}" for m, n in cut_total.items())
          + f" (floor {turn.speaker_floor_ms} ms, ceiling {turn.max_silence_ms} ms).")


def section_realtime(asr: StreamingASR, vad: VadConfig, turn: TurnConfig,
                     model: TurnModel | None, limit: int) -> None:
    from asr_realtime import play_all

    clips = [sentence_clip(q, "piper", "clean") for q in COMPLETE_QUESTIONS[:limit]]
    load = os.getloadavg()[0]
    rows = asyncio.run(play_all(clips, asr, vad, turn, model))
    after_endpoint = [r.final - r.endpoint for r in rows]
    endpoint = [r.endpoint - r.voice_end for r in rows]
    final = [r.final - r.voice_end for r in rows]
    print(f"\n1-min load average {load:.1f} before, {os.getloadavg()[0]:.1f} after "
          f"({len(rows)}/{len(clips)} utterances heard, piper, clean)\n")
    print("| measure (wall clock) | p50 / p95 ms |")
    print("|---|---|")
    print(f"| final transcript after the endpoint | {ms(after_endpoint)} |")
    print(f"| endpoint after the true end of the voice | {ms(endpoint)} |")
    print(f"| final transcript after the true end of the voice | {ms(final)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sections", default="wer,turn,realtime")
    parser.add_argument("--model", default="base", help="base | tiny.en | a directory")
    parser.add_argument("--second", default="none",
                        help="[asr] second_model: the second opinion on unsure finals (base, "
                        "tiny.en; none)")
    parser.add_argument("--turn", default=TurnConfig.model, help="smart-turn-v3.2 | none")
    parser.add_argument("--turn-runtime", default=TurnConfig.runtime,
                        help="turn.runtime: onnxruntime | torch (the same weights, float32)")
    parser.add_argument("--turn-device", default=TurnConfig.device, help="turn.device (torch)")
    parser.add_argument("--text-check", default="on", choices=("on", "off"))
    parser.add_argument("--check-ahead", default="on", choices=("on", "off"),
                        help="turn.check_ahead: ask the turn model with the early decode")
    parser.add_argument("--pause-ms", type=int, default=VadConfig.pause_ms)
    parser.add_argument("--decode-ahead-ms", type=int, default=VadConfig.decode_ahead_ms,
                        help="vad.decode_ahead_ms (0 = the pause decode at the pause)")
    parser.add_argument("--patience-ms", type=int, default=TurnConfig.patience_ms,
                        help="turn.patience_ms (0 = the old cliff at the thresholds)")
    parser.add_argument("--sentence-end-span", type=float, default=TurnConfig.sentence_end_span,
                        help="turn.sentence_end_span")
    parser.add_argument("--early-end-confidence", type=float,
                        default=TurnConfig.early_end_confidence,
                        help="turn.early_end_confidence (0 = never before the pause)")
    parser.add_argument("--recheck-ms", type=int, default=TurnConfig.recheck_ms,
                        help="turn.recheck_ms (0 = the turn model asked once per pause)")
    parser.add_argument("--speaker-floor-ms", type=int, default=TurnConfig.speaker_floor_ms,
                        help="turn.speaker_floor_ms (0 = one long limit for every speaker)")
    parser.add_argument("--limit", type=int, default=20, help="clips per condition")
    parser.add_argument("--prompt", default=None, help="[asr] prompt (Whisper's initial prompt)")
    parser.add_argument("--noise-suppression", type=int, default=AsrConfig.noise_suppression,
                        help="[asr] noise_suppression (0 = off, WebRTC's level 1-4)")
    parser.add_argument("--voices", default=",".join(VOICES),
                        help="piper, espeak, kokoro:NAME (comma-separated)")
    parser.add_argument("--snrs", default="15", help="noisy conditions: SNR dB, comma-separated")
    parser.add_argument("--runtime", default="ctranslate2",
                        help="[asr] runtime: ctranslate2 | torch (config/gpu.toml's)")
    parser.add_argument("--device", default="cpu", help="[asr] device: cpu | cuda | auto")
    args = parser.parse_args()

    asr = create_asr(AsrConfig(model=args.model, prompt=args.prompt, second_model=args.second,
                               noise_suppression=args.noise_suppression, runtime=args.runtime,
                               device=args.device))
    turn = TurnConfig(model=args.turn, text_check=args.text_check == "on",
                      check_ahead=args.check_ahead == "on", patience_ms=args.patience_ms,
                      recheck_ms=args.recheck_ms, sentence_end_span=args.sentence_end_span,
                      early_end_confidence=args.early_end_confidence,
                      speaker_floor_ms=args.speaker_floor_ms,
                      runtime=args.turn_runtime, device=args.turn_device)
    model = load_turn_model(turn)
    vad = VadConfig(pause_ms=args.pause_ms, decode_ahead_ms=args.decode_ahead_ms)

    def hear(clip: Clip) -> list[HeardUtterance]:
        return listen(clip.audio, asr, vad=vad, turn=turn, turn_model=model)

    def hear_as(clip: Clip, speaker: SpeakerPauses | None) -> list[HeardUtterance]:
        learnt = turn if speaker is not None else dataclasses.replace(turn, speaker_floor_ms=0)
        return listen(clip.audio, asr, vad=vad, turn=learnt, turn_model=model, speaker=speaker)

    sections = args.sections.split(",")
    print(f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores; "
          f"Whisper {args.model} "
          f"{'int8 (2 threads' if args.runtime == 'ctranslate2' else f'torch ({args.device}'}"
          f", beam 1; second opinion {args.second}; noise "
          f"suppression {args.noise_suppression}), "
          f"turn {args.turn} "
          f"({args.turn_runtime} on {args.turn_device}; text check "
          f"{args.text_check}, asked ahead {args.check_ahead}, patience {args.patience_ms} "
          f"ms over a sentence-end span of {args.sentence_end_span}, asked again "
          f"{args.recheck_ms} ms after the pause, early end at {args.early_end_confidence}), "
          f"pause {args.pause_ms} ms "
          f"(decoded from {args.decode_ahead_ms} ms), "
          f"long limit {turn.max_silence_ms} ms; "
          f"1-min load average {os.getloadavg()[0]:.1f}")
    print(f"Command: `.venv/bin/python bench/asr.py {' '.join(sys.argv[1:])}`")
    voices = args.voices.split(",")
    noises = ["clean", *(f"{float(db):g} dB" for db in args.snrs.split(",") if db)]
    if "wer" in sections:
        section_wer(hear, args.limit, voices, noises)
    if "turn" in sections:
        section_turn(hear, vad, args.limit, voices, noises)
    if "session" in sections:
        section_session(hear_as, turn, args.limit, voices, noises)
    if "realtime" in sections:
        section_realtime(asr, vad, turn, model, args.limit)


if __name__ == "__main__":
    main()

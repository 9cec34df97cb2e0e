"""Voice-to-voice latency through the real WebRTC path, on the embedded defaults.

The server runs as its own process (`python -m rtc_server --mode agent`, as deployed); for
each of N generated questions (piper voice) a loopback aiortc peer in this process connects
over 127.0.0.1, says the question through its microphone, and measures what it receives:
- voice-to-voice: end of the peer's speech -> first agent audio received (aiortc's receiver
  jitter-buffer hold of 80 ms is subtracted, as a browser's playout would start then);
- the per-stage breakdown from the turn's `timings` event (ms after the endpoint fired);
- stall: silence inside an answer where its next chunk was not ready yet (the turn's
  `stall_ms`, reported once the whole answer has played);
- A/V skew: the lag that best aligns the mouth opening seen in the received video with the
  received audio envelope, per answer.
- hearing: the end of turn (the endpoint after the end of the voice, from `timings`) and,
  with `--set paused`, questions with a 0.5-0.9 s pause in mid-sentence
  (`testkit/pauses.py`): a false cut-off is a final transcript that reaches the peer
  before it has said the rest of its question.
Prints p50/p95 tables (markdown) over the questions. Each question is a session of its own
(nothing learnt of the speaker), or with `--one-session` all are asked in one session, each
once the answer before has played, as a user talks: the speaker's pauses learnt over the
session (`[turn] speaker_floor_ms`) then apply, and the conversation's history grows.

    unshare -n sh -c 'ip link set lo up && \
        exec .venv/bin/python bench/voice_to_voice.py [--questions 20] [--set paused]'

Options that override one server setting for an A/B run: --llm-threads, --llm-batch-threads,
--first-chunk-max-chars, --warm-llm, --decode-ahead-ms, --partial-interval-s, --lead-ms,
--check-ahead, --runway-ms, --pause-ms, --recheck-ms, --text-end-threshold,
--noise-suppression. `--language zh`
runs the Chinese conversation (`[conversation] language = "zh"`) on Mandarin questions spoken
by a Kokoro voice (`testkit.sentences`).

Other questions and voices (what no option was tuned on): `--questions-file
bench/questions_heldout.txt` (one a line), `--voice kokoro:am_michael` (a testkit.speech
engine and voice; the speech is cached under the engine cache's `test-speech/`, so a machine
without that engine can be handed the cached files).

ICE host candidates are restricted to 127.0.0.1 (agent_config sets ice.loopback_only).

GPU mode (the H200 machine, README "GPU"): `--config config/gpu.toml` starts the server on
that profile (the benchmark's keys over it), `--llm-model DIR` names the Hugging Face model
(random weights there, bench/gpu_llm.py; or the bundled GGUF carried as gpu_stage.py's `qwen`
extra, the real weights), `--forced-answers bench/gpu_answers.json` turns on
timing-equivalent decoding (`[llm] forced_answers`: the model runs every step, the written
answer is what is said; the table says so), `--asr-model base` skips the choice of Whisper.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import platform
import sys
import time
import zlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast, get_args

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.server_process import (  # noqa: E402
    Table,
    add_profile_options,
    agent_toml,
    profile_keys,
    running_server,
)
from bench.slow_machine import SlowMachine, add_options, modes  # noqa: E402
from bench.stats import pct, publish  # noqa: E402
from bench.turn_marks import Row, mark_rows  # noqa: E402
from common.logs import setup_logging  # noqa: E402
from engines.asr.text import word_error_rate  # noqa: E402
from engines.turn.config import TurnConfig  # noqa: E402
from media.idle import default_portrait  # noqa: E402
from rtc_server.app import build_renderer  # noqa: E402
from rtc_server.ice import restrict_host_candidates_to_loopback  # noqa: E402
from testkit.agent import (  # noqa: E402
    MouthMeter,
    agent_config,
    audio_timeline,
    best_lag,
    video_timeline,
)
from testkit.marks import (  # noqa: E402
    SLOW_END_MS,
    end_bound,
    end_of_turn_ms,
    hearing_note,
    slow_ends,
)
from testkit.pauses import (  # noqa: E402
    COMPLETE_QUESTIONS,
    PAUSE_QUESTIONS,
    PausedSpeech,
    paused_question,
)
from testkit.peer import LoopbackPeer, PcmMicrophone  # noqa: E402
from testkit.sentences import ZH_QUESTIONS  # noqa: E402
from testkit.speech import Engine, add_noise, synth, voiced_bounds  # noqa: E402

QUESTIONS = COMPLETE_QUESTIONS
LEAD_S = 0.6
QUIET_RMS = 150.0
Result = dict[str, Any]  # one question's raw record, as written to --json
Voice = tuple[Engine, str | None]  # the asking voice: testkit.speech engine, its voice


def parse_voice(text: str) -> Voice:
    """"piper", "kokoro:am_michael", "espeak:en-us" -> (engine, voice or None)."""
    engine, _, name = text.partition(":")
    if engine not in get_args(Engine):
        raise argparse.ArgumentTypeError(f"unknown engine {engine!r}; one of {get_args(Engine)}")
    return cast(Engine, engine), name or None


def read_questions(path: str) -> list[str]:
    """One question a line; blank lines and lines starting with # are skipped."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    questions = [q.strip() for q in lines if q.strip() and not q.lstrip().startswith("#")]
    if not questions:
        raise SystemExit(f"{path}: no questions")
    return questions


def question_audio(
    question: str | PausedSpeech, voice: Voice = ("piper", None), noise_db: float | None = None
) -> tuple[np.ndarray, float | None]:
    """The microphone's PCM (lead silence first) and, for a paused question, when (s into the
    PCM) the rest of it begins. `voice`: (testkit.speech engine, its voice) for English;
    `noise_db`: white noise at that SNR over the whole microphone, lead included (the seed
    from the question, so every run and arm hears the same noise)."""
    lead = np.zeros(int(16000 * LEAD_S), np.int16)
    if isinstance(question, PausedSpeech):
        pcm, resume = np.concatenate([lead, question.pcm]), LEAD_S + question.pause_end
    else:
        zh = any("\u4e00" <= ch <= "\u9fff" for ch in question)
        engine, name = ("kokoro", "zm_yunxi") if zh else voice
        speech = synth(question, engine, voice=name)
        first, last = voiced_bounds(speech)
        pcm, resume = np.concatenate([lead, speech[first:last]]), None
    if noise_db is not None:
        text = question if isinstance(question, str) else question.text
        pcm = add_noise(pcm, noise_db, seed=zlib.crc32(text.encode()))
    return pcm, resume


async def one_question(
    url: str, question: str | PausedSpeech, meter: MouthMeter, voice: Voice = ("piper", None),
    noise_db: float | None = None,
) -> Result:
    """A session of its own for this question (nothing learnt of the speaker)."""
    return (await one_session(url, [question], meter, voice, noise_db))[0]


async def one_session(
    url: str, questions: list[str | PausedSpeech], meter: MouthMeter,
    voice: Voice = ("piper", None), noise_db: float | None = None,
    done: Callable[[int, Result], None] | None = None,
) -> list[Result]:
    """All `questions` in one session, each asked once the answer before has played (as a
    user talks to the agent: the speaker's pauses learnt over the session apply,
    engines/turn/speaker.py, and the conversation's history grows)."""
    mic = PcmMicrophone(None, 16000)
    peer = LoopbackPeer(url, microphone=mic, video_summary=meter)
    await peer.connect()
    results: list[Result] = []
    try:
        for i, question in enumerate(questions):
            results.append(await ask(peer, mic, question, voice, noise_db))
            if done is not None:
                done(i, results[-1])
    finally:
        await peer.close()
    return results


async def ask(
    peer: LoopbackPeer, mic: PcmMicrophone, question: str | PausedSpeech,
    voice: Voice = ("piper", None), noise_db: float | None = None,
) -> Result:
    """Say `question` through the peer's microphone and measure its answer (the turns before
    it in this session left out)."""
    pcm, resume_s = question_audio(question, voice, noise_db)
    before = max((int(e["turn_id"]) for e in peer.received.events_of("timings")), default=0)
    mic.set_audio(pcm, 16000)
    await asyncio.wait_for(mic.playing.wait(), 10)
    assert mic.started_at is not None
    asked_at = mic.started_at
    speech_end = asked_at + len(pcm) / 16000
    first = await peer.wait_event(
        lambda e: e["type"] == "timings" and e["turn_id"] > before
        and "first_audio_sent" in e["marks_ms"], 60
    )
    turn_id = first["turn_id"]
    await asyncio.sleep(3.0)  # some answer audio and video for the A/V skew
    with contextlib.suppress(TimeoutError):  # complete once the whole answer has played
        await peer.wait_event(lambda e: e["type"] == "timings" and e["turn_id"] == turn_id
                              and e.get("stall_ms") is not None, 60)
    final = [e for e in peer.received.events_of("timings") if e["turn_id"] == turn_id]
    a_t, rms = audio_timeline(peer.received)
    loud = np.flatnonzero((rms > QUIET_RMS) & (a_t > speech_end))
    v2v = float(a_t[loud[0]] - speech_end) if len(loud) else float("nan")
    v_t, mouth = video_timeline(peer.received, 25)
    window_a = a_t > a_t[loud[0]] - 0.5 if len(loud) else a_t > asked_at
    window_v = v_t > a_t[loud[0]] - 0.5 if len(loud) else v_t > asked_at
    lag, corr = best_lag(a_t[window_a], rms[window_a], v_t[window_v], mouth[window_v])
    gap_s = longest_gap(a_t, rms > QUIET_RMS, speech_end)
    finals = [(e, t) for e, t in zip(peer.received.events, peer.received.event_arrival,
                                     strict=True)
              if e.get("type") == "transcript" and e["final"] and t >= asked_at]
    transcript = [e["text"] for e, _ in finals]
    cut_off = resume_s is not None and any(t < asked_at + resume_s for _, t in finals)
    arrivals = np.array(peer.received.video_arrival)
    arrivals = arrivals[arrivals >= asked_at]
    steady = arrivals[arrivals > arrivals[0] + 0.5] if len(arrivals) else arrivals
    fps = (len(steady) - 1) / (steady[-1] - steady[0]) if len(steady) > 1 else float("nan")
    # worst one-second window while listening, thinking and speaking
    windows = [np.sum((steady >= t) & (steady < t + 1.0))
               for t in (steady[steady < steady[-1] - 1] if len(steady) else steady)]
    return {
        "question": question if isinstance(question, str) else question.text,
        "heard": " / ".join(transcript), "cut_off": cut_off,
        "said": [e["text"] for e in peer.received.events_of("agent_text")
                 if e["turn_id"] == turn_id and e["text"]],
        "v2v_s": v2v, "marks_ms": final[-1]["marks_ms"], "stall_ms": final[-1].get("stall_ms"),
        "evidence": final[-1].get("evidence", {}),
        "av_lag_s": lag, "av_corr": corr, "longest_gap_s": gap_s,
        "fps": fps, "fps_worst_1s": float(min(windows)) if windows else float("nan"),
    }


def longest_gap(times: np.ndarray, loud: np.ndarray, after: float) -> float:
    """The longest silence (s) inside the answer as the client received it: between its
    first and last sounding 20 ms frames after `after` (NaN: no answer heard)."""
    frames = np.flatnonzero(loud & (times > after))
    if len(frames) < 2:
        return float("nan")
    quiet = np.diff(times[frames]) - (times[1] - times[0] if len(times) > 1 else 0.02)
    return float(max(0.0, quiet.max()))


async def run(
    n: int, port: int, paused: bool, agent: Table, llm: Table, vad: Table, asr: Table,
    turn: Table, profile: Table, slow: SlowMachine | None, language: str = "en",
    base: Path | None = None, asked: list[str] | None = None, voice: Voice = ("piper", None),
    noise_db: float | None = None, session: bool = False,
) -> list[Result]:
    config = agent_toml(port, agent, {"seed": 1234, "temperature": 0.0, **llm}, vad, asr, turn,
                        profile, base)
    config += f'[conversation]\nlanguage = "{language}"\n'
    async with running_server(config, slow):
        return await ask_all(n, f"http://127.0.0.1:{port}", paused, language, asked, voice,
                             noise_db, session)


async def ask_all(
    n: int, url: str, paused: bool, language: str = "en", asked: list[str] | None = None,
    voice: Voice = ("piper", None), noise_db: float | None = None, session: bool = False,
) -> list[Result]:
    """`asked`: the questions (default: the language's set), repeated to make `n`;
    `session`: all of them in one session (`one_session`), else a session each."""
    restrict_host_candidates_to_loopback()  # the peer in this process: 127.0.0.1 only
    config = agent_config()
    meter = MouthMeter(build_renderer(default_portrait(), config).landmarks)
    # one warm-up turn (first-call costs of every model), not counted, in a session of its
    # own (nothing learnt of the speaker before the first question)
    await one_question(url, "你好，最近怎么样？" if language == "zh" else "Hello, how are you?",
                       meter, voice)
    asked = asked or list(ZH_QUESTIONS if language == "zh" else QUESTIONS)
    questions: list[str | PausedSpeech] = list((asked * (n // len(asked) + 1))[:n])
    if paused:
        questions = [paused_question(*PAUSE_QUESTIONS[k % len(PAUSE_QUESTIONS)],
                                     0.5 + 0.1 * (k % 5)) for k in range(n)]
    started = time.perf_counter()

    def done(i: int, result: Result) -> None:
        nonlocal started
        logging.getLogger("bench").info(
            "%d/%d %.2f s voice-to-voice (%.0f s) %r -> %r%s; %s", i + 1, n,
            result["v2v_s"], time.perf_counter() - started, result["question"],
            result["heard"], " CUT OFF" if result["cut_off"] else "",
            hearing_note(result["marks_ms"], result["evidence"]),
        )
        started = time.perf_counter()

    if session:
        return await one_session(url, questions, meter, voice, noise_db, done)
    results = []
    for i, question in enumerate(questions):
        results.append(await one_question(url, question, meter, voice, noise_db))
        done(i, results[-1])
    return results


# Options that override one server setting for an A/B run: flag, "section.key", type, note.
OVERRIDES: tuple[tuple[str, str, type, str], ...] = (
    ("--llm-threads", "llm.threads", int, "decode"),
    ("--llm-batch-threads", "llm.batch_threads", int, "prompt"),
    ("--burst-tokens", "llm.burst_tokens", int, "0 = off"),
    ("--first-chunk-max-chars", "agent.first_chunk_max_chars", int, ""),
    ("--warm-llm", "agent.warm_llm", bool, "default: the server's, true"),
    ("--lead-ms", "agent.lead_ms", int, ""),
    ("--runway-ms", "agent.runway_ms", int, "0 = off"),
    ("--start-on-early-decode", "agent.start_on_early_decode", bool, ""),
    ("--decode-ahead-ms", "vad.decode_ahead_ms", int, ""),
    ("--pause-ms", "vad.pause_ms", int, "when the turn model is asked"),
    ("--partial-interval-s", "asr.partial_interval_s", float, ""),
    ("--asr-threads", "asr.cpu_threads", int, ""),
    ("--asr-second", "asr.second_model", str, "base, tiny.en or none; default: the profile's"),
    ("--asr-cuda-graphs", "asr.cuda_graphs", bool, ""),
    ("--noise-suppression", "asr.noise_suppression", int, "0 = off; WebRTC's level 1-4"),
    ("--check-ahead", "turn.check_ahead", bool, ""),
    ("--patience-ms", "turn.patience_ms", int, ""),
    ("--recheck-ms", "turn.recheck_ms", int, "0 = off"),
    ("--text-end-threshold", "turn.text_end_threshold", float, "0 = off; the text-end probe"),
    ("--early-end-confidence", "turn.early_end_confidence", float, "0 = off"),
)


def _dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def add_overrides(parser: argparse.ArgumentParser) -> None:
    for flag, key, kind, note in OVERRIDES:
        parser.add_argument(flag, type=str if kind is bool else kind,
                            choices=("true", "false") if kind is bool else None,
                            help=f"{key} ({note})" if note else key)


def overrides(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """The settings the override options give, per config section."""
    sections: dict[str, dict[str, Any]] = {s: {} for s in ("llm", "agent", "vad", "asr", "turn")}
    for flag, key, kind, _ in OVERRIDES:
        value = getattr(args, _dest(flag))
        if value is not None:
            section, name = key.split(".")
            sections[section][name] = value == "true" if kind is bool else value
    return sections


def _options(args: argparse.Namespace) -> str:
    """The command's other options, as given (so a table says what it measured)."""
    given = {flag: getattr(args, _dest(flag)) for flag, *_ in OVERRIDES} | {
        "--profile": args.profile, "--modes": args.modes,
        "--slow-cores": args.slow_cores if "slow" in args.modes else None,
        "--language": args.language, "--config": args.config, "--llm-model": args.llm_model,
        "--forced-answers": args.forced_answers, "--asr-model": args.asr_model,
        "--voice": args.voice and ":".join(p for p in args.voice if p),
        "--noise": args.noise,
        "--questions-file": args.questions_file,
        "--one-session": "" if args.one_session else None}
    return "".join(f" {flag} {value}" for flag, value in given.items() if value is not None)


def _heard(result: Result) -> str:
    """The question's final transcripts as one text (a question heard as two turns joined)."""
    return str(result["heard"]).replace(" / ", " ")


def rows(
    results: list[Result], max_silence_ms: int, paused: bool
) -> tuple[list[Row], list[str]]:
    """The table's rows for one run, and its notes."""
    v2v = [float(r["v2v_s"]) * 1000 for r in results if np.isfinite(float(r["v2v_s"]))]
    lags = [abs(float(r["av_lag_s"])) * 1000 for r in results]
    out: list[Row] = [("voice-to-voice (end of peer speech -> first agent audio received), ms",
                       f"{pct(v2v, 0.5):.0f}", f"{pct(v2v, 0.95):.0f}")]
    marks = [r["marks_ms"] for r in results]
    eot = end_of_turn_ms(marks)
    out += mark_rows(marks)
    gaps = [float(r["longest_gap_s"]) * 1000 for r in results
            if np.isfinite(float(r.get("longest_gap_s", float("nan"))))]
    if gaps:
        out.append(("longest silence inside an answer (client audio), ms",
                    f"{pct(gaps, 0.5):.0f}", f"{pct(gaps, 0.95):.0f}"))
    stalls = [float(r["stall_ms"]) for r in results if r.get("stall_ms") is not None]
    if stalls:
        out.append(("stall (the voice ran dry between chunks, server), ms per answer",
                    f"{pct(stalls, 0.5):.0f}", f"{pct(stalls, 0.95):.0f}"))
    out.append(("A/V skew (best mouth/voice lag), ms", f"{pct(lags, 0.5):.0f}",
                f"{pct(lags, 0.95):.0f}"))
    corr = [float(r["av_corr"]) for r in results]
    out.append(("mouth/voice correlation at best lag", f"{pct(corr, 0.5):.2f}",
                f"{pct(corr, 0.05):.2f} (p5)"))
    fps = [float(r["fps"]) for r in results]
    worst = [float(r["fps_worst_1s"]) for r in results]
    out.append(("received video fps (whole exchange)", f"{pct(fps, 0.5):.1f}",
                f"{pct(fps, 0.05):.1f} (p5)"))
    out.append(("received video fps, worst 1 s window", f"{pct(worst, 0.5):.0f}",
                f"{pct(worst, 0.05):.0f} (p5)"))
    wer = word_error_rate([r["question"] for r in results], [_heard(r) for r in results])
    out.append(("WER of the final transcripts (heard against said), all turns", f"{wer:.3f}",
                ""))
    at_limit = sum(e >= max_silence_ms - 20 for e in eot)
    notes = [f"{len(v2v)}/{len(results)} answers heard; {sum(s > 0 for s in stalls)}/"
             f"{len(stalls)} played to the end had a stall; {at_limit}/{len(eot)} turns ended "
             f"only at max_silence_ms ({max_silence_ms}); longest silence inside an answer "
             f"over 700 ms in {sum(g > 700 for g in gaps)}/{len(gaps)}; end of turn, ms: "
             + " ".join(f"{e:.0f}" for e in sorted(eot))]
    misheard = [-float(r["marks_ms"]["voice_end"]) for r in results
                if "voice_end" in r["marks_ms"]
                and word_error_rate([r["question"]], [_heard(r)]) > 0]
    if misheard:
        notes.append(f"End of turn of the {len(misheard)} misheard turns, ms: "
                     + " ".join(f"{e:.0f}" for e in sorted(misheard)) + ".")
    bound = Counter(end_bound(r["marks_ms"]) for r in results if "voice_end" in r["marks_ms"])
    notes.append("The end of turn waited last for: " + ", ".join(
        f"{name} {n}" for name, n in bound.most_common()) + " (turn_asked: the silence the "
        "verdict asked for; pause_text / turn_model: that evidence; limit: max_silence_ms).")
    slow = slow_ends(results)
    if slow:
        notes.append(f"Ended over {SLOW_END_MS} ms after the voice: " + "; ".join(
            f"{r['heard'] or r['question']!r} "
            f"{hearing_note(r['marks_ms'], r.get('evidence', {}))}" for r in slow) + ".")
    if paused:
        cuts = sum(bool(r["cut_off"]) for r in results)
        notes.append(f"False cut-offs (a final transcript before the rest of the question): "
                     f"{cuts}/{len(results)}.")
    return out, notes


def report(runs: dict[str, list[Result]], args: argparse.Namespace) -> str:
    """Markdown: one column pair per machine mode, side by side."""
    lines = [
        f"{time.strftime('%Y-%m-%d')}, {platform.machine()} {args.machine}, "
        f"`unshare -n sh -c 'ip link set lo up && exec .venv/bin/python bench/voice_to_voice.py "
        f"--questions {args.questions} --set {args.set}{_options(args)}'`",
        "",
    ]
    tables = {mode: rows(results, args.max_silence_ms, args.set == "paused")
              for mode, results in runs.items()}
    header = " | ".join(f"{mode} p50 | {mode} p95" for mode in tables)
    lines += [f"| metric | {header} |", "|---" * (1 + 2 * len(tables)) + "|"]
    first = next(iter(tables.values()))[0]
    for i, (metric, _, _) in enumerate(first):
        cells = " | ".join(f"{t[0][i][1]} | {t[0][i][2]}" for t in tables.values())
        lines.append(f"| {metric} | {cells} |")
    for mode, (_, notes) in tables.items():
        lines += ["", f"{mode}: " + " ".join(notes)]
    if args.forced_answers:
        lines += ["", "LLM: random weights, timing-equivalent decoding (every step runs the "
                  f"model; the words said are {args.forced_answers}'s)."]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--set", choices=("complete", "paused"), default="complete",
                        help="complete questions, or questions with a mid-sentence pause")
    parser.add_argument("--machine", default=f"{os.cpu_count()}-core CPU")
    parser.add_argument("--json", help="also write the raw results here")
    parser.add_argument("--port", type=int, default=8765)
    add_overrides(parser)
    parser.add_argument("--voice", type=parse_voice, default=None,
                        help="the asking voice, ENGINE[:VOICE] (default piper; e.g. "
                        "kokoro:am_michael)")
    parser.add_argument("--noise", type=float, default=None, metavar="SNR_DB",
                        help="white noise at this SNR over the microphone (e.g. 15)")
    parser.add_argument("--questions-file",
                        help="the questions, one a line (default: testkit.pauses' complete set)")
    parser.add_argument("--one-session", action="store_true",
                        help="all questions in one session, each once the answer before has "
                        "played (the speaker's learnt pauses apply); default: a session each")
    add_profile_options(parser, "llm.model (e.g. a Hugging Face directory)")
    add_options(parser)
    parser.add_argument("--language", choices=("en", "zh"), default=None,
                        help="conversation.language (zh: Mandarin questions, Kokoro voice)")
    args = parser.parse_args()
    args.max_silence_ms = TurnConfig().max_silence_ms
    setup_logging("INFO")
    over = overrides(args)
    llm_profile, asr_profile = profile_keys(args)
    llm, agent, turn = over["llm"] | llm_profile, over["agent"], over["turn"]
    voice: Voice = args.voice or ("piper", None)
    asked = read_questions(args.questions_file) if args.questions_file else None
    profile = {} if args.profile is None else {"mode": args.profile}
    vad, asr = over["vad"], over["asr"] | asr_profile
    runs: dict[str, list[Result]] = {}
    for mode, slow in modes(parser, args):
        if slow is not None:
            logging.getLogger("bench").info("%s", slow.label())
        runs[mode] = asyncio.run(run(args.questions, args.port, args.set == "paused", agent,
                                     llm, vad, asr, turn, profile, slow,
                                     args.language or "en", args.config, asked, voice,
                                     args.noise, args.one_session))
    return publish(report(runs, args), [r for rs in runs.values() for r in rs], args.json)


if __name__ == "__main__":
    sys.exit(main())

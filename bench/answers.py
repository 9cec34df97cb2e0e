"""Benchmark: how good and how fast the default LLM's answers are, per kind of question.

Each question has an accept rule (any of several patterns; for questions the facts do not
cover: no figure that is not in the facts, and a "don't know / next step" answer). Categories:
general knowledge (companion persona, no facts), bank questions the facts file answers, bank
questions it does not, tutor questions (course facts and physics), follow-ups that need the
history, and Chinese. Every conversation starts fresh, as a new session would, with the
persona and facts already in the KV cache (loaded and warmed once per persona).

Prints accuracy per category, the rate of invented figures on the not-covered questions, the
first speakable chunk (the agent's clause chunker, first chunk cut past 20 characters) p50/p95
and decode tokens/s, then every answer that failed its rule.

    .venv/bin/python bench/answers.py [--model qwen2.5-coder-1.5b] [--threads 1] [--runs 1]
        [--knowledge-bank FILE] [--knowledge-tutor FILE] [--personas bank ...] [--show] [--raw]
        [--max-sentences 3] [--profile auto|quality|fast] [--modes as-is,slow] [--language zh]
        [--questions-file bench/answers_heldout.toml]
        [--voices kokoro:bf_isabella,espeak:en-us+f3 [--noises clean,15] [--asr-model tiny.en]]

`--profile` asks the server's profile (`rtc_server/profile.py`, the calibration of the machine
this runs on) which model and threads it would use, and benchmarks those; `--modes slow` runs
the same on the emulated slow machine (`bench/slow_machine.py`: the AVX2 llama.cpp build, the
process held to half the CPU), `as-is,slow` both, one report after the other. `--language zh`
asks the Chinese set (`bench/answers_questions.toml`, `zh`) of the Chinese personas and facts;
an answer counts only in Simplified Chinese. `--voices` speaks each question's last turn (the
voices and noises in turn, the Chinese category left out) and asks what the server's Whisper
heard (`bench/asr.py`, offline in audio time: the same on a busy machine): answers right
through the ears.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import platform
import re
import subprocess
import sys
import time
import tomllib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.answers_zh import honest, simplified_only  # noqa: E402
from bench.asr import Ears  # noqa: E402
from bench.slow_machine import SlowMachine  # noqa: E402
from bench.stats import pct  # noqa: E402
from engines.asr.text import word_error_rate  # noqa: E402
from engines.llm import ChatLLM, ChatMessage, LLMConfig, build_engine, create_llm  # noqa: E402
from engines.llm.grounding import figures  # noqa: E402
from engines.llm.personas import example_knowledge  # noqa: E402
from engines.voicing import SpokenChunks  # noqa: E402
from rtc_server.config import AgentConfig  # noqa: E402

DONT_KNOW = (
    r"don'?t have|do not have|not sure|don'?t know|do not know|no information|not able to|"
    r"unable to|can'?t (?:see|access|tell|check|provide)|cannot (?:see|access|tell|check|provide)|"
    r"colleague|help section|customer (?:service|support|line)|contact|teacher|course page|"
    r"not (?:covered|available|listed|in (?:the|my))"
)


@dataclass(frozen=True)
class Question:
    category: str
    persona: str
    turns: tuple[str, ...]  # earlier user turns (answered by the model), then the question
    accept: tuple[str, ...] = ()  # any of these regexes (case-insensitive) must match
    not_covered: bool = False  # must not invent figures; must say it doesn't know


QUESTIONS_FILE = Path(__file__).resolve().parent / "answers_questions.toml"


def load_questions(language: str, path: Path = QUESTIONS_FILE) -> tuple[Question, ...]:
    """The questions of `language` ("en", "zh") in `path` (`bench/answers_questions.toml`)."""
    with path.open("rb") as f:
        rows = tomllib.load(f)[language]
    return tuple(Question(r["category"], r["persona"], tuple(r["turns"]), tuple(r["accept"]),
                          r.get("not_covered", False)) for r in rows)


QUESTIONS = load_questions("en")


@dataclass
class Result:
    question: Question
    answer: str
    ok: bool
    invented: bool = False
    first_chunk_s: float = math.nan
    tokens_per_s: float = math.nan
    first_token_s: float = math.nan
    capped: bool = False  # ended at max_sentences
    heard: str | None = None  # the question as Whisper heard it (`--voices`)
    asked_back: bool = False  # ... so unsure of it that the agent would ask back instead


async def ask(
    llm: ChatLLM, turns: Sequence[str], max_new_tokens: int, max_sentences: int = 0,
) -> tuple[str, float, float, float, bool]:
    """Answer every turn in order (a fresh conversation); timings of the last answer: first
    speakable chunk, decode rate, first token (s); and whether it was ended at
    `max_sentences` (as the agent ends it, `[agent] max_sentences`)."""
    history: list[ChatMessage] = []
    answer, first, rate, first_token = "", math.nan, math.nan, math.nan
    capped = False
    for turn in turns:
        history.append(ChatMessage("user", turn))
        chunks = SpokenChunks(max_sentences=max_sentences)  # as the agent cuts its answer
        parts: list[str] = []
        t0 = time.perf_counter()
        first = rate = math.nan
        t_first_token: float | None = None
        deltas = 0
        async for delta in llm.stream(history, max_new_tokens=max_new_tokens):
            now = time.perf_counter()
            t_first_token = t_first_token or now
            deltas += 1
            parts.append(delta)
            if chunks.push(delta) and math.isnan(first):
                first = now - t0
            if chunks.done:
                break  # the agent stops the generation there
        capped = chunks.done
        end = time.perf_counter()
        if math.isnan(first):
            first = end - t0
        if t_first_token is not None:
            first_token = t_first_token - t0
            if deltas > 1 and end > t_first_token:
                rate = (deltas - 1) / (end - t_first_token)
        answer = "".join(parts).strip()
        history.append(ChatMessage("assistant", answer))
    return answer, first, rate, first_token, capped


def judge(question: Question, answer: str, facts: str, language: str = "en") -> tuple[bool, bool]:
    """(accepted, invented a figure: one neither the facts nor the questions hold). In
    Chinese, only an answer in Simplified Chinese is accepted."""
    if language == "zh" and not simplified_only(answer):
        return False, False
    if question.not_covered:
        invented = bool(figures(answer) - figures(facts) - figures(" ".join(question.turns)))
        said = honest(answer) if language == "zh" else re.search(DONT_KNOW, answer, re.I)
        return bool(said) and not invented, invented
    ok = any(re.search(p, answer, re.I | re.S) for p in question.accept)
    return ok, False


def profile_choice(args: argparse.Namespace) -> None:
    """Fill `args.model` and `args.threads` with what `--profile` picks on this machine."""
    from rtc_server.config import Config, ProfileConfig
    from rtc_server.profile import fit

    fitted = fit(replace(Config(), profile=ProfileConfig(mode=args.profile)))
    args.model = args.model or fitted.llm_model
    args.asr_model = args.asr_model or fitted.asr_model
    if args.threads is None and fitted.llm_threads is not None:
        args.threads, args.batch_threads, args.burst_tokens = fitted.llm_threads
    print(fitted.describe(), file=sys.stderr)


async def run(args: argparse.Namespace) -> list[Result]:
    knowledge = {"bank": args.knowledge_bank, "tutor": args.knowledge_tutor}
    results: list[Result] = []
    for persona in args.personas:
        config = LLMConfig(
            model=args.model, persona=persona, knowledge=knowledge.get(persona), seed=0,
            threads=args.threads, batch_threads=args.batch_threads,
            burst_tokens=args.burst_tokens, temperature=args.temperature,
            language=args.language,
        )
        path = config.knowledge or example_knowledge(persona, args.language)
        facts = Path(path).read_text() if path else ""  # noqa: ASYNC240 - once, at set-up
        t0 = time.perf_counter()
        # As deployed (the persona's figure check, no holding phrase), or the bare model.
        llm = build_engine(config) if args.raw else create_llm(replace(config, resilient=False))
        print(f"{persona}: loaded in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        ears = Ears(args.asr_model, persona, args.second_asr) if args.voices else None
        try:
            asked = load_questions(args.language, args.questions_file)
            for question in [x for x in asked if x.persona == persona and not (
                    ears and x.category == "chinese")]:
                for _ in range(args.runs):
                    turns, heard, unsure = question.turns, None, False
                    if ears is not None:  # the question spoken: each its voice and noise
                        k = len(results)
                        voice = args.voices[k % len(args.voices)]
                        noise = args.noises[k // len(args.voices) % len(args.noises)]
                        heard, unsure = ears(turns[-1], voice, noise), ears.unsure
                        turns = (*turns[:-1], heard)
                    answer, first, rate, token, capped = await ask(
                        llm, turns, args.max_new_tokens, args.max_sentences
                    )
                    ok, invented = judge(question, answer, facts, args.language)
                    results.append(
                        Result(question, answer, ok, invented, first, rate, token, capped, heard,
                               unsure)
                    )
                    if args.show:
                        mark = "ok " if ok else "BAD"
                        print(f"[{mark}] {turns[-1]} -> {answer}", file=sys.stderr)
        finally:
            llm.close()
    return results


def report(results: list[Result], args: argparse.Namespace) -> None:
    by_cat: dict[str, list[Result]] = defaultdict(list)
    for r in results:
        by_cat[r.question.category].append(r)
    print(f"\n{time.strftime('%Y-%m-%d')}, {platform.machine()}, {args.label}, model "
          f"{args.model or 'qwen2.5-coder-1.5b'}"
          + (f" (profile {args.profile})" if args.profile else "")
          + f", {LLMConfig(threads=args.threads).decode_threads} thread(s), "
          f"temperature {'persona default' if args.temperature is None else args.temperature}, "
          f"{'bare model' if args.raw else 'as deployed (figure check on for bank)'}, "
          f"language {args.language}"
          + (f"; spoken ({', '.join(args.voices)}; noise {', '.join(args.noises)}; Whisper "
             f"{args.asr_model}, second opinion {args.second_asr}, the persona's facts as its "
             "prompt)" if args.voices else "")
          + "\n")
    print("| category | questions | accepted | accuracy |")
    print("|---|---|---|---|")
    for cat, rs in by_cat.items():
        good = sum(r.ok for r in rs)
        print(f"| {cat} | {len(rs)} | {good} | {100 * good / len(rs):.0f}% |")
    nc = by_cat.get("bank_not_covered", [])
    if nc:
        bad = sum(r.invented for r in nc)
        print(f"\nInvented figures on not-covered questions: {bad}/{len(nc)} "
              f"({100 * bad / len(nc):.0f}%)")
    firsts = [r.first_chunk_s for r in results if not math.isnan(r.first_chunk_s)]
    rates = [r.tokens_per_s for r in results if not math.isnan(r.tokens_per_s)]
    tokens = [r.first_token_s for r in results if not math.isnan(r.first_token_s)]
    print("\n| measure | p50 | p95 | n |")
    print("|---|---|---|---|")
    print(f"| first token (the question's prefill) | {pct(tokens, 0.5) * 1000:.0f} ms | "
          f"{pct(tokens, 0.95) * 1000:.0f} ms | {len(tokens)} |")
    print(f"| first speakable chunk | {pct(firsts, 0.5) * 1000:.0f} ms | "
          f"{pct(firsts, 0.95) * 1000:.0f} ms | {len(firsts)} |")
    print(f"| decode | {pct(rates, 0.5):.1f} tok/s | {pct(rates, 0.05):.1f} tok/s (p5) | "
          f"{len(rates)} |")
    capped = sum(r.capped for r in results)
    print(f"\nAnswers ended at `max_sentences` ({args.max_sentences}; the model had more to "
          f"say): {capped}/{len(results)}")
    spoken = [r for r in results if r.heard is not None]
    if spoken:
        wer = word_error_rate([r.question.turns[-1] for r in spoken],
                              [r.heard or "" for r in spoken])
        print(f"\nThe spoken questions heard with WER {wer:.2f} ({len(spoken)} questions).")
        back = [r for r in spoken if r.asked_back]
        print(f"The agent would have asked back {len(back)} of them (Whisper's confidence "
              f"under `[agent] unsure_below`) instead of answering: "
              f"{sum(not r.ok for r in back)} of those answered wrong here, "
              f"{sum(r.ok for r in back)} right.")
    failed = [r for r in results if not r.ok]
    if failed:
        print("\nNot accepted:")
        for r in failed:
            heard = f" (heard {r.heard!r}{', asked back' if r.asked_back else ''})" if (
                r.heard is not None) else ""
            print(f"- [{r.question.category}] {r.question.turns[-1]!r}{heard} -> {r.answer!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None)
    parser.add_argument("--threads", type=int, default=None, help="decode threads (1)")
    parser.add_argument("--profile", choices=("auto", "quality", "fast"),
                        help="the model and threads the server's profile picks here")
    parser.add_argument("--modes", default="as-is",
                        help="as-is, slow (the emulated slow machine) or as-is,slow")
    parser.add_argument("--slow-cores", type=float, default=1.0)
    parser.add_argument("--label", default="as is", help=argparse.SUPPRESS)
    parser.add_argument("--temperature", type=float, default=None)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--max-new-tokens", type=int, default=AgentConfig.max_new_tokens)
    parser.add_argument("--max-sentences", type=int, default=AgentConfig.max_sentences,
                        help="end an answer after this many sentences, as the agent does "
                        "(0 = no limit)")
    parser.add_argument("--knowledge-bank", default=None)
    parser.add_argument("--knowledge-tutor", default=None)
    parser.add_argument("--personas", nargs="+", default=["companion", "bank", "tutor"],
                        choices=["companion", "bank", "tutor"],
                        help="only these personas' questions (default: all)")
    parser.add_argument("--language", default="en", choices=["en", "zh"],
                        help="zh: the Chinese personas, facts and questions (answers_zh.py)")
    parser.add_argument("--show", action="store_true", help="print every answer as it comes")
    parser.add_argument("--questions-file", type=Path, default=QUESTIONS_FILE,
                        help="the questions (bench/answers_heldout.toml: held out)")
    parser.add_argument("--voices", type=lambda v: v.split(","), default=None,
                        help="speak each question (piper, espeak:NAME, kokoro:NAME; in turn) "
                        "and ask what Whisper heard")
    parser.add_argument("--noises", type=lambda v: v.split(","), default=["clean"],
                        help="with --voices: clean, or white noise at SNR dB (15,5)")
    parser.add_argument("--second-asr", default="auto",
                        help="with --voices: [asr] second_model (auto: the other bundled "
                        "Whisper, as the profile sets it where the budget allows; none)")
    parser.add_argument("--asr-model", default=None,
                        help="with --voices: Whisper base or tiny.en (default: the profile's)")
    parser.add_argument("--raw", action="store_true",
                        help="the bare model, without the persona's figure check")
    args = parser.parse_args()
    args.batch_threads = args.burst_tokens = None
    modes = args.modes.split(",")
    if "slow" in modes:  # the same command again, inside the emulated slow machine
        slow = SlowMachine(args.slow_cores)
        slow.prepare()
        argv = [a for a in sys.argv[1:]]
        at = argv.index("--modes")
        del argv[at : at + 2]
        command = slow.wrap([sys.executable, __file__, *argv, "--label", slow.label()])
        if "as-is" in modes:
            subprocess.run([sys.executable, __file__, *argv], check=True)
        return subprocess.run(command, env=slow.env(), check=False).returncode
    if args.profile:
        profile_choice(args)
    args.asr_model = args.asr_model or "base"
    results = asyncio.run(run(args))
    report(results, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

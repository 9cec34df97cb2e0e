"""Benchmark: thinking and speaking latency on this machine.

LLM: load time, time to first token (TTFT), time to first speakable chunk (clause chunker on
the stream), tokens/s, over a set of spoken-style questions asked as consecutive turns of one
conversation (so the persona prompt comes from the KV cache, as in a live session).
TTS: first-audio latency and real-time factor per chunk length, for piper and espeak-ng.
Prints p50/p95 tables (markdown). Goal: first chunk p50 <= 700 ms, short-clause TTS first
audio <= 150 ms.

    .venv/bin/python bench/think_speak.py [--runs 3] [--llm-only | --tts-only] [--precision int8]
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.stats import pct  # noqa: E402
from engines.llm import ChatMessage  # noqa: E402
from engines.llm.local import TransformersLLM  # noqa: E402
from engines.llm.prompt import PromptBuilder  # noqa: E402
from engines.text.chunker import Chunker  # noqa: E402
from engines.text.normalize import normalize  # noqa: E402

QUESTIONS = (
    "Hi, how are you doing today?",
    "Can you recommend a good book for the weekend?",
    "What's a quick healthy breakfast idea?",
    "How do I stay focused when working from home?",
    "Tell me something interesting about octopuses.",
    "What should I pack for a weekend trip to the mountains?",
    "Any tips for learning to cook?",
    "What's the best way to fall asleep faster?",
)
CLAUSES = {
    "short clause (3 words)": "Sure, of course.",
    "clause (8 words)": "I can help you with that right away.",
    "sentence (16 words)": (
        "The weather tomorrow looks sunny and warm, so it is a good day for a walk."
    ),
    "long (35 words)": (
        "If you want to open a savings account, you can do it in the app in about five "
        "minutes, and you will need your passport or identity card, your address, and a "
        "phone number we can reach you on."
    ),
}


def row(name: str, values: Sequence[float], unit: str, scale: float = 1.0) -> str:
    return (
        f"| {name} | {pct(values, 0.5) * scale:.0f} {unit} | {pct(values, 0.95) * scale:.0f} {unit}"
        f" | {len(values)} |"
        if unit == "ms"
        else f"| {name} | {pct(values, 0.5) * scale:.2f}{unit} | {pct(values, 0.95) * scale:.2f}"
        f"{unit} | {len(values)} |"
    )


async def bench_llm(runs: int, precision: str, max_new_tokens: int) -> list[str]:
    t0 = time.perf_counter()
    llm = TransformersLLM(
        "qwen2.5-coder-0.5b", prompt=PromptBuilder.for_persona("companion"),
        precision=precision, seed=0, temperature=0.7,
    )
    load_s = time.perf_counter() - t0
    # Warm-up turn: fills the KV cache with the persona prompt, as the first turn of a session.
    [d async for d in llm.stream([ChatMessage("user", "Hello!")], max_new_tokens=8)]
    ttft, first_chunk, rates, prefill = [], [], [], []
    for _ in range(runs):
        history: list[ChatMessage] = []
        for question in QUESTIONS:
            history.append(ChatMessage("user", question))
            chunker = Chunker()
            text, first, chunk_at = "", None, None
            start = time.perf_counter()
            async for delta in llm.stream(history, max_new_tokens=max_new_tokens):
                now = time.perf_counter() - start
                first = now if first is None else first
                text += delta
                if chunk_at is None and chunker.push(delta):
                    chunk_at = now
            total = time.perf_counter() - start
            if chunk_at is None and chunker.flush():
                chunk_at = total
            tokens = llm.count_tokens(text)
            prefill.append(llm.last_prefill_tokens)
            if first is not None:
                ttft.append(first)
                if tokens > 1 and total > first:
                    rates.append((tokens - 1) / (total - first))
            if chunk_at is not None:
                first_chunk.append(chunk_at)
            history.append(ChatMessage("assistant", text))
    llm.close()
    return [
        f"LLM: {llm.name}, {llm.device} {llm.precision}, load {load_s:.1f} s (cached copy), "
        f"max_new_tokens {max_new_tokens}, prefill per turn p50 {pct(prefill, 0.5):.0f} tokens",
        "",
        "| LLM metric | p50 | p95 | n |",
        "| --- | --- | --- | --- |",
        row("time to first token", ttft, "ms", 1000),
        row("time to first speakable chunk", first_chunk, "ms", 1000),
        row("decode speed", rates, " tok/s"),
    ]


def bench_tts(runs: int) -> list[str]:
    from engines.tts.espeak import EspeakTTS
    from engines.tts.piper_tts import PiperTTS

    lines = ["| TTS, chunk | first audio p50 | first audio p95 | RTF p50 | RTF p95 | n |",
             "| --- | --- | --- | --- | --- | --- |"]
    loads = []
    for name, factory in (("piper", PiperTTS), ("espeak", EspeakTTS)):
        t0 = time.perf_counter()
        tts = factory()
        loads.append(f"{name} load {time.perf_counter() - t0:.2f} s")
        list(tts.synthesize("Warming up the voice."))  # first run pays onnxruntime's setup
        for label, text in CLAUSES.items():
            text = normalize(text)
            first, rtf = [], []
            for _ in range(runs * 3):
                start = time.perf_counter()
                first_at, audio_s = None, 0.0
                for speech in tts.synthesize(text):
                    first_at = first_at or time.perf_counter() - start
                    audio_s += speech.duration_s
                first.append(first_at or 0.0)
                rtf.append((time.perf_counter() - start) / audio_s)
            lines.append(
                f"| {name}, {label} | {pct(first, 0.5) * 1000:.0f} ms | "
                f"{pct(first, 0.95) * 1000:.0f} ms | {pct(rtf, 0.5):.3f} | {pct(rtf, 0.95):.3f} "
                f"| {len(first)} |"
            )
    return [", ".join(loads), "", *lines]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3, help="passes over the question set")
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--max-new-tokens", type=int, default=60)
    parser.add_argument("--llm-only", action="store_true")
    parser.add_argument("--tts-only", action="store_true")
    args = parser.parse_args()
    out = [
        f"{time.strftime('%Y-%m-%d')}, {platform.machine()} {platform.processor() or ''}"
        f" ({__import__('os').cpu_count()} cores), `python bench/think_speak.py "
        f"{' '.join(sys.argv[1:])}`".replace("  ", " "),
        "",
    ]
    if not args.tts_only:
        out += asyncio.run(bench_llm(args.runs, args.precision, args.max_new_tokens)) + [""]
    if not args.llm_only:
        out += bench_tts(args.runs)
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

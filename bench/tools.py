"""Benchmark: the bank persona's tool calls from spoken requests, heard as the agent hears them.

30 requests (`bench/tools_requests.toml`, each with the tool and arguments it expects): 10 for
a tool that runs at once, 10 for one read back for a yes first, 10 for none (the facts,
how-to questions, chit-chat). Each is spoken per voice (`testkit.speech`), heard offline by
Whisper (`engines.asr.offline.listen`, Smart Turn, the facts' prompt as
`rtc_server.engine_set.biased` sets it), answered in a fresh conversation by the LLM as
deployed with `engines/tools/examples/bank.toml` (figure check on, no holding phrase), and the
call read out of the stream is checked against the heard words as `rtc_server/acting.py`
does. A read-back is answered "Yes, go ahead." in the same voice (made only where `consent`
hears a yes) and, for the confirm set, "No, don't." (must make none). Per voice: right tool
and arguments among the 20, read-backs, calls where none was asked (asks beside), WER (figures
as digits on both sides), and from the stream's start the time to a call's first token (where
the bridge phrase starts) and to an answer's first word, and for each call made, from the
app's result (`APP_RESULTS`, as the model reads it after the call) to the first word of the
answer from it. The wrong outcomes follow the table.

    .venv/bin/python bench/tools.py [--voices kokoro:af_sarah,kokoro:bm_george,espeak:en-us+m3]
        [--model qwen2.5-coder-1.5b|qwen2.5-coder-0.5b] [--limit N] [--text]
        [--engine transformers]  # the GPU profile's engine (CUDA if torch sees one)
        [--requests bench/tools_requests_heldout.toml --limit 20]  # a second set
        [--app-words off]  # without the app's saved payees in Whisper's prompt

The app's words (on by default): the embedding app knows its user's saved payees and sends
them as the session's vocabulary (RTVI `client-message` `vocabulary`, docs/embedding.md), so
Whisper hears them with the agent's name, those names and the facts' words as its prompt, as a
session does (`rtc_server.engine_set.words_prompt`). The payees here are the requests' own
(`payee` arguments) among `OTHER_PAYEES`, in alphabetical order; a call's near miss of one
is mended to it, as `rtc_server/acting.py` does (engines/tools/calls.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import re
import sys
import time
import tomllib
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.asr import Ears  # noqa: E402
from bench.stats import pct  # noqa: E402
from common.logs import setup_logging  # noqa: E402
from engines.asr.text import word_error_rate  # noqa: E402
from engines.llm import ChatLLM, LLMConfig, create_llm  # noqa: E402
from engines.llm.base import ChatMessage  # noqa: E402
from engines.llm.resilience import Notice  # noqa: E402
from engines.progress import Progress  # noqa: E402
from engines.text.consent import consent  # noqa: E402
from engines.tools.calls import Verdict, check_call, parse_call, tool_response  # noqa: E402
from engines.tools.spec import ToolSet  # noqa: E402

logger = logging.getLogger("bench.tools")
REQUESTS = REPO / "bench" / "tools_requests.toml"
TOOLS = REPO / "engines" / "tools" / "examples" / "bank.toml"
VOICES = "kokoro:af_sarah,kokoro:bm_george,espeak:en-us+m3"
KINDS = ("tool", "confirm", "none")
YES, NO = "Yes, go ahead.", "No, don't."
MAX_TOKENS = 120  # the agent's answer cap ([agent] max_new_tokens)
WORDS_SHOWN = 60  # characters of an answer in words kept (for the list of wrong outcomes)
# What the app answers a call with (as the embed demo's handlers would); others: done.
APP_RESULTS = {
    "account_balance": {"account": "everyday", "balance": 1240.5, "currency": "GBP"},
    "recent_payments": {"payments": [
        {"date": "2026-12-04", "payee": "Tesco", "amount": 23.4},
        {"date": "2026-12-03", "payee": "Transport for London", "amount": 6.8},
        {"date": "2026-12-01", "payee": "Netflix", "amount": 10.99}]},
}


# Saved payees besides the requests' own: a user's list holds more names than one request.
OTHER_PAYEES = ("Chloe Evans", "Daniel Hughes", "Ewan Campbell", "Grace Okoye", "Liam Murphy",
                "Mohammed Ali", "Olivia Brown", "Zara Khan")


@dataclass(frozen=True)
class Request:
    kind: str  # "tool" | "confirm" | "none"
    text: str
    tool: str | None
    args: dict[str, Any]


@dataclass
class Outcome:
    request: Request
    heard: str
    written: str  # the call as the model wrote it, or the start of its words
    verdict: Verdict | None  # None: no call, or one that could not be read
    to_name: float | None  # s from the stream's start to a call's first token (the bridge)
    to_text: float | None  # s to the first word of an answer in words
    to_result_word: float | None = None  # s from the app's result to the answer's first word
    yes: str = ""  # consent() of the heard "Yes, go ahead." (read-backs only)
    no_made: bool = False  # the heard "No, don't." would have run it

    @property
    def wanted(self) -> bool:  # the wanted call, run or read back as its tool asks
        v, r = self.verdict, self.request
        return (v is not None and v.kind == ("run" if r.kind == "tool" else "confirm")
                and v.call.name == r.tool and _args_match(r.args, v.call.arguments))

    @property
    def right(self) -> bool:  # ... and made (a read-back: on the heard yes)
        return self.wanted and (self.request.kind == "tool" or self.yes == "yes")

    @property
    def ok(self) -> bool:  # needing none: nothing made, read back or asked
        v = self.verdict
        return self.right if self.request.kind != "none" else v is None or v.kind == "refuse"

    def describe(self) -> str:
        v = self.verdict
        if v is None or v.kind == "refuse":  # answered in words instead: nothing runs
            return f"no (readable, declared) call: {self.written!r}"
        got = f"{v.kind} {v.call.name} {v.call.arguments}"
        if v.kind == "ask":
            got += f" (needs {', '.join(v.needed) or v.reason})"
        if v.kind == "confirm":
            got += f", the yes heard as {self.yes}" + (", the no ran it" if self.no_made else "")
        return f"{got}; the model wrote {self.written!r}"


def load_requests(limit: int, path: Path = REQUESTS) -> list[Request]:
    raw = tomllib.loads(path.read_text())["request"]
    return [Request(kind, r["text"], r.get("tool"), r.get("args", {}))
            for kind in KINDS for r in [r for r in raw if r["kind"] == kind][:limit]]


def app_words(requests: list[Request]) -> tuple[str, ...]:
    """The saved payees the app would send as the session's vocabulary."""
    named = {str(r.args["payee"]) for r in requests if "payee" in r.args}
    return tuple(sorted(named | set(OTHER_PAYEES)))


def _same(want: Any, got: Any) -> bool:
    try:
        return float(want) == float(got)
    except (TypeError, ValueError):
        return str(want).strip().lower() == str(got).strip().lower()


def _args_match(want: dict[str, Any], got: dict[str, Any]) -> bool:
    """Each argument given as wanted, none not wanted (a required one missing is an `ask`)."""
    return not set(got) - set(want) and all(
        any(_same(w, got[k]) for w in (v if isinstance(v, list) else [v]))
        for k, v in want.items() if k in got)


def _digits(text: str) -> str:
    """Figures one way on both sides of the WER ("forty pounds", "£40" -> "40 pounds")."""
    from text_to_num import alpha2digit

    text = re.sub(r"£\s?(\d[\d,.]*)", r"\1 pounds", text)
    return re.sub(r"(\d),(\d{3})", r"\1\2", alpha2digit(text, "en"))


async def ask(llm: ChatLLM, tools: ToolSet, request: Request, heard: str,
              saved: tuple[str, ...] = ()) -> Outcome:
    """One fresh conversation: the answer's start, and what becomes of a call in it
    (`saved`: the app's vocabulary, its near misses mended)."""
    if not heard:
        return Outcome(request, heard, "(nothing heard)", None, None, None)
    call: str | None = None
    words, to_name, to_text = "", None, None
    start = time.perf_counter()
    stream = llm.stream([ChatMessage("user", heard)], max_new_tokens=MAX_TOKENS)
    async with aclosing(stream):  # type: ignore[type-var]
        async for delta in stream:
            kind = delta.kind if isinstance(delta, Notice) else ""
            if kind == "tool_start":
                to_name = time.perf_counter() - start
            elif kind == "tool_call":
                call = str(delta)
                break  # the agent closes the stream here too
            elif not kind.startswith("tool_"):  # words, the wrappers' notices among them
                to_text = to_text or time.perf_counter() - start
                words += delta
                if len(words) >= WORDS_SHOWN:
                    break  # no call can follow words (tool_calls.py)
    if call is None:
        return Outcome(request, heard, words.strip(), None, to_name, to_text)
    parsed = parse_call(call)  # unreadable: the agent answers in words instead
    # acting._said: the user's words of this request and the one before (none: fresh).
    verdict = check_call(tools, parsed, heard, saved, heard) if parsed is not None else None
    out = Outcome(request, heard, " ".join(call.split()), verdict, to_name, to_text)
    if verdict is not None and verdict.kind in ("run", "confirm"):  # (a confirm: on the yes)
        result = json.dumps(APP_RESULTS.get(verdict.call.name, {"status": "done"}))
        out.to_result_word = await first_word(llm, [
            ChatMessage("user", heard), ChatMessage("assistant", verdict.call.text()),
            ChatMessage("user", tool_response(result))])
    return out


async def first_word(llm: ChatLLM, messages: list[ChatMessage]) -> float | None:
    """Seconds to the first word the model says to `messages` (None: it said none)."""
    start = time.perf_counter()
    stream = llm.stream(messages, max_new_tokens=MAX_TOKENS)
    async with aclosing(stream):  # type: ignore[type-var]
        async for delta in stream:
            if not isinstance(delta, Notice) and delta.strip():
                return time.perf_counter() - start
    return None


def ms(values: list[float]) -> str:
    return f"{pct(values, 0.5) * 1000:.0f} / {pct(values, 0.95) * 1000:.0f}" if values else "—"


def wer(outs: list[Outcome]) -> float:
    return word_error_rate([_digits(o.request.text) for o in outs],
                           [_digits(o.heard) for o in outs])


def row(label: str, outs: list[Outcome], heard: bool) -> str:
    by = {k: [o for o in outs if o.request.kind == k] for k in KINDS}
    acting = by["tool"] + by["confirm"]
    calls = [o for o in outs if o.verdict and o.verdict.kind in ("run", "confirm")]
    confirm_tools = [o.verdict for o in calls if o.verdict and o.verdict.spec
                     and o.verdict.spec.confirm]
    read_back = sum(v.kind == "confirm" for v in confirm_tools)
    unasked = sum(o.request.kind == "none" for o in calls)
    asks = sum(o.verdict is not None and o.verdict.kind == "ask" for o in by["none"])
    without_yes = len(confirm_tools) - read_back + sum(o.no_made for o in outs)
    no_pass = [o for o in calls if o.request.kind == "confirm" and o.verdict
               and o.verdict.kind == "confirm"]
    names = [o.to_name for o in outs if o.to_name is not None]
    texts = [o.to_text for o in outs if o.to_name is None and o.to_text is not None]
    results = [o.to_result_word for o in outs if o.to_result_word is not None]
    return (f"| {label} | **{sum(o.right for o in acting)}/{len(acting)}** | "
            f"{sum(o.right for o in by['tool'])}/{len(by['tool'])} | "
            f"{sum(o.wanted for o in by['confirm'])}, {sum(o.right for o in by['confirm'])}"
            f"/{len(by['confirm'])} | "
            f"{read_back}/{len(confirm_tools)}, {without_yes} | "
            f"{sum(o.no_made for o in no_pass)}/{len(no_pass)} | "
            f"**{unasked}/{len(by['none'])}** ({asks}) | "
            f"{f'{wer(outs) * 100:.1f}%' if heard else '—'} | {ms(names)} ({len(names)}) | "
            f"{ms(texts)} ({len(texts)}) | {ms(results)} ({len(results)}) |")


async def run(args: argparse.Namespace) -> None:
    load = os.getloadavg()[0]
    requests = load_requests(args.limit, args.requests)
    tools = ToolSet.load(TOOLS)
    config = LLMConfig(engine=args.engine, persona="bank", tools=str(TOOLS), model=args.model,
                       seed=0, resilient=False, precision=args.precision)
    logger.info("loading the LLM (%s) and %s", args.model, "nothing else" if args.text
                else f"Whisper {args.asr}, Smart Turn")
    llm = create_llm(config)
    words = app_words(requests) if args.app_words == "on" else ()
    hear = None if args.text else Ears(args.asr, second=args.second, words=words)
    voices = ["text"] if args.text else args.voices.split(",")
    results: dict[str, list[Outcome]] = {}
    replies: dict[str, dict[str, str]] = {}  # voice: the heard "Yes, go ahead." and "No, don't."
    try:
        for voice in voices:
            progress = Progress(logger, voice, len(requests), every_s=15)
            said = replies[voice] = {t: hear(t, voice) if hear else t for t in (YES, NO)}
            outs = results[voice] = []
            for i, request in enumerate(requests):
                heard = hear(request.text, voice) if hear else request.text
                out = await ask(llm, tools, request, heard, words)
                if out.verdict is not None and out.verdict.kind == "confirm":
                    out.yes = consent(said[YES])
                    out.no_made = request.kind == "confirm" and consent(said[NO]) == "yes"
                outs.append(out)
                progress.update(i + 1, f"({'ok' if out.ok else 'wrong'}: {heard[:40]!r})")
    finally:
        llm.close()
    report(results, replies, args, load)


ENGINES = {"llama-cpp": "llama.cpp (1 decode thread, 2 prompt threads)",
           "transformers": "transformers (CUDA graphs where torch sees a GPU)"}


def report(results: dict[str, list[Outcome]], replies: dict[str, dict[str, str]],
           args: argparse.Namespace, load: float) -> None:
    every = [o for outs in results.values() for o in outs]
    print(f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores; "
          f"{args.model} on {ENGINES[args.engine]}"
          f"{f' ({args.precision})' if args.engine == 'transformers' else ''}"
          " (greedy, seed 0, figure check on), "
          f"{'the written requests' if args.text else f'Whisper {args.asr}'}"
          f"{'' if args.text else f' (second opinion {args.second}), the app words '}"
          f"{'' if args.text else args.app_words}"
          f"; 1-min load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    print(f"Command: `.venv/bin/python {' '.join(['bench/tools.py', *sys.argv[1:]])}`\n")
    print("| voice | right tool + args | run at once | read back right, run on the yes | "
          "confirm tools: read back / calls, run without a yes | \"No, don't.\" ran it | "
          "calls where none was asked (asks) | WER | to a call's start (bridge) p50 / p95 ms (n) | "
          "to the first word p50 / p95 ms (n) | from the app's result to the first word p50 / "
          "p95 ms (n) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for voice, outs in [*results.items(), *([("all", every)] if len(results) > 1 else [])]:
        print(row(voice, outs, not args.text))
    print("\nThe replies to a read-back, as heard: " + "; ".join(
        f"{voice}: " + ", ".join(f"{t!r} as {h!r} ({consent(h)})" for t, h in said.items())
        for voice, said in replies.items()))
    print("\nWrong outcomes (an `ask` on a request that needs none included):")
    wrong = [(voice, o) for voice, outs in results.items() for o in outs if not o.ok]
    for voice, o in wrong:
        heard = "" if o.heard == o.request.text else f" (heard {o.heard!r})"
        want = f"{o.request.tool} {o.request.args}" if o.request.tool else "no call"
        print(f"- {voice}, {o.request.kind}: {o.request.text!r}{heard}: want {want}; got "
              f"{o.describe()}")
    print("" if wrong else "none")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--voices", default=VOICES,
                        help="piper, espeak[:VOICE], kokoro:NAME (comma-separated)")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b",
                        help="the LLM: qwen2.5-coder-1.5b | qwen2.5-coder-0.5b | a .gguf")
    parser.add_argument("--engine", choices=tuple(ENGINES), default="llama-cpp",
                        help="[llm] engine (transformers: the GPU profile's, CUDA if torch "
                        "sees one)")
    parser.add_argument("--precision", default="auto",
                        help="[llm] precision of the transformers engine: auto (CUDA bf16, CPU "
                        "int8) | fp32 | bf16 | fp16")
    parser.add_argument("--asr", default="base", help="Whisper: base | tiny.en | a directory")
    parser.add_argument("--second", default="auto",
                        help="[asr] second_model: auto (the other bundled Whisper, as the CPU "
                        "profile may set it) | none (config/gpu.toml) | base | tiny.en")
    parser.add_argument("--limit", type=int, default=10, help="first N requests of each kind")
    parser.add_argument("--requests", type=Path, default=REQUESTS,
                        help="the requests (tools_requests_heldout.toml: a second set)")
    parser.add_argument("--app-words", choices=("on", "off"), default="on",
                        help="the app's saved payees as the session's vocabulary")
    parser.add_argument("--text", action="store_true",
                        help="the written requests, no TTS or ASR (the model alone)")
    args = parser.parse_args()
    setup_logging("WARNING")
    logger.setLevel(logging.INFO)
    asyncio.run(run(args))


if __name__ == "__main__":
    main()

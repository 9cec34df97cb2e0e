"""The text-end probe's forward on the chat engine (`TransformersLLM.last_hidden_state`), alone
and while answers decode, as at a pause whose answer the early decode already started.

    python3 bench/gpu_text_end.py --model DIR|bundled-name [--device cuda] [--batch-streams 4]
        [--rounds 20] [--forced-answers bench/gpu_answers.json] [--probe-graphs on|off]

Per arm, the forward's latency p50 / p95 (ms, from the ask to the state in hand): `idle` (no
answer decoding) and `beside answers` (asked 20 ms into a burst of `--streams` answers).
With `--forced-answers` the answers of the `beside` arm must be word for word those of a burst
without probes: the forward on its own thread leaves the decode (its CUDA graphs, its cache)
alone; a difference exits 1. `--probe-graphs on` (the default, as the server does where
the probe loads) captures the forward per prompt length first (engines/llm/hidden_graphs.py;
CUDA only), `off` keeps it eager: the A/B of the capture. On the CPU it is a smoke test of
the same code.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.stats import pct, publish  # noqa: E402
from engines.llm import ChatMessage  # noqa: E402
from engines.llm.local import TransformersLLM  # noqa: E402
from engines.llm.prompt import PromptBuilder  # noqa: E402
from engines.llm.text_end import SAMPLE  # noqa: E402
from engines.turn.text_end import HEAD  # noqa: E402

WORDS = ("Explain what a mortgage is", "Could you tell me", "Where does the Amazon river end",
         "I would like to book a table for")


async def said(llm: TransformersLLM, question: str, n: int) -> str:
    return "".join([d async for d in llm.stream([ChatMessage("user", question)],
                                                max_new_tokens=n)])


async def probe_ms(llm: TransformersLLM, words: str) -> float:
    start = time.perf_counter()
    await asyncio.wrap_future(llm.last_hidden_state(HEAD + words))
    return (time.perf_counter() - start) * 1000


async def rounds(llm: TransformersLLM, questions: list[str], streams: int, n: int, count: int,
                 probe: bool) -> tuple[list[float], list[list[str]]]:
    times: list[float] = []
    answers: list[list[str]] = []
    for r in range(count):
        asked = [questions[(r * streams + i) % len(questions)] for i in range(streams)]
        tasks = [asyncio.ensure_future(said(llm, q, n)) for q in asked]
        if probe:
            await asyncio.sleep(0.02)
            times.append(await probe_ms(llm, WORDS[r % len(WORDS)]))
        answers.append(list(await asyncio.gather(*tasks)))
    return times, answers


async def run(args: argparse.Namespace, questions: list[str]) -> tuple[dict[str, float], bool]:
    llm = TransformersLLM(args.model, device=args.device, temperature=0.0,
                          precision=args.precision,
                          prompt=PromptBuilder.for_persona("companion", "Ava"),
                          forced_answers=args.forced_answers, batch_streams=args.batch_streams)
    try:
        if args.probe_graphs == "on":
            llm.prepare_hidden_states(HEAD + SAMPLE).result()
        for words in WORDS:  # warm: the first forward pays the kernels' set-up
            await probe_ms(llm, words)
        idle = [await probe_ms(llm, WORDS[r % len(WORDS)]) for r in range(args.rounds)]
        _, plain = await rounds(llm, questions, args.streams, args.max_new_tokens,
                                args.rounds, probe=False)
        beside, probed = await rounds(llm, questions, args.streams, args.max_new_tokens,
                                      args.rounds, probe=True)
    finally:
        llm.close()
    same = plain == probed or not args.forced_answers
    return {"idle_p50": pct(idle, 0.5), "idle_p95": pct(idle, 0.95),
            "beside_p50": pct(beside, 0.5), "beside_p95": pct(beside, 0.95)}, same


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a model directory or bundled name")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--batch-streams", type=int, default=4)
    parser.add_argument("--streams", type=int, default=3, help="answers decoding meanwhile")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--max-new-tokens", type=int, default=60)
    parser.add_argument("--forced-answers", default=None)
    parser.add_argument("--probe-graphs", default="on", choices=("on", "off"),
                        help="capture the probe's forward first (CUDA; the server's way)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    questions = ([str(i["question"]) for i in json.loads(Path(args.forced_answers).read_text())]
                 if args.forced_answers else [f"Tell me a fact about {w}." for w in WORDS])
    row, same = asyncio.run(run(args, questions))
    lines = [f"`{' '.join(sys.argv)}`", "",
             "| the probe's forward, ms | p50 | p95 |", "|---|---|---|",
             f"| idle | {row['idle_p50']:.1f} | {row['idle_p95']:.1f} |",
             f"| beside {args.streams} answers decoding | {row['beside_p50']:.1f} | "
             f"{row['beside_p95']:.1f} |", "",
             "answers with probes beside them: " + ("the same, word for word" if same
                                                    else "DIFFERENT")]
    publish("\n".join(lines), [row], args.json)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

"""CLI: `python -m engines.llm "question"` streams an answer and prints its timings.

Options select the engine (`--engine openai --base-url ...`), the model (a bundled name or a
GGUF file), the persona and the deployment's facts (`--knowledge FILE`); `--chunks` also shows
where the clause chunker would cut the answer for the voice.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from common.logs import setup_logging
from engines.llm import ChatMessage, LLMConfig, Notice, create_llm
from engines.llm.config import ENGINES
from engines.llm.errors import ModelLoadError
from engines.llm.personas import PERSONAS


async def answer(config: LLMConfig, question: str, show_chunks: bool) -> None:
    from engines.text.chunker import Chunker

    t0 = time.perf_counter()
    llm = create_llm(config)
    load_s = time.perf_counter() - t0
    chunker = Chunker()
    chunks: list[tuple[float, str]] = []
    deltas = 0
    first: float | None = None
    t0 = time.perf_counter()
    try:
        async for delta in llm.stream(
            [ChatMessage("user", question)], max_new_tokens=config.max_new_tokens
        ):
            now = time.perf_counter() - t0
            if isinstance(delta, Notice):
                if not delta:
                    continue  # progress only (a tool call being written)
                print(f"[{delta.kind}] ", end="")
            else:
                first = now if first is None else first
                deltas += 1
                chunks.extend((now, c) for c in chunker.push(delta))
            print(delta, end="", flush=True)
    finally:
        llm.close()
    total = time.perf_counter() - t0
    chunks.extend((total, c) for c in chunker.flush())
    print()
    ttft = first if first is not None else total
    rate = (deltas - 1) / (total - ttft) if deltas > 1 and total > ttft else 0.0
    first_chunk = chunks[0][0] if chunks else total
    print(
        f"load={load_s:.1f}s ttft={ttft:.3f}s first_chunk={first_chunk:.3f}s "
        f"deltas={deltas} deltas/s={rate:.1f} total={total:.2f}s",
        file=sys.stderr,
    )
    if show_chunks:
        for at, chunk in chunks:
            print(f"{at:7.3f}s  {chunk.strip()!r}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engines.llm", description=__doc__)
    parser.add_argument("question")
    parser.add_argument("--engine", default=LLMConfig.engine, choices=ENGINES)
    parser.add_argument("--model", default=None, help="bundled model name or .gguf file")
    parser.add_argument("--persona", default="companion", choices=sorted(PERSONAS))
    parser.add_argument("--knowledge", default=None,
                        help="facts file (default: the persona's example; '' for none)")
    parser.add_argument("--threads", type=int, default=LLMConfig.threads)
    parser.add_argument("--base-url", default=LLMConfig.base_url)
    parser.add_argument("--api-model", default=LLMConfig.api_model)
    parser.add_argument("--max-new-tokens", type=int, default=LLMConfig.max_new_tokens)
    parser.add_argument("--temperature", type=float, default=None)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--chunks", action="store_true", help="print clause chunks too")
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    setup_logging(args.log_level)
    config = LLMConfig(
        engine=args.engine, model=args.model, persona=args.persona, knowledge=args.knowledge,
        threads=args.threads, base_url=args.base_url, api_model=args.api_model,
        max_new_tokens=args.max_new_tokens, temperature=args.temperature, seed=args.seed,
    )
    try:
        asyncio.run(answer(config, args.question, args.chunks))
    except ModelLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

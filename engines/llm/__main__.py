"""CLI: `python -m engines.llm "question"` streams an answer and prints TTFT and tokens/s.

Options select the engine (`--engine openai --base-url ...`), model, precision and persona;
`--chunks` also shows where the clause chunker would cut the answer for the voice.
"""

from __future__ import annotations

import argparse
import time

from engines.llm import ChatMessage, LLMConfig, Notice, create_llm
from engines.llm.history import approx_tokens
from engines.llm.personas import PERSONAS
from rtc_server.logs import setup_logging


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engines.llm", description=__doc__)
    parser.add_argument("question")
    parser.add_argument("--engine", default="transformers", choices=["transformers", "openai"])
    parser.add_argument("--model", default=None, help="HF model directory or .gguf file")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--precision", default="auto", help="auto, fp32, bf16, fp16, int8")
    parser.add_argument("--persona", default="companion", choices=sorted(PERSONAS))
    parser.add_argument("--base-url", default=LLMConfig.base_url)
    parser.add_argument("--api-model", default=LLMConfig.api_model)
    parser.add_argument("--max-new-tokens", type=int, default=LLMConfig.max_new_tokens)
    parser.add_argument("--temperature", type=float, default=LLMConfig.temperature)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--chunks", action="store_true", help="print clause chunks too")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    setup_logging(args.log_level)

    config = LLMConfig(
        engine=args.engine, model=args.model, device=args.device, precision=args.precision,
        persona=args.persona, base_url=args.base_url, api_model=args.api_model,
        temperature=args.temperature, seed=args.seed,
    )
    t0 = time.perf_counter()
    llm = create_llm(config)
    load_s = time.perf_counter() - t0
    inner = getattr(llm, "inner", llm)
    count = getattr(inner, "count_tokens", approx_tokens)

    from engines.text.chunker import Chunker

    chunker = Chunker()
    chunks: list[tuple[float, str]] = []
    text = ""
    t0 = time.perf_counter()
    first: float | None = None
    for delta in llm.stream(
        [ChatMessage("user", args.question)], max_new_tokens=args.max_new_tokens
    ):
        now = time.perf_counter() - t0
        if first is None and not isinstance(delta, Notice):
            first = now
        if isinstance(delta, Notice):
            print(f"[{delta.kind}] ", end="")
        else:
            text += delta
            chunks.extend((now, c) for c in chunker.push(delta))
        print(delta, end="", flush=True)
    total = time.perf_counter() - t0
    chunks.extend((total, c) for c in chunker.flush())
    print()
    tokens = count(text) if text else 0
    ttft = first if first is not None else total
    rate = (tokens - 1) / (total - ttft) if tokens > 1 and total > ttft else 0.0
    first_chunk = chunks[0][0] if chunks else total
    print(
        f"load={load_s:.1f}s ttft={ttft:.3f}s first_chunk={first_chunk:.3f}s "
        f"tokens={tokens} tok/s={rate:.1f} total={total:.2f}s"
    )
    if args.chunks:
        for at, chunk in chunks:
            print(f"{at:7.3f}s  {chunk.strip()!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

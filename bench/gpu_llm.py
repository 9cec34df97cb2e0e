"""The LLM stage on its GPU engine (`TransformersLLM`): a burst of answers asked at once, as a
worker's sessions ask together.

    python3 bench/gpu_llm.py --model DIR|bundled-name [--device cuda] [--arms 0,4]
        [--streams 4] [--rounds 10] [--forced-answers bench/gpu_answers.json] [--json FILE]

Per arm (`[llm] batch_streams`: 0 = the answers take turns, N = decoded together): each
answer's first and last token after the ask, p50 / p95, and the burst's tokens per second.
With `--forced-answers` (random weights) every step runs the model and says the written
answer's next token: the same answers in every arm. On the CPU (the bundled 0.5B) it is a
smoke test of the same code. `random_model`: the random-weight 1.5B the GPU runs use (made by
bench/gpu_device.sh).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.stats import pct, publish  # noqa: E402
from engines.llm.local import TransformersLLM  # noqa: E402
from engines.llm.prompt import PromptBuilder  # noqa: E402
from testkit.burst import burst  # noqa: E402

QWEN_1_5B: dict[str, Any] = {"hidden_size": 1536, "intermediate_size": 8960,  # as published
                             "num_hidden_layers": 28, "num_attention_heads": 12,
                             "num_key_value_heads": 2, "tie_word_embeddings": True}


def random_model(tokenizer_dir: Path, root: Path) -> Path:
    """Qwen2.5-1.5B's shape (its published config) with random bf16 weights, as a Hugging Face
    directory with the bundled tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    out = root / "qwen2.5-1.5b-random"
    config = Qwen2Config(vocab_size=151936, max_position_embeddings=32768, **QWEN_1_5B)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(out)
    del model
    torch.cuda.empty_cache()
    for path in tokenizer_dir.iterdir():
        if path.name != "config.json" and not path.name.startswith("model"):
            shutil.copy(path, out / path.name)
    return out


async def arm_row(llm: TransformersLLM, questions: list[str],
                  args: argparse.Namespace) -> dict[str, float]:
    await burst(llm, questions, args.streams, 1, args.max_new_tokens)  # warm
    b = await burst(llm, questions, args.streams, args.rounds, args.max_new_tokens)
    return {"first_ms_p50": pct(b.first_ms, 0.5), "first_ms_p95": pct(b.first_ms, 0.95),
            "last_ms_p50": pct(b.last_ms, 0.5), "last_ms_p95": pct(b.last_ms, 0.95),
            "deltas_per_s_p50": pct(b.deltas_per_s, 0.5)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a model directory or bundled name")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--arms", default="0,4", help="batch_streams values, comma-separated")
    parser.add_argument("--streams", type=int, default=4, help="answers asked at once")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--max-new-tokens", type=int, default=80)
    parser.add_argument("--forced-answers", default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    arms = [int(a) for a in args.arms.split(",")]
    if args.streams < 1 or args.rounds < 1 or any(a < 0 for a in arms):
        parser.error("--streams and --rounds >= 1, arms >= 0")
    questions = ([str(i["question"]) for i in json.loads(Path(args.forced_answers).read_text())]
                 if args.forced_answers else [f"Tell me a fact about the number {i}."
                                              for i in range(32)])
    results = []
    for arm in arms:
        print(f"arm batch_streams={arm}: loading ...", file=sys.stderr, flush=True)
        llm = TransformersLLM(args.model, device=args.device, temperature=0.0,
                              prompt=PromptBuilder.for_persona("companion", "Ava"),
                              forced_answers=args.forced_answers, batch_streams=arm)
        try:
            row = asyncio.run(arm_row(llm, questions, args))
        finally:
            llm.close()
        results.append({"batch_streams": arm, "streams": args.streams, **row})
        print(f"arm {arm}: {row}", file=sys.stderr, flush=True)
    lines = [f"{args.streams} answers asked at once, {args.rounds} rounds, `{' '.join(sys.argv)}`",
             "", "| batch_streams | first token p50 / p95, ms | last token p50 / p95, ms "
             "| deltas/s (burst) |", "|---|---|---|---|"]
    lines += [f"| {r['batch_streams']} | {r['first_ms_p50']:.1f} / {r['first_ms_p95']:.1f} "
              f"| {r['last_ms_p50']:.0f} / {r['last_ms_p95']:.0f} | {r['deltas_per_s_p50']:.0f} |"
              for r in results]
    return publish("\n".join(lines), results, args.json)


if __name__ == "__main__":
    sys.exit(main())

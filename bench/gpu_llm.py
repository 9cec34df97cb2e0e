"""bench/gpu.py's LLM rows: a Qwen2.5-shaped model with random weights through
`TransformersLLM` on CUDA (turns of a conversation through `stream()`), and the checks of the
graph decoder against the same step run eagerly.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.gpu_stages import Row
from bench.llm_shapes import SHAPES
from bench.stats import pct
from engines.llm import ChatMessage
from engines.llm.prompt import PromptBuilder

QUESTIONS = (
    "Hi, how are you doing today?", "Can you recommend a good book for the weekend?",
    "What's a quick healthy breakfast idea?", "How do I stay focused when working from home?",
    "Tell me something interesting about octopuses.", "Any tips for learning to cook?",
    "What should I pack for a weekend trip to the mountains?", "Why is the sky blue?",
    "How long should I nap in the afternoon?", "What's a good way to start running?",
    "Can you explain what a budget is?", "What's the best way to fall asleep faster?",
)
REPLY = "That's a good question. Here is what I would suggest, in short."
ANSWERS = (  # typical first sentences of the companion's answers (for the first-chunk size)
    "I'm doing well, thanks for asking! How about you?",
    "Sure! If you like mysteries, try The Thursday Murder Club.",
    "Overnight oats are quick: mix oats, milk and fruit the night before.",
    "Try working in short blocks of time, with a break after each one.",
    "Octopuses have three hearts and blue blood.",
    "Start with simple recipes, like pasta or an omelette, and cook them often.",
    "Pack layers, a rain jacket, good shoes and plenty of water.",
    "Sunlight is scattered by the air, and blue light scatters the most.",
    "About twenty minutes is enough to feel rested without grogginess.",
    "Begin with short runs and walk breaks, three times a week.",
)
def first_chunk_tokens(tokenizer: Any) -> int:
    """Tokens of the longest first chunk (plus the one that shows its end) in ANSWERS."""
    from engines.text.chunker import FIRST_CHUNK_MAX_CHARS, Chunker, ChunkerConfig

    counts = []
    for answer in ANSWERS:
        chunker, text = Chunker(ChunkerConfig(first_max_chars=FIRST_CHUNK_MAX_CHARS)), ""
        ids = tokenizer.encode(answer, add_special_tokens=False)
        for n in range(1, len(ids) + 1):
            full = tokenizer.decode(ids[:n])
            if chunker.push(full[len(text):]):
                counts.append(n)
                break
            text = full
        else:
            counts.append(len(ids))
    return max(counts)


def random_model(shape: str, tokenizer_dir: Path, root: Path) -> Path:
    """A Qwen2.5-shaped model with random bf16 weights, as a Hugging Face directory."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    out = root / f"qwen2.5-{shape}-random"
    config = Qwen2Config(vocab_size=151936, max_position_embeddings=32768, **SHAPES[shape])
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


async def turns(llm: Any, n: int, tokens: int, chunk_tokens: int) -> list[dict[str, float]]:
    rows: list[dict[str, float]] = []
    history: list[ChatMessage] = []
    for question in (QUESTIONS * 4)[:n]:
        messages = [*history, ChatMessage("user", question)]
        start = time.perf_counter()
        first = None
        async for _ in llm.stream(messages, max_new_tokens=tokens):
            first = first or time.perf_counter()
        times = llm.last_token_times
        if not times:
            continue
        rows.append({
            "prefill": llm.last_prefill_tokens, "ttft_ms": (times[0] - start) * 1e3,
            "first_delta_ms": ((first or start) - start) * 1e3,
            "chunk_ms": (times[min(chunk_tokens, len(times)) - 1] - start) * 1e3,
            "ms_per_token": (times[-1] - times[0]) / max(len(times) - 1, 1) * 1e3,
            "tokens": len(times),
        })
        history += [ChatMessage("user", question), ChatMessage("assistant", REPLY)]
    return rows


def turn_row(name: str, rows: list[dict[str, float]]) -> Row:
    def q(key: str, p: float) -> float:
        return round(pct([r[key] for r in rows], p), 2)

    return {"name": name, "turns": len(rows), "prefill_p50": q("prefill", 0.5),
            "ttft_p50_ms": q("ttft_ms", 0.5), "ttft_p95_ms": q("ttft_ms", 0.95),
            "chunk_p50_ms": q("chunk_ms", 0.5), "chunk_p95_ms": q("chunk_ms", 0.95),
            "ms_per_token_p50": q("ms_per_token", 0.5), "ms_per_token_p95": q("ms_per_token", 0.95)}


def llm_rows(shape: str, tokenizer_dir: Path, n_turns: int, tokens: int,
             extras: bool) -> list[Row]:
    import torch

    from engines.llm.cuda_graphs import GraphDecoder, Sampling
    from engines.llm.local import TransformersLLM

    prompt = PromptBuilder.for_persona("companion", "Ava")
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(dir="/tmp") as root:
        start = time.perf_counter()
        model_dir = random_model(shape, tokenizer_dir, Path(root))
        made = time.perf_counter() - start
        start = time.perf_counter()
        llm = TransformersLLM(str(model_dir), device="cuda", precision="bf16", prompt=prompt,
                              temperature=0.0, repetition_penalty=1.05)
        loaded = time.perf_counter() - start
        chunk = first_chunk_tokens(llm.tokenizer)
        rows.append({"name": f"LLM {shape} set-up", "value": (
            f"random weights made and saved {made:.1f} s; engine load + graph capture + "
            f"warm-up {loaded:.1f} s; first chunk = {chunk} tokens; GPU memory "
            f"{torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")})
        label = f"LLM {shape} bf16, CUDA graphs, greedy"
        rows.append(turn_row(label, asyncio.run(turns(llm, n_turns, tokens, chunk))))
        if extras:
            llm._temperature = 0.7  # noqa: SLF001 - the same engine, sampling on the GPU
            rows.append(turn_row(f"LLM {shape} bf16, CUDA graphs, sampling (t 0.7, top-p 0.9)",
                                 asyncio.run(turns(llm, 6, tokens, chunk))))
            llm._temperature = 0.0  # noqa: SLF001
            rows += decoder_checks(llm, GraphDecoder, Sampling, tokens)
        llm.close()
        if extras:
            eager = TransformersLLM(str(model_dir), device="cuda", precision="bf16",
                                    prompt=prompt, temperature=0.0, cuda_graphs=False)
            rows.append(turn_row(f"LLM {shape} bf16, eager (DynamicCache)",
                                 asyncio.run(turns(eager, 3, 32, chunk))))
            rows.append(dynamic_cache_check(eager))
            eager.close()
        del llm
        torch.cuda.empty_cache()
    return rows


def decoder_checks(llm: Any, decoder_type: Any, sampling_type: Any, tokens: int) -> list[Row]:
    """Graph replay vs the same step run eagerly (tokens, after the same eager prefill of a
    prompt longer than any prefill graph), a captured prefill vs an eager one (logits), and
    the eager step on the main thread vs on the engine's decode thread (ms/token)."""
    import torch

    history = [m for q in QUESTIONS[:4] for m in (ChatMessage("user", q),
                                                  ChatMessage("assistant", REPLY))]
    ids = llm.prompt_ids([*history, ChatMessage("user", QUESTIONS[5])])
    graph = llm.graph_decoder
    eager = decoder_type(llm.model, graph.buckets, graphs=False)  # same cache, same strides
    eager.prepare()
    greedy = sampling_type(repetition_penalty=1.05)
    rows: list[Row] = []

    def on_decode_thread(fn: Any) -> Any:
        return llm._thread.call(fn)  # noqa: SLF001 - the decoder belongs to that thread

    graph.reset()
    a = on_decode_thread(lambda: list(graph.decode(ids, tokens, greedy)))
    b = list(eager.decode(ids, tokens, greedy))
    same = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), len(a))
    rows.append({"name": f"decode graph vs eager step, greedy tokens equal ({len(ids)}-token "
                         "prompt, same eager prefill)", "value": f"{same} of {len(a)}"})
    # The logits of the first decode step, and of the step where the tokens parted (same
    # inputs up to there): graph replay against the eager step.
    for k in sorted({1, max(same, 1)}):
        graph.reset()
        on_decode_thread(lambda k=k: list(graph.decode(ids, k + 1, greedy)))
        eager.reset()
        list(eager.decode(ids, k + 1, greedy))
        g_logits = on_decode_thread(lambda: graph._logits.clone())  # noqa: SLF001
        e_logits = eager._logits  # noqa: SLF001
        top2 = torch.topk(e_logits[0], 2).values
        rows.append({"name": f"decode step {k - 1} logits, graph vs eager",
                     "value": f"max abs diff {float((g_logits - e_logits).abs().max()):.4f} "
                              f"(logits up to {float(e_logits.abs().max()):.2f}); eager top-2 "
                              f"gap {float(top2[0] - top2[1]):.4f}"})
    short = llm.prompt_ids([ChatMessage("user", QUESTIONS[1])])
    split = len(short) - 20
    with torch.inference_mode():
        for d in (graph, eager):
            d.reset()
            list(d.decode(short[:split], 1, greedy))
        e = eager._prefill(short[split:], split, 1024)  # noqa: SLF001

    def captured() -> Any:
        with torch.inference_mode():
            return graph._prefill(short[split:], split, 1024).clone()  # noqa: SLF001

    g = on_decode_thread(captured)
    rows.append({"name": "captured 20-token prefill vs eager, max abs logit diff / max abs logit",
                 "value": f"{float((g - e).abs().max() / e.abs().max()):.4f}, first token "
                          f"{'equal' if int(g.argmax()) == int(e.argmax()) else 'differs'}"})
    for where, run in (("main thread", lambda fn: fn()), ("decode thread", on_decode_thread)):
        def step_ms() -> float:
            eager.reset()
            start = time.perf_counter()
            n = sum(1 for _ in eager.decode(ids, 24, greedy))
            return (time.perf_counter() - start) * 1e3 / n

        ms = min(run(step_ms) for _ in range(2))
        rows.append({"name": f"eager static step on the {where} (prefill included), ms/token",
                     "value": f"{ms:.1f}"})
    graph.reset()
    return rows


def dynamic_cache_check(eager_llm: Any) -> Row:
    """The eager DynamicCache path on its decode thread with no event loop running (against
    its `stream()` row): does the loop's presence slow the decode thread?"""
    messages = [ChatMessage("user", QUESTIONS[2])]

    def run() -> float:
        start = time.perf_counter()
        list(eager_llm._generate(messages, 24, (), None))  # noqa: SLF001
        times = eager_llm.last_token_times
        return (times[-1] - times[0]) / max(len(times) - 1, 1) * 1e3 if times else (
            time.perf_counter() - start) * 1e3

    ms = min(eager_llm._thread.call(run) for _ in range(2))  # noqa: SLF001
    return {"name": "eager DynamicCache path on its decode thread, no event loop, ms/token",
            "value": f"{ms:.1f}"}

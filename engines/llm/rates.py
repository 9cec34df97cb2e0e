"""How fast a GGUF runs here: prompt and decode tokens per second on llama.cpp, measured.

`measure_llama(model, threads, batch_threads)` loads the model (no persona, a small context),
evaluates a short prompt on `batch_threads` and decodes greedily on `threads`, as a turn does,
and returns the rates with the tokenizer's characters per token on a spoken answer. The
server's calibration (`rtc_server/calibration.py`) calls it per candidate model, so that what
it chooses rests on this machine's numbers, not on the machine the defaults were tuned on.
A few seconds per model; the model's pages stay in the OS cache for the real load.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from engines.llm.errors import ModelLoadError
from engines.llm.model_files import resolve_gguf
from engines.text.chunker import chunk_size

# A spoken question as a turn's prompt (about 40 tokens with the template's markup), and a
# spoken answer for the tokenizer's characters per token (what the voice reads per token).
_PROMPT = (
    "<|im_start|>system\nYou are a helpful assistant who answers in one or two short spoken "
    "sentences.<|im_end|>\n<|im_start|>user\nWhat time does the bank open on Saturday, and "
    "can I visit without an appointment?<|im_end|>\n<|im_start|>assistant\n"
)
ANSWER_TEXTS = {
    "en": (
        "Sure. The branch opens at nine on Saturday morning, and you can walk in without an "
        "appointment. If you need a mortgage adviser, it is best to book a time first."
    ),
    "zh": "当然可以。周六上午九点开门，不用预约也可以直接来。如果要咨询房贷，最好先预约时间。",
}


@dataclass(frozen=True)
class LlamaRates:
    prompt_tok_s: float  # prompt evaluation on `batch_threads`
    decode_tok_s: float  # greedy decoding on `threads`
    chars_per_token: float  # of a spoken answer in the measured language (`chunk_size` units)


def measure_llama(
    model: str | None, threads: int, batch_threads: int, language: str = "en",
    decode_tokens: int = 16,
) -> LlamaRates:
    """Load `model` (a bundled name or a .gguf path) and time a prompt and a greedy decode."""
    try:
        from llama_cpp import Llama
    except ImportError as exc:
        raise ModelLoadError("llama-cpp-python is not installed: pip install -e '.[llm]'") from exc
    path = resolve_gguf(model)
    try:
        llm = Llama(model_path=str(path), n_ctx=256, n_threads=threads,
                    n_threads_batch=batch_threads, n_batch=512, verbose=False)
    except (ValueError, RuntimeError, OSError) as exc:
        raise ModelLoadError(f"llama.cpp cannot load {path}: {exc}") from exc
    try:
        prompt = llm.tokenize(_PROMPT.encode(), add_bos=False, special=True)
        llm.eval(prompt[:4])  # the first evaluation pays llama.cpp's set-up: not a rate
        # The machine's own speed, not a neighbour's moment: the best of three prompts, the
        # median token (the live contention is the profile's arithmetic, not this one's).
        prompt_s = float("inf")
        for _ in range(3):
            llm.n_tokens = 0
            start = time.perf_counter()
            llm.eval(prompt)
            prompt_s = min(prompt_s, time.perf_counter() - start)
        token = llm.sample(temp=0.0)
        steps = []
        for _ in range(decode_tokens):
            start = time.perf_counter()
            llm.eval([token])
            token = llm.sample(temp=0.0)
            steps.append(time.perf_counter() - start)
        decode_s = statistics.median(steps) * decode_tokens
        text = ANSWER_TEXTS.get(language, ANSWER_TEXTS["en"])
        tokens = len(llm.tokenize(text.encode(), add_bos=False, special=False))
    finally:
        llm.close()
    return LlamaRates(
        prompt_tok_s=len(prompt) / prompt_s, decode_tok_s=decode_tokens / decode_s,
        chars_per_token=chunk_size(text) / max(tokens, 1),
    )

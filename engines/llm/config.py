"""LLM options: engine, model, persona, history budget, HTTP server, resilience.

Defaults are the embedded offline default: the local transformers engine on the bundled
Qwen2.5-Coder-0.5B-Instruct GGUF, the "companion" persona, and the resilience wrapper with a
holding phrase after 2 s without a first token.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LLMConfig:
    engine: str = "transformers"  # "transformers" (local) or "openai" (OpenAI-compatible HTTP)
    model: str | None = None  # HF model dir or .gguf file; None = bundled Qwen2.5-Coder 0.5B
    device: str = "auto"  # "auto" (cuda if available), "cpu" or "cuda"
    precision: str = "auto"  # "auto" (cpu: int8, cuda: fp16), "fp32", "bf16", "fp16", "int8"
    threads: int = 0  # torch CPU threads; 0 = all cores
    persona: str = "companion"  # "companion", "bank", "tutor" (see engines.llm.personas)
    system_prompt: str | None = None  # replaces the persona's prompt when set
    agent_name: str = "Ava"  # the name the personas introduce themselves with
    history_tokens: int = 1536  # token budget for system prompt + history + new user turn
    max_new_tokens: int = 160  # default answer length cap (the caller may pass less)
    temperature: float = 0.7  # 0 = greedy
    top_p: float = 0.9  # nucleus sampling
    repetition_penalty: float = 1.05  # small models loop without it
    seed: int | None = None  # fixed sampling seed (tests, benchmarks)
    base_url: str = "http://127.0.0.1:8000/v1"  # "openai" engine: server base URL
    api_model: str = "default"  # "openai" engine: model name sent to the server
    api_key: str | None = None  # "openai" engine: bearer token (None = none sent)
    connect_timeout_s: float = 3.0  # "openai" engine: TCP connect timeout
    read_timeout_s: float = 10.0  # "openai" engine: longest silence while streaming
    retries: int = 2  # "openai" engine: retries before the first token (not after)
    resilient: bool = True  # wrap the engine with holding phrase, apology and answer cache
    # "transformers" engine: run the model in its own process (see engines/llm/process.py:
    # in the server process the decode loop competes for the GIL with the WebRTC stack).
    process: bool = True
    first_token_deadline_s: float = 2.0  # say the holding phrase if no token by then
    holding_phrase: str = "Hmm, let me think about that."  # spoken at the deadline
    apology: str = "Sorry, I'm having trouble answering right now. Could you say that again?"
    answer_cache: str | None = None  # JSON file of frequent questions and their answers
    answer_cache_threshold: float = 88.0  # rapidfuzz score (0..100) to accept a cached answer

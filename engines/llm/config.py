"""LLM options: engine, model, persona and facts, history budget, HTTP server, resilience.

Defaults are the embedded offline default: llama.cpp on the bundled Qwen2.5-Coder-1.5B-Instruct
GGUF, the "companion" persona, and the resilience wrapper (holding phrase after 2 s without a
first token, apology after 12 s without an answer).
"""

from __future__ import annotations

from dataclasses import dataclass

from engines.llm.errors import InvalidInputError

ENGINES = ("llama-cpp", "transformers", "openai")


@dataclass(frozen=True)
class LLMConfig:
    engine: str = "llama-cpp"  # "llama-cpp" (local GGUF), "transformers" (GPU), "openai" (HTTP)
    # A bundled model ("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"), a .gguf file, or (for
    # "transformers") a Hugging Face model directory; None = qwen2.5-coder-1.5b.
    model: str | None = None
    # "transformers": "auto" (CUDA if torch sees a GPU, else the CPU; a GPU that cannot take
    # the model falls back to the CPU, logged), "cpu", "cuda" or "cuda:N" (GPU problems stop
    # start-up)
    device: str = "auto"
    precision: str = "auto"  # "transformers": "auto" (cpu int8, cuda bf16), fp32, bf16, fp16
    # CPU threads for decoding (llama.cpp; torch for "transformers"); 0 = all cores; None = the
    # server's [profile] derives it from the machine's cores (1 without a profile). One on
    # 2 cores: llama.cpp's threads wait for each other at every layer, and on 2 busy cores
    # (video, TTS) two threads fell to ~1 token/s while one kept ~20 (bench/RESULTS.md).
    threads: int | None = None
    # "llama-cpp": threads for prompt evaluation, a short burst per turn (2 halved the first
    # token on 2 cores; bench/RESULTS.md); 0 = as `threads`; None = the profile's (all the
    # cores; 2 without a profile).
    batch_threads: int | None = None
    # "llama-cpp": the first tokens of every answer decode on `batch_threads` too (~4 tokens
    # make the first speakable chunk; until it is cut no TTS runs, so the cores are free:
    # 30 ms a token with 2 threads against 48 with 1 here, idle). Past it the TTS needs a
    # core: with 6 the first chunk's synthesis took 117-150 ms live, with 4 109-111 ms
    # (bench/RESULTS.md, voice_to_voice); 0 = all on `threads`; None = 4.
    burst_tokens: int | None = None
    # KV cache size (prompt + answer). "transformers" on CUDA: the static cache, with a captured
    # decode step for a quarter, a half and all of it (engines/llm/cuda_graphs.py)
    context_tokens: int = 4096
    cuda_graphs: bool = True  # "transformers" on CUDA: graph-captured decoding (else eager)
    # "transformers": decode up to this many streams together, one row each of one static KV
    # cache, one step for all (engines/llm/batch_graphs.py); 0 = one stream at a time, streams
    # asking together taking turns. For a GPU (on the CPU it runs eagerly: tests)
    batch_streams: int = 0
    persona: str = "companion"  # "companion", "bank", "tutor" (see engines.llm.personas)
    # The personas' language: "en", or "zh" (Chinese prompts and example knowledge files,
    # engines.llm.personas_zh; set by `[conversation] language`)
    language: str = "en"
    system_prompt: str | None = None  # replaces the persona's prompt when set
    agent_name: str = "Ava"  # the name the personas introduce themselves with
    # The deployment's facts (Markdown or text); None = the persona's example file (bank,
    # tutor), "" = none. Up to 8,000 characters sit in the cached prompt; larger files (up
    # to 2 MiB) are searched per question (BM25).
    knowledge: str | None = None
    # The deployment's tools (a TOML or JSON file, engines/tools/spec.py; docs/tools.md): the
    # agent may call them, confirmed by the user where marked; None = no tools
    tools: str | None = None
    # Stop an answer at a figure (amount, rate, time, phone number) that neither the facts nor
    # the conversation hold, and say the persona's "I don't have that information" instead;
    # None = the persona's default (on for bank).
    known_figures_only: bool | None = None
    history_tokens: int = 1536  # token budget for the conversation after the system prompt
    max_new_tokens: int = 160  # default answer length cap (the caller may pass less)
    temperature: float | None = None  # None = the persona's (bank 0, tutor 0.3, companion 0.7)
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
    # Say the holding phrase if no token came by then; None = the profile's (three times the
    # first token it expects on this machine, at least 1.5 s; 2.0 without a profile)
    first_token_deadline_s: float | None = None
    answer_deadline_s: float = 12.0  # give up (apology) if the answer has not begun by then
    stall_timeout_s: float = 5.0  # end an answer whose next token does not come for this long
    holding_phrase: str = "Hmm, let me think about that."  # spoken at the deadline
    # Said when the engine fails (or answers nothing) before the answer has begun
    apology: str = "Sorry, I'm having trouble answering right now. Could you say that again?"
    answer_cache: str | None = None  # JSON file of frequent questions and their answers
    answer_cache_threshold: float = 88.0  # rapidfuzz score (0..100) to accept a cached answer
    # Benchmarks only ("transformers"): a JSON list of {question, answer}; every step runs the
    # model, the token emitted is the written answer's next (timing-equivalent decoding for
    # random weights, engines/llm/forced.py). Never set it for a real conversation.
    forced_answers: str | None = None

    def __post_init__(self) -> None:
        if self.language not in ("en", "zh"):
            raise InvalidInputError(f"unknown llm language {self.language!r} (en, zh)")
        if self.engine not in ENGINES:
            raise InvalidInputError(f"unknown llm engine {self.engine!r} ({', '.join(ENGINES)})")
        if min(self.threads or 0, self.batch_threads or 0, self.burst_tokens or 0) < 0:
            raise InvalidInputError("threads, batch_threads and burst_tokens must be >= 0")
        if self.context_tokens < 512 or self.history_tokens < 64:
            raise InvalidInputError("context_tokens >= 512, history_tokens >= 64")
        if self.batch_streams < 0 or self.batch_streams > 64:
            raise InvalidInputError("batch_streams must be 0..64")
        if self.batch_streams and self.engine != "transformers":
            raise InvalidInputError("batch_streams is for the transformers engine only")
        if self.forced_answers and self.engine != "transformers":
            raise InvalidInputError("forced_answers is for the transformers engine only")
        if self.max_new_tokens < 1:
            raise InvalidInputError("max_new_tokens must be >= 1")
        if self.temperature is not None and self.temperature < 0:
            raise InvalidInputError("temperature must be >= 0")
        for name in ("first_token_deadline_s", "answer_deadline_s", "stall_timeout_s"):
            if (getattr(self, name) or 1.0) <= 0:
                raise InvalidInputError(f"{name} must be > 0")

    # Without a profile (a bare engine, the CLIs, tests), the values measured on 2 cores.
    @property
    def decode_threads(self) -> int:
        return 1 if self.threads is None else self.threads

    @property
    def prompt_threads(self) -> int:
        return 2 if self.batch_threads is None else self.batch_threads

    @property
    def burst(self) -> int:
        return 4 if self.burst_tokens is None else self.burst_tokens

    @property
    def first_token_deadline(self) -> float:
        return 2.0 if self.first_token_deadline_s is None else self.first_token_deadline_s

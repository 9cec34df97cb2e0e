"""LLM engines: chat messages in, streamed text deltas out (an async iterator).

`create_llm(config)` builds the configured engine ("llama-cpp" local default, "transformers"
for GPUs, or "openai" for an OpenAI-compatible HTTP server) with the persona's prompt and the
deployment's facts, wrapped in `ResilientLLM` unless `config.resilient` is False. Heavy
packages load lazily inside the engine modules.
"""

from __future__ import annotations

from engines.llm.base import ChatLLM, ChatMessage
from engines.llm.config import LLMConfig
from engines.llm.grounding import GroundedLLM
from engines.llm.personas import persona
from engines.llm.prompt import PromptBuilder
from engines.llm.resilience import AnswerCache, Notice, ResilientLLM
from engines.llm.tool_calls import ToolCallsLLM
from engines.tools.spec import ToolSet

__all__ = [
    "ChatLLM", "ChatMessage", "LLMConfig", "Notice", "PromptBuilder", "ResilientLLM",
    "build_engine", "create_llm", "load_tools", "temperature_of",
]


def temperature_of(config: LLMConfig) -> float:
    """The configured temperature, or the persona's default (greedy for the bank)."""
    default = persona(config.persona, config.language).temperature
    return default if config.temperature is None else config.temperature


def load_tools(config: LLMConfig) -> ToolSet | None:
    """The deployment's tools (`[llm] tools`), checked now: a bad file stops start-up, named."""
    return ToolSet.load(config.tools) if config.tools else None


def build_prompt(config: LLMConfig) -> PromptBuilder:
    """Persona, facts and tools (loaded and checked now: a bad file stops start-up, named)."""
    return PromptBuilder.for_persona(
        config.persona, config.agent_name, config.knowledge, config.system_prompt,
        language=config.language, tools=load_tools(config),
    )


def build_engine(config: LLMConfig, prompt: PromptBuilder | None = None) -> ChatLLM:
    """The bare engine of `config` (no figure check, no resilience wrapper)."""
    prompt = prompt or build_prompt(config)
    temperature = temperature_of(config)
    if config.engine == "llama-cpp":
        from engines.llm.llama import LlamaCppLLM

        return LlamaCppLLM(
            config.model, prompt=prompt, threads=config.decode_threads,
            batch_threads=config.prompt_threads, burst_tokens=config.burst,
            context_tokens=config.context_tokens,
            history_tokens=config.history_tokens, temperature=temperature, top_p=config.top_p,
            repetition_penalty=config.repetition_penalty, seed=config.seed,
        )
    if config.engine == "transformers":
        from engines.llm.local import TransformersLLM

        return TransformersLLM(
            config.model, device=config.device, precision=config.precision,
            threads=config.decode_threads, prompt=prompt, history_tokens=config.history_tokens,
            context_tokens=config.context_tokens, cuda_graphs=config.cuda_graphs,
            temperature=temperature, top_p=config.top_p,
            repetition_penalty=config.repetition_penalty, seed=config.seed,
            forced_answers=config.forced_answers, batch_streams=config.batch_streams,
        )
    from engines.llm.openai_http import OpenAIChatLLM

    return OpenAIChatLLM(
        config.base_url, prompt=prompt, model=config.api_model, api_key=config.api_key,
        history_tokens=config.history_tokens, temperature=temperature, top_p=config.top_p,
        seed=config.seed, connect_timeout_s=config.connect_timeout_s,
        read_timeout_s=config.read_timeout_s, retries=config.retries,
    )


def create_llm(config: LLMConfig | None = None) -> ChatLLM:
    """Build (and load) the configured chat engine: checked for unknown figures when the
    persona asks for it (`GroundedLLM`), wrapped in `ResilientLLM` unless `config.resilient`
    is off."""
    config = config or LLMConfig()
    prompt = build_prompt(config)
    engine = build_engine(config, prompt)
    if config.tools:  # innermost: a call's digits are not an answer's figures
        engine = ToolCallsLLM(engine)
    p = persona(config.persona, config.language)
    only_known = p.known_figures_only if config.known_figures_only is None else (
        config.known_figures_only)
    if only_known and prompt.facts:
        engine = GroundedLLM(engine, prompt.facts, p.unknown)
    if not config.resilient:
        return engine
    cache = (
        AnswerCache.load(config.answer_cache, config.answer_cache_threshold)
        if config.answer_cache
        else None
    )
    return ResilientLLM(
        engine, first_token_deadline_s=config.first_token_deadline,
        answer_deadline_s=config.answer_deadline_s, stall_timeout_s=config.stall_timeout_s,
        holding_phrase=config.holding_phrase, apology=config.apology, answer_cache=cache,
    )

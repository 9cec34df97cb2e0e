"""LLM engines: chat messages in, streamed text deltas out.

`create_llm(config)` builds the configured engine ("transformers" local default, or "openai"
for an OpenAI-compatible HTTP server) with the configured persona, wrapped in `ResilientLLM`
unless `config.resilient` is False. Heavy packages load lazily inside the engine modules.
"""

from __future__ import annotations

import functools

from engines.llm.base import ChatLLM, ChatMessage
from engines.llm.config import LLMConfig
from engines.llm.errors import InvalidInputError
from engines.llm.personas import system_prompt
from engines.llm.resilience import AnswerCache, Notice, ResilientLLM

__all__ = [
    "ChatLLM", "ChatMessage", "LLMConfig", "Notice", "ResilientLLM", "build_engine", "close_llm",
    "create_llm",
]


def build_engine(config: LLMConfig) -> ChatLLM:
    """The bare engine of `config` in this process (no resilience wrapper, no child process)."""
    prompt = config.system_prompt or system_prompt(config.persona, config.agent_name)
    if config.engine == "transformers":
        from engines.llm.local import TransformersLLM

        return TransformersLLM(
            config.model, device=config.device, precision=config.precision,
            threads=config.threads, system_prompt=prompt, history_tokens=config.history_tokens,
            temperature=config.temperature, top_p=config.top_p,
            repetition_penalty=config.repetition_penalty, seed=config.seed,
        )
    if config.engine == "openai":
        from engines.llm.openai_http import OpenAIChatLLM

        return OpenAIChatLLM(
            config.base_url, model=config.api_model, api_key=config.api_key,
            system_prompt=prompt, history_tokens=config.history_tokens,
            temperature=config.temperature, top_p=config.top_p,
            connect_timeout_s=config.connect_timeout_s, read_timeout_s=config.read_timeout_s,
            retries=config.retries,
        )
    raise InvalidInputError(f"unknown llm engine {config.engine!r} (transformers, openai)")


def create_llm(config: LLMConfig | None = None) -> ChatLLM:
    """Build (and load) the configured chat engine: a local model in its own process unless
    `config.process` is off, wrapped in `ResilientLLM` unless `config.resilient` is off."""
    config = config or LLMConfig()
    if config.engine not in ("transformers", "openai"):
        raise InvalidInputError(f"unknown llm engine {config.engine!r} (transformers, openai)")
    engine: ChatLLM
    if config.engine == "transformers" and config.process:
        from engines.llm.process import ProcessLLM

        engine = ProcessLLM(functools.partial(build_engine, config))
    else:
        engine = build_engine(config)
    if not config.resilient:
        return engine
    cache = (
        AnswerCache.load(config.answer_cache, config.answer_cache_threshold)
        if config.answer_cache
        else None
    )
    return ResilientLLM(
        engine, first_token_deadline_s=config.first_token_deadline_s,
        holding_phrase=config.holding_phrase, apology=config.apology, answer_cache=cache,
    )


def close_llm(llm: ChatLLM) -> None:
    """Release what an engine holds (a child process); a no-op for engines without one."""
    while llm is not None:
        close = getattr(llm, "close", None)
        if close is not None:
            close()
            return
        llm = getattr(llm, "inner", None)  # type: ignore[assignment]

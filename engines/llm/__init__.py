"""LLM engines: chat messages in, streamed text deltas out.

`create_llm(config)` builds the configured engine ("transformers" local default, or "openai"
for an OpenAI-compatible HTTP server) with the configured persona, wrapped in `ResilientLLM`
unless `config.resilient` is False. Heavy packages load lazily inside the engine modules.
"""

from __future__ import annotations

from engines.llm.base import ChatLLM, ChatMessage
from engines.llm.config import LLMConfig
from engines.llm.errors import InvalidInputError
from engines.llm.personas import system_prompt
from engines.llm.resilience import AnswerCache, Notice, ResilientLLM

__all__ = ["ChatLLM", "ChatMessage", "LLMConfig", "Notice", "ResilientLLM", "create_llm"]


def create_llm(config: LLMConfig | None = None) -> ChatLLM:
    """Build (and load) the configured chat engine."""
    config = config or LLMConfig()
    prompt = config.system_prompt or system_prompt(config.persona, config.agent_name)
    engine: ChatLLM
    if config.engine == "transformers":
        from engines.llm.local import TransformersLLM

        engine = TransformersLLM(
            config.model, device=config.device, precision=config.precision,
            threads=config.threads, system_prompt=prompt, history_tokens=config.history_tokens,
            temperature=config.temperature, top_p=config.top_p,
            repetition_penalty=config.repetition_penalty, seed=config.seed,
        )
    elif config.engine == "openai":
        from engines.llm.openai_http import OpenAIChatLLM

        engine = OpenAIChatLLM(
            config.base_url, model=config.api_model, api_key=config.api_key,
            system_prompt=prompt, history_tokens=config.history_tokens,
            temperature=config.temperature, top_p=config.top_p,
            connect_timeout_s=config.connect_timeout_s, read_timeout_s=config.read_timeout_s,
            retries=config.retries,
        )
    else:
        raise InvalidInputError(f"unknown llm engine {config.engine!r} (transformers, openai)")
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

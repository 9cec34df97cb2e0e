"""Chat LLM contract: stream the answer to a list of chat messages as text deltas.

`stream()` is an async iterator: the LLM is the one streaming engine, and an answer must
reach the event loop token by token with exactly one hop from wherever the decode runs (a
thread or a child process; see `engines/llm/decode_thread.py`) and no polling. Leaving the
loop, closing the iterator or cancelling the consuming task stops the generation within one
token. Engines raise `engines.llm.errors` types.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    content: str


class ChatLLM(Protocol):
    def stream(
        self, messages: Sequence[ChatMessage], *, max_new_tokens: int, stop: Sequence[str] = ()
    ) -> AsyncIterator[str]: ...

    def warm(self, messages: Sequence[ChatMessage]) -> None:
        """A hint: `messages` ends with the user's words so far (a partial transcript, or ""
        when they have just begun to speak). An engine with a prompt cache may evaluate that
        prefix now, off the critical path, so the final prompt only prefills what changed;
        others do nothing. Never blocks."""
        ...

    def close(self) -> None:
        """Release what the engine holds (threads, a child process). Idempotent."""
        ...


async def close_stream(stream: AsyncIterator[str]) -> None:
    """Close a stream of deltas (an async generator: its generation stops)."""
    close = getattr(stream, "aclose", None)
    if close is not None:
        await close()


class LLMWrapper:
    """Base of the wrappers that change what a `ChatLLM` says (resilience, grounding): the
    wrapped engine gets the `warm` hints and the `close`; a subclass writes `stream`."""

    def __init__(self, inner: ChatLLM) -> None:
        self.inner = inner

    def warm(self, messages: Sequence[ChatMessage]) -> None:
        self.inner.warm(messages)

    def close(self) -> None:
        self.inner.close()

"""Chat LLM contract: stream text deltas for a list of chat messages.

Synchronous by design (engines never import asyncio): `stream()` is a generator run on a
worker thread by the server; setting `cancel` (or closing the generator) stops it within one
token.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    content: str


class ChatLLM(Protocol):
    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_new_tokens: int,
        stop: Sequence[str] = (),
        cancel: threading.Event | None = None,
    ) -> Iterator[str]: ...

"""Bounded chat history: keep the system prompt and the newest turns within a token budget.

`fit_history(messages, count_tokens, budget)` returns the messages to send: the system message
(if any) always, the last message always (shortened from its start if it alone is too long),
and as many of the newest earlier messages as fit, dropped oldest first in whole user/assistant
pairs so the model never sees an answer without its question.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from engines.llm.base import ChatMessage
from engines.llm.errors import InvalidInputError

# Chat templates add a few tokens per message (role markers): ChatML's "<|im_start|>role\n"
# and "<|im_end|>\n" are 5.
PER_MESSAGE_OVERHEAD = 5


def approx_tokens(text: str) -> int:
    """Rough token count for engines without a local tokenizer (~4 characters per token)."""
    return len(text) // 4 + 1


def fit_history(
    messages: Sequence[ChatMessage], count_tokens: Callable[[str], int], budget: int
) -> list[ChatMessage]:
    """Trim `messages` to fit `budget` tokens (see the module docstring)."""
    if not messages:
        raise InvalidInputError("no messages")
    if budget <= 0:
        raise InvalidInputError(f"history budget must be > 0, got {budget}")
    system = [m for m in messages[:1] if m.role == "system"]
    rest = list(messages[len(system) :])
    if not rest:
        return system

    def cost(m: ChatMessage) -> int:
        return count_tokens(m.content) + PER_MESSAGE_OVERHEAD

    left = budget - sum(cost(m) for m in system)
    last = rest[-1]
    if cost(last) > left:
        # Keep the end of an overlong last message: its question is usually at the end.
        keep = max(left - PER_MESSAGE_OVERHEAD, 1)
        text = last.content
        while text and count_tokens(text) > keep:
            text = text[max(1, len(text) // 8) :]
        return [*system, ChatMessage(last.role, text)]
    left -= cost(last)
    kept: list[ChatMessage] = [last]
    earlier = rest[:-1]
    i = len(earlier)
    while i > 0:
        # Step back over one assistant answer together with the user turn before it.
        j = i - 1
        if earlier[j].role == "assistant" and j > 0 and earlier[j - 1].role == "user":
            j -= 1
        block = earlier[j:i]
        block_cost = sum(cost(m) for m in block)
        if block_cost > left:
            break
        left -= block_cost
        kept[:0] = block
        i = j
    return [*system, *kept]

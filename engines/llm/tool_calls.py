"""Tool calls out of the answer stream: the model's call is never spoken.

`ToolCallsLLM` wraps the bare engine (inside the figure check and the resilience wrapper, so
a call's digits are not judged as an answer's figures). An answer that begins with a call
(`<tool_call>`, or a bare `{` as small models write it) is held, not passed on (a `Notice`
of kind `"tool_start"` says it has begun: the agent starts its bridge phrase then, while the
rest is decoded, and no holding phrase covers a call); while it is held, each token decoded
passes on as an empty `Notice` of kind `"tool_progress"`, so a stall timer outside sees a
slow call being written, not a stalled engine; when the call is complete a `Notice`
of kind `"tool_call"` carries its text and the generation stops: one call per answer,
whatever the model would write next. An answer that begins with anything else
streams as it always did, without delay after its first characters.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence

from engines.llm.base import ChatMessage, LLMWrapper, close_stream
from engines.llm.resilience import Notice
from engines.tools.calls import parse_call

_OPENERS = ("<tool_call>", "<tool", "{")


def _may_open(text: str) -> bool:
    """Whether `text` (the answer so far, stripped) is or may become a call's opening."""
    return any(text.startswith(o) or o.startswith(text) for o in _OPENERS)


class ToolCallsLLM(LLMWrapper):
    async def stream(
        self, messages: Sequence[ChatMessage], *, max_new_tokens: int, stop: Sequence[str] = ()
    ) -> AsyncGenerator[str, None]:
        deltas = aiter(self.inner.stream(messages, max_new_tokens=max_new_tokens, stop=stop))
        held = ""
        mode: str | None = None  # None: not known yet; "text"; "call"
        try:
            async for delta in deltas:
                if isinstance(delta, Notice) or mode == "text":
                    yield delta
                    continue
                held += delta
                if mode is None:
                    start = held.lstrip()
                    if start.startswith(_OPENERS):
                        mode = "call"
                        # Text for whoever times the first token (the resilience wrapper's
                        # holding phrase): the answer has begun, as a call.
                        yield Notice("<tool_call>", "tool_start")
                    elif start and not _may_open(start):
                        mode = "text"  # an answer in words: what was held, then straight on
                        out, held = held, ""
                        yield out
                        continue
                    else:
                        continue  # nothing yet, or "<tool_c": not known yet
                if "</tool_call>" in held or "</tools>" in held or (
                    held.rstrip().endswith("}") and parse_call(held) is not None
                ):
                    break  # one call per answer: the generation stops here
                if mode == "call":
                    yield Notice("", "tool_progress")
            if mode == "call":
                yield Notice(held.strip(), "tool_call")
            elif held:
                yield held
        finally:
            await close_stream(deltas)

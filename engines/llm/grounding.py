"""No invented figures: an answer may only state numbers the facts or the conversation hold.

A small model asked about a fee its facts do not list will often make one up ("a safe deposit
box costs between £100 and £500"). For a bank that is worse than no answer, so `GroundedLLM`
watches the stream: text is passed on at once, except from the first digit of a figure until
the figure ends (a few tokens). A figure (a phone number, an amount, a rate, a time) that is
neither in the deployment's facts nor anywhere in the conversation so far stops the answer
there; the persona's "I don't have that information" line (a `Notice` of kind "unknown")
replaces the rest. Times also match in their short and 12-hour forms ("13:00" allows "13"
and "1"), amounts without thousands separators ("10,000" allows "10000").

It cannot tell a known figure used for the wrong thing (a fee quoted as an interest rate);
the prompt's rules and examples are the defence there.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, Sequence

from engines.llm.base import ChatLLM, ChatMessage, LLMWrapper
from engines.llm.resilience import Notice

# Digit groups joined by single spaces are one figure (phone numbers: "0800 123 4567").
_FIGURE = re.compile(r"\d(?:[\d,.:]*\d)?(?: \d(?:[\d,.:]*\d)?)*")
_TIME = re.compile(r"(\d{1,2}):(\d{2})")


def figures(text: str) -> set[str]:
    """The figures `text` states, in comparable forms (see the module docstring)."""
    found: set[str] = set()
    for raw in _FIGURE.findall(text):
        figure = raw.replace(",", "").replace(" ", "").rstrip(".")
        found.add(figure)
        time = _TIME.fullmatch(raw)
        if time is not None:
            hour, minute = int(time.group(1)), time.group(2)
            found.add(str(hour))
            if hour > 12:
                found.add(str(hour - 12))
                found.add(f"{hour - 12}:{minute}")
    return found


def _figure_may_continue(text: str) -> bool:
    """The text ends inside a figure, or right after one where a next group may follow."""
    return bool(re.search(r"\d[\d,.:]*[,.:]?$|\d \Z", text))


class GroundedLLM(LLMWrapper):
    """A `ChatLLM` that never states a figure it was not given (see the module docstring)."""

    def __init__(self, inner: ChatLLM, facts: str, unknown: str) -> None:
        super().__init__(inner)
        self._known = figures(facts)
        self._unknown = unknown.strip() + " "

    async def stream(
        self, messages: Sequence[ChatMessage], *, max_new_tokens: int, stop: Sequence[str] = ()
    ) -> AsyncGenerator[str, None]:
        allowed = self._known | figures(" ".join(m.content for m in messages))
        deltas = aiter(self.inner.stream(messages, max_new_tokens=max_new_tokens, stop=stop))
        held = ""
        try:
            async for delta in deltas:
                if isinstance(delta, Notice):  # made up by a wrapper: already safe to say
                    yield delta
                    continue
                held += delta
                if _figure_may_continue(held):
                    continue
                if figures(held) - allowed:
                    yield Notice(self._unknown, "unknown")
                    return
                out, held = held, ""
                yield out
            if held and figures(held) - allowed:
                yield Notice(self._unknown, "unknown")
            elif held:
                yield held
        finally:
            close = getattr(deltas, "aclose", None)
            if close is not None:
                await close()

"""Stop strings for streamed text: cut the answer before the first stop string.

Text that could be the start of a stop string is held back until the next delta tells.
`until_stop(deltas, stop)` is how every engine applies them to its stream: at the stop string
it closes the stream it reads (a decode thread stops at its next token, a connection closes).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing


class StopFilter:
    """Feed deltas; get back the text safe to emit, and whether a stop string was hit."""

    def __init__(self, stops: Sequence[str]) -> None:
        self._stops = tuple(s for s in stops if s)
        self._held = ""
        self.stopped = False

    def feed(self, delta: str) -> str:
        if self.stopped:
            return ""
        if not self._stops:
            return delta
        text = self._held + delta
        cut = min((i for i in (text.find(s) for s in self._stops) if i >= 0), default=-1)
        if cut >= 0:
            self.stopped = True
            self._held = ""
            return text[:cut]
        # Hold back the longest tail that is a prefix of some stop string.
        hold = 0
        for s in self._stops:
            for k in range(min(len(s) - 1, len(text)), 0, -1):
                if text.endswith(s[:k]):
                    hold = max(hold, k)
                    break
        self._held = text[len(text) - hold :] if hold else ""
        return text[: len(text) - hold]

    def flush(self) -> str:
        """End of stream: release held-back text (it was not a stop string after all)."""
        held, self._held = self._held, ""
        return "" if self.stopped else held


async def until_stop(
    deltas: AsyncGenerator[str, None], stop: Sequence[str]
) -> AsyncGenerator[str, None]:
    """The text of `deltas` up to the first of `stop` (see the module docstring)."""
    stops = StopFilter(stop)
    async with aclosing(deltas):
        async for delta in deltas:
            if text := stops.feed(delta):
                yield text
            if stops.stopped:
                return
    if tail := stops.flush():
        yield tail

"""Portraits uploaded from the page: checked, fitted (68 landmarks, warp mesh) once, and kept
in a small LRU shared by sessions, keyed by the image's hash so a re-upload costs nothing."""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from engines.errors import EngineError
from rtc_server.errors import PortraitRejected, UnknownPortrait


class PortraitStore:
    def __init__(
        self,
        build: Callable[[bytes], Any] | None,
        executor: Executor | None,
        capacity: int = 8,
    ) -> None:
        """`build(data) -> renderer` does the blocking work; None refuses uploads (echo mode)."""
        self._build = build
        self._executor = executor
        self._capacity = capacity
        self._renderers: OrderedDict[str, Any] = OrderedDict()

    async def add_portrait(self, data: bytes) -> str:
        if self._build is None:
            raise PortraitRejected("portrait uploads need the agent mode (--mode agent)")
        portrait_id = hashlib.sha256(data).hexdigest()[:24]
        if portrait_id in self._renderers:
            self._renderers.move_to_end(portrait_id)
            return portrait_id
        loop = asyncio.get_running_loop()
        try:
            renderer = await loop.run_in_executor(self._executor, self._build, data)
        except EngineError as exc:  # no face, several faces, not an image, too small...
            raise PortraitRejected(str(exc)) from exc
        self._renderers[portrait_id] = renderer
        while len(self._renderers) > self._capacity:
            self._renderers.popitem(last=False)
        return portrait_id

    def get(self, portrait_id: str) -> Any:
        try:
            self._renderers.move_to_end(portrait_id)
            return self._renderers[portrait_id]
        except KeyError:
            raise UnknownPortrait(f"no portrait {portrait_id!r}: upload it again") from None

"""Session-owned tasks: every task is named, tracked, logged on failure and cancelled on close.

Replaces bare `create_task` (whose tasks can be garbage-collected mid-flight and whose errors
vanish). `cancel_all()` cancels with a timeout and never swallows the caller's own cancel.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
logger = logging.getLogger(__name__)


class TaskSet:
    def __init__(self, owner: str) -> None:
        self._owner = owner
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, name: str, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        task = asyncio.get_running_loop().create_task(coro, name=f"{self._owner}:{name}")
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            logger.error(
                "task failed", exc_info=exc, extra={"task": task.get_name(), "owner": self._owner}
            )

    async def cancel_all(
        self, grace_s: float = 2.0, *, keep: asyncio.Task[Any] | None = None
    ) -> None:
        """Cancel every task (except `keep`, typically the caller) and wait up to `grace_s`."""
        tasks = [t for t in self._tasks if t is not keep and not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace_s)
            for task in pending:
                logger.warning("task did not stop in time", extra={"task": task.get_name()})

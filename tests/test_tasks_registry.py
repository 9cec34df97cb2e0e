"""TaskSet and SessionRegistry: no task or slot outlives its owner."""

from __future__ import annotations

import asyncio

import pytest

from rtc_server.tasks import TaskSet
from signaling.errors import AtCapacity, SessionNotFound
from signaling.registry import SessionRegistry


class FakeSession:
    def __init__(self, session_id: str, closed: bool = False) -> None:
        self._id, self._closed = session_id, closed

    @property
    def id(self) -> str:
        return self._id

    @property
    def closed(self) -> bool:
        return self._closed

    async def close(self) -> None:
        self._closed = True


async def test_cancel_all_stops_tasks_but_not_the_caller() -> None:
    tasks = TaskSet("t")
    started = asyncio.Event()

    async def forever() -> None:
        started.set()
        await asyncio.Event().wait()

    async def closer() -> str:
        await tasks.cancel_all(keep=asyncio.current_task())
        return "done"

    loop_task = tasks.spawn("loop", forever())
    await started.wait()
    result = await tasks.spawn("close", closer())
    assert result == "done" and loop_task.cancelled()
    assert len(tasks) == 0


async def test_failed_task_is_logged_with_its_name(caplog: pytest.LogCaptureFixture) -> None:
    tasks = TaskSet("owner")

    async def boom() -> None:
        raise RuntimeError("kaput")

    task = tasks.spawn("boom", boom())
    with pytest.raises(RuntimeError):
        await task
    await asyncio.sleep(0)
    assert any(getattr(r, "task", "") == "owner:boom" for r in caplog.records)


async def test_registry_caps_reservations_and_releases_on_failure() -> None:
    registry = SessionRegistry(max_sessions=1)
    with pytest.raises(RuntimeError):
        async with registry.reserve():
            with pytest.raises(AtCapacity):  # the pending reservation counts
                async with registry.reserve():
                    pass
            raise RuntimeError("set-up failed")
    assert registry.pending == 0 and len(registry) == 0
    async with registry.reserve() as slot:
        slot.commit(FakeSession(slot.session_id))
    assert len(registry) == 1
    registry.discard(slot.session_id)
    with pytest.raises(SessionNotFound):
        registry.get(slot.session_id)


async def test_session_closed_during_setup_is_not_registered() -> None:
    """Regression: a session that closed itself before commit must not leak into the registry."""
    registry = SessionRegistry(max_sessions=2)
    async with registry.reserve() as slot:
        slot.commit(FakeSession(slot.session_id, closed=True))
    assert len(registry) == 0

"""The live sessions of one server, with a hard cap on how many run at once.

A slot is reserved *before* the (slow) peer connection set-up, so concurrent offers cannot
overshoot the cap; the reservation is released if set-up fails or the request is cancelled.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Protocol

from signaling.errors import AtCapacity, SessionExists, SessionNotFound


class PeerSession(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def closed(self) -> bool: ...

    async def close(self) -> None: ...


class Reservation:
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.session: PeerSession | None = None

    def commit(self, session: PeerSession) -> None:
        self.session = session


class SessionRegistry:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[str, PeerSession] = {}
        self._reserved: set[str] = set()

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[PeerSession]:
        return iter(list(self._sessions.values()))

    @property
    def pending(self) -> int:
        return len(self._reserved)

    @asynccontextmanager
    async def reserve(self, session_id: str | None = None) -> AsyncIterator[Reservation]:
        """Hold a slot while a session is set up; it becomes live on `commit()`.

        `session_id` is chosen by the caller when a cluster gateway already named the session
        (it must be new here); otherwise a random one is made.
        """
        if len(self._sessions) + len(self._reserved) >= self.max_sessions:
            raise AtCapacity(f"server is at capacity ({self.max_sessions} sessions)")
        if session_id is None:
            session_id = secrets.token_urlsafe(12)
        elif session_id in self._sessions or session_id in self._reserved:
            raise SessionExists(f"session {session_id!r} already exists")
        self._reserved.add(session_id)
        reservation = Reservation(session_id)
        try:
            yield reservation
            session = reservation.session
            if session is not None and not session.closed:
                self._sessions[session_id] = session
        finally:
            self._reserved.discard(session_id)

    def get(self, session_id: str) -> PeerSession:
        try:
            return self._sessions[session_id]
        except KeyError:
            raise SessionNotFound(f"no session {session_id!r}") from None

    def discard(self, session_id: str) -> None:
        """Forget a session (it calls this itself when it closes, for whatever reason)."""
        self._sessions.pop(session_id, None)

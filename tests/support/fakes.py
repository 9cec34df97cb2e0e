"""Test doubles shared by the unit tests: a level detector for the endpointer, a scripted LLM,
an ASR that hands out the test's own streams, an executor that runs inline.

- `LevelDetector`: a frame is speech when it is not all zeros, so the test's audio says
  exactly where the user speaks; `use_level_detector(monkeypatch)` makes the server's
  hearing use it;
- `ScriptedLLM(deltas, delay=, gap=, error=, stall_after=)`: a `ChatLLM` that waits for its
  `release` event (set unless a test clears it) and `delay` s, yields `deltas` `gap` s
  apart, then raises `error` if given; at delta number `stall_after` it waits for ever (a
  stalled model). It records every call's messages (and each `warm` hint's last message in
  `warmed`), and counts the streams that ended before their end (closed or cancelled) in
  `closed_early` (and sets `closed`);
- `FakeASR(make_stream)`: `open()` returns a new `make_stream()` and keeps it in `streams`;
- `InlineExecutor`: `submit` runs the call at once (no threads; results and errors go to the
  awaiting coroutine as a thread pool's would);
- `FakeChannel`: an open data channel as the RTVI adapter uses it: `sent` keeps what the
  server sent (`messages()` parsed), `receive(data)` is the client sending.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import Executor, Future
from typing import Any, Generic, TypeVar

import numpy as np
import pytest

import rtc_server.hearing as hearing_module
from engines.llm.base import ChatMessage
from engines.vad import Endpointer, VadConfig

S = TypeVar("S")


class LevelDetector:
    """Speech is whatever is not digital silence."""

    def is_speech(self, frame: np.ndarray) -> bool:
        return bool(np.any(frame))


def use_level_detector(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's hearing (`rtc_server.hearing`) endpoints with a `LevelDetector`."""

    def endpointer(config: VadConfig, max_silence_ms: int | None = None) -> Endpointer:
        return Endpointer(config, LevelDetector(), max_silence_ms)

    monkeypatch.setattr(hearing_module, "create_endpointer", endpointer)


def words(text: str) -> list[str]:
    """`text` as a model streams it: a delta per word, each with its trailing space."""
    return [word + " " for word in text.split(" ")]


class ScriptedLLM:
    def __init__(
        self, deltas: Sequence[str] = (), *, delay: float = 0.0, gap: float = 0.0,
        error: Exception | None = None, stall_after: int | None = None,
    ) -> None:
        self.deltas, self.delay, self.gap, self.error = list(deltas), delay, gap, error
        self.stall_after = stall_after
        self.hold_at: int | None = None  # the delta before which it waits for `go_on`
        self.go_on = asyncio.Event()
        self.calls: list[list[ChatMessage]] = []
        self.release = asyncio.Event()
        self.release.set()
        self.closed = asyncio.Event()
        self.closed_early = 0
        self.finished = False
        self.warmed: list[str] = []  # the last message of each `warm` hint

    async def stream(
        self, messages: Sequence[ChatMessage], *, max_new_tokens: int, stop: Sequence[str] = ()
    ) -> AsyncIterator[str]:
        self.calls.append(list(messages))
        done = False
        try:
            await self.release.wait()
            if self.delay:
                await asyncio.sleep(self.delay)
            for i, delta in enumerate(self.deltas):
                if i == self.stall_after:
                    await asyncio.Event().wait()
                if i == self.hold_at:
                    await self.go_on.wait()
                yield delta
                await asyncio.sleep(self.gap)
            if self.error is not None:
                raise self.error
            done = self.finished = True
        finally:
            if not done:
                self.closed_early += 1
                self.closed.set()

    def warm(self, messages: Sequence[ChatMessage]) -> None:
        self.warmed.append(messages[-1].content)

    def close(self) -> None:
        pass


class FakeASR(Generic[S]):
    def __init__(self, make_stream: Callable[[], S]) -> None:
        self._make_stream = make_stream
        self.streams: list[S] = []
        self.prompts: list[str | None] = []

    def open(self, prompt: str | None = None) -> S:
        self.prompts.append(prompt)
        self.streams.append(self._make_stream())
        return self.streams[-1]


class InlineExecutor(Executor):
    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            future.set_exception(exc)
        return future


class FakeChannel:
    label = "chat"

    def __init__(self, state: str = "open") -> None:
        self.readyState = state
        self.bufferedAmount = 0
        self.bufferedAmountLowThreshold = 0
        self.sent: list[str | bytes] = []
        self._handlers: dict[str, Callable[..., Any]] = {}

    def on(self, event: str, handler: Callable[..., Any]) -> Callable[..., Any]:
        self._handlers[event] = handler
        return handler

    def open(self) -> None:
        self.readyState = "open"
        self._handlers["open"]()

    def send(self, data: str | bytes) -> None:
        self.sent.append(data)

    def receive(self, data: str | bytes) -> None:
        self._handlers["message"](data)

    def messages(self) -> list[dict[str, Any]]:
        return [json.loads(m) for m in self.sent]

"""Runs the agent's tool calls where the deployment says: in the embedding app, or over HTTP.

- `client`: the app that embeds the agent runs the tool with the user's own session (the
  agent server never holds their credentials). The call goes out on the session's RTVI
  channel (`llm-function-call-in-progress`, as Pipecat sends it) and its
  `llm-function-call-result` comes back through `deliver`. No RTVI client connected: the call
  fails at once, said plainly, rather than waiting out its timeout.
- `http`: POSTed as JSON (`{"name", "arguments", "call_id"}`) to the tool's `url`, with the
  secret from the tool's `secret_env` variable in `secret_header`; a 2xx JSON answer is the
  result.

Either way a call ends within the tool's `timeout_s`; a result that is not JSON (HTTP), or
over `MAX_BODY_BYTES`, fails it; a long result is cut to the tools' `max_result_chars` before
the model reads it. A result for an unknown call id is refused by `deliver` (False).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from engines.tools.calls import ToolCall
from engines.tools.spec import ToolSet, ToolSpec

MAX_BODY_BYTES = 1 << 20  # an HTTP tool's answer larger than this fails the call
CUT_MARK = " ...(cut)"


class ClientTools(Protocol):
    """The session's app channel, as far as tools go."""

    def call_tool(self, call: ToolCall) -> None:
        """Ask the client to run `call` (its result comes back through `deliver`)."""
        ...


@dataclass(frozen=True)
class ToolOutcome:
    status: Literal["done", "failed", "timeout"]
    result: str = ""  # done: what the model reads (cut)
    reason: str = ""  # failed: said to the user ("the app isn't connected")
    duration_s: float = 0.0


class ToolRunner:
    """One session's tool calls in flight (the one owner of their futures)."""

    def __init__(
        self, tools: ToolSet, client: Callable[[], ClientTools | None],
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """Timeouts are wall-clock time (`clock`, `sleep`): a client or a service answers in
        real seconds, whatever timer the session's media runs on."""
        self._tools = tools
        self._client = client
        self._clock = clock
        self._sleep = sleep
        self._waiting: dict[str, asyncio.Future[Any]] = {}
        self._http: Any = None  # aiohttp.ClientSession, made on the first HTTP call

    async def run(self, call: ToolCall, spec: ToolSpec) -> ToolOutcome:
        start = self._clock()
        work = self._run_client(call) if spec.runs == "client" else self._run_http(call, spec)
        try:
            raw = await self._within(work, spec.timeout_s)
        except TimeoutError:
            return ToolOutcome("timeout", duration_s=self._clock() - start)
        except _Failed as exc:
            return ToolOutcome("failed", reason=str(exc), duration_s=self._clock() - start)
        return ToolOutcome("done", self.cut(raw), duration_s=self._clock() - start)

    async def _within(self, work: Coroutine[Any, Any, Any], seconds: float) -> Any:
        task = asyncio.ensure_future(work)
        timer = asyncio.ensure_future(self._sleep(seconds))
        try:
            await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
            if not task.done():
                raise TimeoutError
            return task.result()
        finally:
            for pending in (task, timer):
                pending.cancel()
            await asyncio.gather(task, timer, return_exceptions=True)

    def deliver(self, call_id: str, result: Any) -> bool:
        """The client's result for `call_id`; False if no such call is waiting."""
        future = self._waiting.get(call_id)
        if future is None or future.done():
            return False
        future.set_result(result)
        return True

    def cut(self, raw: Any) -> str:
        text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
        limit = self._tools.max_result_chars
        return text if len(text) <= limit else text[:limit] + CUT_MARK

    async def aclose(self) -> None:
        for future in self._waiting.values():
            future.cancel()
        self._waiting.clear()
        if self._http is not None:
            await self._http.close()

    async def _run_client(self, call: ToolCall) -> Any:
        client = self._client()
        if client is None:
            raise _Failed("the app that runs it isn't connected")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[call.id] = future
        try:
            client.call_tool(call)
            return await future
        finally:
            self._waiting.pop(call.id, None)

    async def _run_http(self, call: ToolCall, spec: ToolSpec) -> Any:
        import aiohttp

        if self._http is None:
            self._http = aiohttp.ClientSession()
        headers = {}
        secret = spec.secret()
        if spec.secret_env and secret is None:
            raise _Failed("its secret is not set on the server")
        if secret is not None:
            headers[spec.secret_header] = secret
        body = {"name": call.name, "arguments": call.arguments, "call_id": call.id}
        try:
            async with self._http.post(spec.url, json=body, headers=headers) as response:
                status = response.status
                data = bytearray()
                while len(data) <= MAX_BODY_BYTES:  # read() returns a chunk at a time
                    chunk = await response.content.read(MAX_BODY_BYTES + 1 - len(data))
                    if not chunk:
                        break
                    data += chunk
        except aiohttp.ClientError as exc:
            raise _Failed("the service could not be reached") from exc
        if not 200 <= status < 300:
            raise _Failed(f"the service answered with an error ({status})")
        if len(data) > MAX_BODY_BYTES:
            raise _Failed("the service's answer was too large")
        try:
            return json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise _Failed("the service's answer was not readable") from exc


class _Failed(Exception):
    """A call that ended without a result; the message is said to the user."""

"""OpenAI-compatible streaming chat engine (llama.cpp server, vLLM, SGLang, TensorRT-LLM).

`OpenAIChatLLM.stream()` POSTs `{base_url}/chat/completions` with `"stream": true` over
aiohttp and yields the `choices[0].delta.content` pieces of the server-sent events until
`data: [DONE]`. This is how a deployment moves the LLM off the avatar servers and shares one
model between many workers.

Failure handling:
- a connect timeout, and a read timeout that bounds any silence while streaming (a stalled
  server raises `LLMTimeoutError` instead of hanging the turn);
- connection errors, timeouts and HTTP 5xx/429 before the first token are retried with a short
  backoff (`retries` times); after the first token a failure raises `LLMError`, because a retry
  would repeat what was already spoken;
- cancelling the consumer (or closing the iterator) closes the connection at once.
Each stream is one request on its own aiohttp session (no state tied to an event loop; a
connection set-up costs well under a millisecond on a LAN, a TLS handshake a few tens).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, Sequence
from typing import Any

import aiohttp

from engines.llm.base import ChatMessage
from engines.llm.errors import InvalidInputError, LLMError, LLMTimeoutError
from engines.llm.history import approx_tokens, fit_history
from engines.llm.prompt import PromptBuilder
from engines.llm.stops import until_stop

logger = logging.getLogger(__name__)
_RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})


class _Retryable(LLMError):
    """A failure before the first token that is worth another attempt."""

    def __init__(self, message: str, *, timeout: bool = False) -> None:
        super().__init__(message)
        self.timeout = timeout


class OpenAIChatLLM:
    """Streaming chat completions over HTTP (see the module docstring)."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000/v1",
        *,
        prompt: PromptBuilder,
        model: str = "default",
        api_key: str | None = None,
        history_tokens: int = 1536,
        temperature: float = 0.7,
        top_p: float = 0.9,
        seed: int | None = None,
        connect_timeout_s: float = 3.0,
        read_timeout_s: float = 10.0,
        retries: int = 2,
    ) -> None:
        url = base_url.rstrip("/")
        if not url.startswith(("http://", "https://")) or len(url.split("/")[2]) == 0:
            raise InvalidInputError(f"bad base_url {base_url!r}")
        self._url = url + "/chat/completions"
        self.model = model
        self.prompt = prompt
        self.history_tokens = history_tokens
        self._headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._sampling: dict[str, Any] = {"temperature": temperature, "top_p": top_p}
        if seed is not None:
            self._sampling["seed"] = seed
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=connect_timeout_s, sock_read=read_timeout_s
        )
        self._read_timeout = read_timeout_s
        self._retries = retries

    def warm(self, messages: Sequence[ChatMessage]) -> None:
        """Nothing to warm here: the server keeps (or not) its own prompt cache."""

    def close(self) -> None:
        """Nothing to release: each stream opens and closes its own connection."""

    async def stream(
        self, messages: Sequence[ChatMessage], *, max_new_tokens: int, stop: Sequence[str] = ()
    ) -> AsyncGenerator[str, None]:
        """Yield text deltas from the server (see the module docstring)."""
        if max_new_tokens <= 0:
            raise InvalidInputError(f"max_new_tokens must be > 0, got {max_new_tokens}")
        msgs = self.prompt.messages(messages)
        msgs = [*msgs[:1], *fit_history(msgs[1:], approx_tokens, self.history_tokens)]
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in msgs],
            "stream": True,
            "max_tokens": max_new_tokens,
            **self._sampling,
        }
        stop = [*stop, *self.prompt.stops]
        if stop:
            body["stop"] = stop[:4]  # the API accepts at most 4
        # Also enforced here: not every server honours "stop".
        async for text in until_stop(self._attempts(body), stop):
            yield text

    async def _attempts(self, body: dict[str, Any]) -> AsyncGenerator[str, None]:
        """The answer's deltas, retried while no text has come (see the module docstring)."""
        attempt = 0
        while True:
            got_text = False
            try:
                async for delta in self._attempt(body):
                    got_text = True
                    yield delta
                return
            except _Retryable as exc:
                if got_text or attempt >= self._retries:
                    error = LLMTimeoutError if exc.timeout else LLMError
                    raise error(str(exc)) from exc.__cause__
                attempt += 1
                logger.warning("LLM server attempt %d failed (%s); retrying", attempt, exc)
                await asyncio.sleep(0.2 * attempt)  # short backoff between retries

    async def _attempt(self, body: dict[str, Any]) -> AsyncGenerator[str, None]:
        try:
            async with (
                aiohttp.ClientSession(timeout=self._timeout) as http,
                http.post(self._url, json=body, headers=self._headers) as resp,
            ):
                if resp.status != 200:
                    detail = (await resp.content.read(300)).decode("utf-8", "replace")
                    error = f"LLM server answered HTTP {resp.status}: {detail}"
                    if resp.status in _RETRYABLE_STATUS:
                        raise _Retryable(error)
                    raise LLMError(error)
                async for raw in resp.content:
                    line = raw.decode("utf-8", "replace").strip()
                    if not line.startswith("data:"):
                        continue  # SSE comments, "event:" lines, keep-alives
                    data = line[5:].strip()
                    if data == "[DONE]":
                        return
                    for content in _contents(data):
                        yield content
        except TimeoutError as exc:
            raise _Retryable(
                f"LLM server stalled for {self._read_timeout:.1f} s", timeout=True
            ) from exc
        except aiohttp.ClientError as exc:
            raise _Retryable(f"LLM server connection failed: {exc}") from exc


def _contents(data: str) -> list[str]:
    try:
        event = json.loads(data)
    except json.JSONDecodeError as exc:
        raise LLMError(f"bad event from LLM server: {data[:80]!r}") from exc
    if "error" in event:
        raise LLMError(f"LLM server error: {event['error']}")
    return [
        content
        for choice in event.get("choices") or ()
        if (content := (choice.get("delta") or {}).get("content"))
    ]

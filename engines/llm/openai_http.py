"""OpenAI-compatible streaming chat engine (vLLM, TensorRT-LLM, Ollama, llama.cpp server).

`OpenAIChatLLM.stream()` POSTs `{base_url}/chat/completions` with `"stream": true` and yields the
`choices[0].delta.content` pieces of the server-sent events until `data: [DONE]`. This is how a
deployment moves the LLM off the avatar server and scales it independently.

Failure handling:
- connect timeout, and a read timeout that bounds any silence while streaming (a stalled
  server raises `LLMTimeoutError` instead of hanging the turn);
- connection errors, timeouts and HTTP 5xx/429 before the first token are retried with a short
  backoff (`retries` times); after the first token a failure raises `LLMError`, because a retry
  would repeat what was already spoken;
- `cancel` (or closing the generator) closes the connection at once: the blocking reads run on
  a helper thread, so a stalled socket never delays cancellation.
Standard library only (http.client); safe for concurrent streams (one connection each).
"""

from __future__ import annotations

import http.client
import json
import logging
import queue
import threading
import time
import urllib.parse
from collections.abc import Generator, Iterator, Sequence

from engines.llm.base import ChatMessage
from engines.llm.errors import InvalidInputError, LLMError, LLMTimeoutError
from engines.llm.history import approx_tokens, fit_history
from engines.llm.stops import StopFilter

logger = logging.getLogger(__name__)
_RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
_EOF = object()


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
        model: str = "default",
        api_key: str | None = None,
        system_prompt: str | None = None,
        history_tokens: int = 1536,
        temperature: float = 0.7,
        top_p: float = 0.9,
        connect_timeout_s: float = 3.0,
        read_timeout_s: float = 10.0,
        retries: int = 2,
    ) -> None:
        url = urllib.parse.urlsplit(base_url.rstrip("/"))
        if url.scheme not in ("http", "https") or not url.hostname:
            raise InvalidInputError(f"bad base_url {base_url!r}")
        self._url = url
        self.model = model
        self._api_key = api_key
        self.system_prompt = system_prompt
        self.history_tokens = history_tokens
        self._temperature = temperature
        self._top_p = top_p
        self._connect_timeout = connect_timeout_s
        self._read_timeout = read_timeout_s
        self._retries = retries

    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_new_tokens: int,
        stop: Sequence[str] = (),
        cancel: threading.Event | None = None,
    ) -> Generator[str, None, None]:
        """Yield text deltas from the server (see the module docstring)."""
        if max_new_tokens <= 0:
            raise InvalidInputError(f"max_new_tokens must be > 0, got {max_new_tokens}")
        msgs = list(messages)
        if self.system_prompt and (not msgs or msgs[0].role != "system"):
            msgs.insert(0, ChatMessage("system", self.system_prompt))
        msgs = fit_history(msgs, approx_tokens, self.history_tokens)
        body = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in msgs],
            "stream": True,
            "max_tokens": max_new_tokens,
            "temperature": self._temperature,
            "top_p": self._top_p,
        }
        if stop:
            body["stop"] = list(stop)[:4]  # the API accepts at most 4
        payload = json.dumps(body).encode()
        stops = StopFilter(stop)  # also enforced here: not every server honours "stop"
        attempt = 0
        while True:
            got_text = False
            try:
                for delta in self._attempt(payload, cancel):
                    got_text = True
                    out = stops.feed(delta)
                    if out:
                        yield out
                    if stops.stopped:
                        return
                tail = stops.flush()
                if tail:
                    yield tail
                return
            except _Retryable as exc:
                if got_text or attempt >= self._retries or (cancel and cancel.is_set()):
                    error = LLMTimeoutError if exc.timeout else LLMError
                    raise error(str(exc)) from exc.__cause__
                attempt += 1
                logger.warning("LLM server attempt %d failed (%s); retrying", attempt, exc)
                if cancel is not None and cancel.wait(0.2 * attempt):
                    return
                if cancel is None:
                    time.sleep(0.2 * attempt)  # short backoff between retries

    def _attempt(self, payload: bytes, cancel: threading.Event | None) -> Iterator[str]:
        lines: queue.Queue[object] = queue.Queue()
        conn_box: list[http.client.HTTPConnection] = []
        closed = threading.Event()
        reader = threading.Thread(
            target=self._read, args=(payload, lines, conn_box, closed), daemon=True,
            name="llm-http",
        )
        reader.start()
        try:
            while True:
                deadline = time.monotonic() + self._read_timeout + self._connect_timeout
                item: object = None
                while True:  # wait for the next line, waking up to honour `cancel`
                    if cancel is not None and cancel.is_set():
                        return
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise _Retryable(
                            f"LLM server stalled for {self._read_timeout:.1f} s", timeout=True
                        )
                    try:
                        item = lines.get(timeout=min(left, 0.05))
                        break
                    except queue.Empty:
                        continue
                if item is _EOF:
                    return
                if isinstance(item, BaseException):
                    raise item
                assert isinstance(item, str)
                if not item.startswith("data:"):
                    continue  # SSE comments, "event:" lines, keep-alives
                data = item[5:].strip()
                if data == "[DONE]":
                    return
                try:
                    event = json.loads(data)
                except json.JSONDecodeError as exc:
                    raise LLMError(f"bad event from LLM server: {data[:80]!r}") from exc
                if "error" in event:
                    raise LLMError(f"LLM server error: {event['error']}")
                for choice in event.get("choices") or ():
                    content = (choice.get("delta") or {}).get("content")
                    if content:
                        yield content
        finally:
            closed.set()
            for conn in conn_box:
                conn.close()  # unblocks the reader thread
            reader.join(timeout=1.0)

    def _read(
        self,
        payload: bytes,
        lines: queue.Queue[object],
        conn_box: list[http.client.HTTPConnection],
        closed: threading.Event,
    ) -> None:
        url = self._url
        cls = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
        conn = cls(url.hostname or "", url.port, timeout=self._connect_timeout)
        conn_box.append(conn)
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        try:
            conn.connect()
            assert conn.sock is not None
            conn.sock.settimeout(self._read_timeout)
            conn.request("POST", url.path + "/chat/completions", body=payload, headers=headers)
            resp = conn.getresponse()
            if resp.status != 200:
                detail = resp.read(300).decode("utf-8", "replace")
                error = f"LLM server answered HTTP {resp.status}: {detail}"
                retry = resp.status in _RETRYABLE_STATUS
                lines.put(_Retryable(error) if retry else LLMError(error))
                return
            while not closed.is_set():
                raw = resp.readline()
                if not raw:
                    break
                lines.put(raw.decode("utf-8", "replace").rstrip("\r\n"))
            lines.put(_EOF)
        except TimeoutError as exc:
            if not closed.is_set():
                lines.put(_Retryable(f"LLM server timed out: {exc}", timeout=True))
        except (OSError, http.client.HTTPException) as exc:
            if not closed.is_set():
                lines.put(_Retryable(f"LLM server connection failed: {exc}"))
        finally:
            conn.close()

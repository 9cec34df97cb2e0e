"""Run a ChatLLM in its own process, streaming deltas back over a pipe.

Why: a local model's decode loop is Python code that needs the GIL for every token. In the
server process it competes with the WebRTC stack (RTP, SRTP, frame conversion, the event
loop): measured on 2 cores with one 512x512 avatar session, the bundled model fell from ~10 to
3-5 tokens/s in-process, and to ~10 tokens/s again in a child process. The child also keeps
the model's memory and any crash out of the server.

`ProcessLLM(factory)` starts a "spawn" child that calls `factory()` (a picklable,
module-level callable returning the real ChatLLM) and serves requests; `stream()` has the
ChatLLM contract, may be called from several threads at once, and `cancel` (or closing the
generator) reaches the child within one token. If the child dies, the running streams fail
with `LLMError` and the next request starts a new child.

Wire protocol (tuples over one duplex `multiprocessing` pipe):
parent -> child: ("stream", rid, messages, max_new_tokens, stop) | ("cancel", rid) | ("exit",)
child -> parent: ("ready",) | ("load_failed", text) | ("delta", rid, text, notice_kind | None)
                 | ("done", rid) | ("error", rid, text)
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import multiprocessing
import queue
import threading
from collections.abc import Callable, Generator, Sequence
from multiprocessing.connection import Connection
from typing import Any

from engines.llm.base import ChatLLM, ChatMessage
from engines.llm.errors import LLMError, ModelLoadError

logger = logging.getLogger(__name__)
_READY_TIMEOUT_S = 600.0  # the first start converts the GGUF (minutes on 2 busy cores)


def _serve(factory: Callable[[], ChatLLM], conn: Connection, log_level: int) -> None:
    """Child process: build the engine, then run one thread per request."""
    from rtc_server.logs import setup_logging

    setup_logging(logging.getLevelName(log_level))
    try:
        llm = factory()
    except Exception as exc:  # report and exit: the parent raises ModelLoadError
        conn.send(("load_failed", f"{type(exc).__name__}: {exc}"))
        return
    send_lock = threading.Lock()
    cancels: dict[int, threading.Event] = {}

    def send(message: tuple[Any, ...]) -> None:
        with send_lock:
            conn.send(message)

    def run(rid: int, messages: list[ChatMessage], max_new_tokens: int, stop: list[str],
            cancel: threading.Event) -> None:
        try:
            for delta in llm.stream(messages, max_new_tokens=max_new_tokens, stop=stop,
                                    cancel=cancel):
                if cancel.is_set():
                    break
                send(("delta", rid, str(delta), getattr(delta, "kind", None)))
            send(("done", rid))
        except Exception as exc:  # noqa: BLE001 - handed to the parent's stream
            send(("error", rid, f"{type(exc).__name__}: {exc}"))
        finally:
            cancels.pop(rid, None)

    send(("ready",))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the parent went away
            break
        if message[0] == "exit":
            break
        if message[0] == "cancel":
            event = cancels.get(message[1])
            if event is not None:
                event.set()
        elif message[0] == "stream":
            _, rid, messages, max_new_tokens, stop = message
            cancels[rid] = threading.Event()
            threading.Thread(
                target=run, args=(rid, messages, max_new_tokens, stop, cancels[rid]),
                name=f"llm-request-{rid}", daemon=True,
            ).start()
    for event in list(cancels.values()):
        event.set()


class ProcessLLM:
    """A ChatLLM whose model runs in a child process (see the module docstring)."""

    def __init__(self, factory: Callable[[], ChatLLM], *, name: str = "llm") -> None:
        self._factory = factory
        self._name = name
        self._ctx = multiprocessing.get_context("spawn")
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._streams: dict[int, queue.Queue[tuple[Any, ...]]] = {}
        self._process: Any = None
        self._conn: Connection | None = None
        self._alive = False
        self._start()

    # --- lifecycle ----------------------------------------------------------------------------

    def _start(self) -> None:
        parent, child = self._ctx.Pipe(duplex=True)
        process = self._ctx.Process(
            target=_serve, args=(self._factory, child, logging.getLogger().getEffectiveLevel()),
            name=f"rtc-{self._name}", daemon=True,
        )
        process.start()
        child.close()
        if not parent.poll(_READY_TIMEOUT_S):
            process.kill()
            raise ModelLoadError(f"{self._name} process did not get ready in time")
        try:
            first = parent.recv()
        except EOFError as exc:
            raise ModelLoadError(f"{self._name} process died while loading") from exc
        if first[0] != "ready":
            process.join(5)
            raise ModelLoadError(f"{self._name} process failed to load: {first[1]}")
        self._process, self._conn, self._alive = process, parent, True
        threading.Thread(target=self._read, args=(parent,), name=f"{self._name}-reader",
                         daemon=True).start()
        logger.info("%s runs in process %d", self._name, process.pid)

    def _read(self, conn: Connection) -> None:
        """Dispatch the child's messages to the waiting streams; fail them all if it dies."""
        try:
            while True:
                message = conn.recv()
                stream = self._streams.get(message[1])
                if stream is not None:
                    stream.put(message)
        except (EOFError, OSError):
            pass
        if conn is self._conn:
            self._alive = False  # before failing the streams: their callers may retry at once
        for stream in list(self._streams.values()):
            stream.put(("error", 0, f"{self._name} process exited"))

    def _ensure_running(self) -> Connection:
        with self._lock:
            if self._process is None or not self._alive or not self._process.is_alive():
                if self._process is not None:
                    logger.warning("%s process died; starting a new one", self._name)
                self._start()
            assert self._conn is not None
            return self._conn

    def _send(self, conn: Connection, message: tuple[Any, ...]) -> None:
        with self._send_lock:
            conn.send(message)

    def close(self) -> None:
        """Stop the child (idempotent)."""
        with self._lock:
            process, conn = self._process, self._conn
            self._process = self._conn = None
        if process is None or conn is None:
            return
        with contextlib.suppress(OSError, ValueError):
            self._send(conn, ("exit",))
        process.join(5)
        if process.is_alive():
            process.kill()
        conn.close()

    # --- ChatLLM ------------------------------------------------------------------------------

    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_new_tokens: int,
        stop: Sequence[str] = (),
        cancel: threading.Event | None = None,
    ) -> Generator[str, None, None]:
        from engines.llm.resilience import Notice

        conn = self._ensure_running()
        rid = next(self._ids)
        replies: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self._streams[rid] = replies
        request = ("stream", rid, list(messages), max_new_tokens, list(stop))
        try:
            self._send(conn, request)
        except OSError:  # the child died since the check: one fresh start, then give up
            self._alive = False
            conn = self._ensure_running()
            self._send(conn, request)
        finished = False
        try:
            while True:
                try:
                    # Wake up now and then to notice `cancel` even while the child is silent.
                    message = replies.get(timeout=0.05)
                except queue.Empty:
                    if cancel is not None and cancel.is_set():
                        return
                    continue
                kind = message[0]
                if kind == "done":
                    finished = True
                    return
                if kind == "error":
                    finished = True
                    raise LLMError(message[2])
                if cancel is not None and cancel.is_set():
                    return
                _, _, text, notice = message
                yield Notice(text, notice) if notice else text
        finally:
            self._streams.pop(rid, None)
            if not finished:
                with contextlib.suppress(OSError, ValueError):
                    self._send(conn, ("cancel", rid))

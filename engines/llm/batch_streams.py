"""The streams of one process decoded together on a `BatchDecoder` (`[llm] batch_streams`).

One loop on the engine's decode thread serves every stream: between steps it admits the
streams waiting (FIFO) into free rows (each prefill runs once, into its row), then runs one
step for all rows and hands each stream its token. A stream's first token therefore waits
for the prefills queued before it and one step, not for the other answers' slices (the
turn-taking of engines/llm/local.py). More streams than rows wait for a row. The loop is
started by the first stream and returns when no stream is left (no idle polling); the
tokens become text (`AnswerText`) on that thread and reach each stream's consumer through
`call_soon_threadsafe`. A consumer going away releases its row at the next step; a failed
forward ends every stream decoding with the error and starts the rows clean.

Sampling (`temperature > 0`) draws from each row's penalized logits with one generator for
the engine: with several streams at once a seed no longer makes one answer repeatable.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from engines.llm.answer_text import AnswerText
from engines.llm.batch_graphs import BatchDecoder
from engines.llm.cuda_graphs import Sampling, draw
from engines.llm.decode_thread import DONE, DecodeThread, Mailbox
from engines.llm.errors import InvalidInputError, LLMError

logger = logging.getLogger(__name__)


@dataclass(eq=False)
class _Stream:
    ids: list[int]
    max_new_tokens: int
    forced: list[int] | None
    text: AnswerText
    mailbox: Mailbox  # to its consumer; its `cancel`: the consumer went away
    times: list[float]
    row: int | None = None
    count: int = 0  # tokens produced
    finished: bool = False


@dataclass
class BatchStreams:
    thread: DecodeThread
    decoder: BatchDecoder
    sampling: Sampling
    on_prefill: Callable[[int], None] = lambda tokens: None  # tokens a stream prefilled
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _waiting: list[_Stream] = field(default_factory=list)
    _active: list[_Stream] = field(default_factory=list)  # decode-thread only
    _running: bool = False
    _generator: Any = None

    async def stream(self, ids: list[int], max_new_tokens: int, forced: list[int] | None,
                     text: AnswerText, times: list[float]) -> AsyncGenerator[str, None]:
        """The answer's text deltas (see the module docstring)."""
        me = _Stream(ids, max_new_tokens, forced, text, Mailbox(), times)
        with self._lock:
            self._waiting.append(me)
            start, self._running = not self._running, True
        if start:
            self.thread.start(self._run)
        try:
            async with aclosing(me.mailbox.deltas()) as deltas:
                async for delta in deltas:
                    yield delta
        finally:
            me.mailbox.cancel.set()
            with self._lock:
                if me in self._waiting:  # never admitted
                    self._waiting.remove(me)

    # --- the decode thread ---------------------------------------------------------------------

    def _run(self) -> None:
        import torch

        try:
            with torch.inference_mode():
                while self._turn():
                    pass
        except BaseException as exc:  # a bug here must not leave every later stream waiting
            logger.exception("LLM batch loop failed")
            with self._lock:
                self._running = False
                waiting, self._waiting = self._waiting, []
            error = LLMError(f"generation failed: {exc}")
            for s in [*waiting, *self._active]:
                s.finished = True
                s.mailbox.put(error)
            self._active = []
            self.decoder.forget()

    def _turn(self) -> bool:
        """Admit, step, hand out; False once no stream is left (the loop ends)."""
        for s in self._active:
            if s.mailbox.cancel.is_set():
                self._finish(s, None)
        self._active = [s for s in self._active if not s.finished]
        with self._lock:
            if not self._waiting and not self._active:
                self._running = False
                return False
            free = self.decoder.busy.count(False)
            joining, self._waiting[:free] = self._waiting[:free], []
        try:
            for s in joining:
                self._admit(s)
            if any(not s.finished for s in self._active):
                tokens = self.decoder.step()
                for s in self._active:
                    if not s.finished and s.row is not None:
                        self._deliver(s, self._choose(s, tokens[s.row],
                                                      self.decoder.logits[s.row]))
        except Exception as exc:  # noqa: BLE001 - handed to every stream decoding
            error = LLMError(f"generation failed: {exc}")
            self.decoder.forget()  # before anyone hears of it
            for s in [*joining, *self._active]:
                self._finish(s, error)
        return True

    def _admit(self, s: _Stream) -> None:
        s.row = self.decoder.free_row(s.ids)
        assert s.row is not None  # (as many joined as rows were free)
        try:
            logits = self.decoder.admit(s.row, s.ids, s.max_new_tokens,
                                        self.sampling.repetition_penalty)
        except InvalidInputError as exc:  # this stream's prompt: the others go on
            self._finish(s, exc)
            return
        self.on_prefill(self.decoder.last_prefill_tokens)
        self._active.append(s)
        if s.mailbox.cancel.is_set():
            self._finish(s, None)
            return
        self._deliver(s, self._choose(s, int(logits[0].argmax()), logits[0]))

    def _choose(self, s: _Stream, greedy: int, logits: Any) -> int:
        """The token `s` says: its written one, a draw from its row's `logits` [vocab], or
        the greedy one."""
        if s.forced is not None:  # chosen (the work is done), then replaced
            return s.forced[min(s.count, len(s.forced) - 1)]
        if self.sampling.temperature > 0:
            return int(draw(logits, self.sampling, self._draws()).item())
        return greedy

    def _draws(self) -> Any:
        if self._generator is None:
            import torch

            self._generator = torch.Generator(device=self.decoder.device)
            if self.sampling.seed is not None:
                self._generator.manual_seed(self.sampling.seed)
            else:
                self._generator.seed()
        return self._generator

    def _deliver(self, s: _Stream, token: int) -> None:
        s.count += 1
        s.times.append(time.perf_counter())
        if delta := s.text.feed(token):
            s.mailbox.put(delta)
        if s.text.done or s.count >= s.max_new_tokens or (
                s.forced is not None and s.count >= len(s.forced)):
            self._finish(s, None)
        else:
            assert s.row is not None
            self.decoder.feed(s.row, token)

    def _finish(self, s: _Stream, error: BaseException | None) -> None:
        if s.finished:
            return
        s.finished = True
        if s.row is not None and self.decoder.busy[s.row]:
            self.decoder.release(s.row)
        if error is None and (tail := s.text.flush()):
            s.mailbox.put(tail)
        s.mailbox.put(error if error is not None else DONE)

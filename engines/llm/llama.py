"""Local chat engine on llama.cpp (`llama-cpp-python`): the GGUF runs as shipped.

`LlamaCppLLM(model)` loads a GGUF (the bundled Qwen2.5-Coder 1.5B by default, see
`model_files`) with its own chat template, and streams answers token by token from its
decode thread (`DecodeThread`: one hop to the event loop, one generation at a time).

Prompt-prefix reuse: llama.cpp keeps the KV cache of the last evaluation and re-evaluates
only the tokens after the longest common prefix with the new prompt. Persona, facts and the
earlier turns come first in every prompt, so a turn prefills only its own words (warm-up at
load puts the persona and facts there before the first user). Sessions that alternate still
share the persona-and-facts prefix.

Measured on the 2-core dev machine (1.5B, the defaults: 1 decode thread, 2 prompt threads,
the first `burst_tokens` of an answer on 2 threads too; bench/RESULTS.md section answers):
~20 tokens/s decode (30 ms a token on 2 threads, 48 on 1), prompt evaluation ~80 tokens/s, so
the first token comes 0.2 s after a 12-token question with the persona cached (0.5 s with the
bank's facts and its 30-token reminder); 1.95 GB RSS.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

from engines.llm.base import ChatMessage
from engines.llm.decode_thread import DecodeThread
from engines.llm.errors import InvalidInputError, LLMError, ModelLoadError
from engines.llm.history import fit_history
from engines.llm.model_files import resolve_gguf
from engines.llm.prompt import PromptBuilder
from engines.llm.stops import until_stop
from engines.progress import load_step
from engines.text.chunker import SENTENCE_ENDS

logger = logging.getLogger(__name__)
_MARK = "\ue000"  # a private-use character: where the user's words end in a formatted prompt
# A warm evaluates a few tokens at a time (one thread), and a generation that arrives waits
# for the step under way: steps are sized to take about this long on this machine (up to 4
# tokens; on a 2-core AVX2 emulation a 4-token step took ~120 ms and held up 3 of 9 answers'
# first token by 120-170 ms).
_WARM_STEP_S = 0.06
_WARM_STEP_MAX = 4


class LlamaCppLLM:
    """A GGUF chat model on llama.cpp (see the module docstring)."""

    def __init__(
        self,
        model: str | None = None,
        *,
        prompt: PromptBuilder,
        threads: int = 1,
        batch_threads: int = 0,
        burst_tokens: int = 0,
        context_tokens: int = 4096,
        history_tokens: int = 1536,
        temperature: float = 0.0,
        top_p: float = 0.9,
        repetition_penalty: float = 1.05,
        seed: int | None = None,
    ) -> None:
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise ModelLoadError(
                "llama-cpp-python is not installed: pip install -e '.[llm]'"
            ) from exc
        path: Path = resolve_gguf(model)
        self.name = path.stem
        self.prompt = prompt
        self.history_tokens = history_tokens
        self._sampling: dict[str, Any] = {
            "temperature": max(temperature, 0.0),
            "top_p": top_p,
            "repeat_penalty": repetition_penalty,
            "seed": seed,
        }
        self._thread = DecodeThread("llm-decode")
        n_threads = threads if threads > 0 else (os.cpu_count() or 2)
        n_batch_threads = batch_threads if batch_threads > 0 else n_threads
        self._threads = (n_threads, n_batch_threads)
        self.burst_tokens = burst_tokens

        def load() -> Any:
            return Llama(
                model_path=str(path), n_ctx=context_tokens, n_threads=n_threads,
                n_threads_batch=n_batch_threads, n_batch=512, verbose=False,
            )

        try:
            with load_step(logger, f"LLM {path.name} (llama.cpp, {n_threads}/{n_batch_threads} "
                           "threads)"):
                self._llm: Any = self._thread.call(load)
        except (ValueError, RuntimeError, OSError) as exc:
            self._thread.close()
            raise ModelLoadError(
                f"llama.cpp cannot load {path}: {exc}. If the file is the bundled model, "
                f"delete it to have it assembled again; otherwise rebuild or re-download it"
            ) from exc
        template = self._llm.metadata.get("tokenizer.chat_template")
        if not template:
            self._thread.close()
            raise ModelLoadError(f"{path} has no chat template (not an instruct model?)")
        self._format = self._formatter(template)
        self.context_tokens = context_tokens
        self.last_prefill_tokens = 0  # prompt tokens the last call evaluated (reuse check)
        self.generated_tokens = 0  # all tokens generated so far (cancellation checks)
        self.warmed_tokens = 0  # prompt tokens evaluated ahead by `warm`
        self._warm_token_s = _WARM_STEP_S / 2  # a warm's time per token here (measured as it goes)
        with load_step(logger, "LLM warm-up (persona and facts into the KV cache)"):
            self._thread.call(self.warm_up)

    def _formatter(self, template: str) -> Any:
        """The GGUF's own Jinja chat template, as llama-cpp-python applies it."""
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        vocab = self._llm._model  # noqa: SLF001 - the token texts live on the model only
        eos, bos = self._llm.token_eos(), self._llm.token_bos()
        return Jinja2ChatFormatter(
            template=template,
            eos_token=vocab.token_get_text(eos) if eos != -1 else "",
            bos_token=vocab.token_get_text(bos) if bos != -1 else "",
            stop_token_ids=[eos],
        )

    # --- tokens ------------------------------------------------------------------------------

    def count_tokens(self, text: str) -> int:
        return len(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def prompt_tokens(self, messages: Sequence[ChatMessage]) -> tuple[list[int], list[str]]:
        """Token ids of the prompt actually sent (persona, facts, history within budget) and
        the template's stop strings."""
        text, add_bos, stop = self._formatted(messages)
        return self._tokenize(text, add_bos), stop

    def _formatted(self, messages: Sequence[ChatMessage]) -> tuple[str, bool, list[str]]:
        msgs = self.prompt.messages(messages)
        system, rest = msgs[:1], msgs[1:]
        # The system prompt (persona and facts) is bounded at load; history fits the rest.
        msgs = [*system, *fit_history(rest, self.count_tokens, self.history_tokens)]
        formatted = self._format(messages=[{"role": m.role, "content": m.content} for m in msgs])
        stop = formatted.stop
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        return formatted.prompt, not formatted.added_special, stops

    def _tokenize(self, text: str, add_bos: bool) -> list[int]:
        return list(self._llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True))

    def warm_up(self) -> None:
        """Evaluate the system prompt once, so the first user only prefills their words."""
        for _ in self._generate([ChatMessage("user", "Hello")], 1, threading.Event()):
            pass

    # --- ChatLLM -------------------------------------------------------------------------------

    def stream(
        self, messages: Sequence[ChatMessage], *, max_new_tokens: int, stop: Sequence[str] = ()
    ) -> AsyncIterator[str]:
        if max_new_tokens <= 0:
            raise InvalidInputError(f"max_new_tokens must be > 0, got {max_new_tokens}")
        if not messages or not any(m.content.strip() for m in messages if m.role == "user"):
            raise InvalidInputError("no user message to answer")
        job = self._thread.stream(lambda cancel: self._generate(messages, max_new_tokens, cancel))
        return until_stop(job, [*stop, *self.prompt.stops])

    def warm(self, messages: Sequence[ChatMessage]) -> None:
        """Evaluate the prompt up to the user's words so far (a partial transcript; none yet:
        the history up to them), so the final prompt prefills only what changed. All the
        words: a last word the final revises costs nothing more at the end (the cache is cut
        where they part), one it keeps is a token or two less to prefill then (~25 ms each
        live). A partial that ends a sentence is often the final: the end of the user's turn
        and the answer's start (the template's 5 tokens, a persona's reminder) are read too,
        so a final that keeps it has one token left to prefill. Best effort: skipped while a
        generation waits or runs, and it stops as soon as one arrives."""
        if not messages or messages[-1].role != "user" or self.prompt.retriever is not None:
            return  # (retrieved facts come before the words and change with them)
        partial = " ".join(messages[-1].content.split())
        whole = partial[-1:] in SENTENCE_ENDS
        words = [*messages[:-1], ChatMessage("user", partial if whole else partial + _MARK)]
        self._thread.background(lambda stop: self._warm(words, stop, whole))

    def close(self) -> None:
        self._thread.close()

    def drain(self) -> None:
        """Block until every generation queued so far has finished (tests, benchmarks)."""
        self._thread.call(lambda: None)

    # --- decode thread -----------------------------------------------------------------------

    def _set_threads(self, decode: int, prompt: int) -> None:
        """llama.cpp's threads for the next evaluations (`llama_set_n_threads`, between them)."""
        self._llm._ctx.set_n_threads(decode, prompt)  # noqa: SLF001

    def _warm(self, messages: Sequence[ChatMessage], stop: threading.Event, whole: bool) -> None:
        """`messages` as a whole prompt, or (not `whole`) up to the mark after the words."""
        text, add_bos, _ = self._formatted(messages)
        ids = self._tokenize(text if whole else text[: text.index(_MARK)], add_bos)
        cached = self._llm.input_ids[: self._llm.n_tokens].tolist()
        reuse = 0
        for a, b in zip(cached, ids, strict=False):
            if a != b:
                break
            reuse += 1
        self._llm.n_tokens = reuse  # what follows is another prompt's: dropped by `eval`
        decode_threads, prompt_threads = self._threads
        # On one thread: a warm runs while the user speaks or just stopped, beside the ASR's
        # decode of their words, which the turn waits for; two threads each would fight.
        self._set_threads(decode_threads, 1)
        try:
            start = reuse
            while start < len(ids):
                if stop.is_set():
                    return
                step = max(1, min(_WARM_STEP_MAX, int(_WARM_STEP_S / self._warm_token_s)))
                began = time.perf_counter()
                self._llm.eval(ids[start : start + step])
                took = (time.perf_counter() - began) / len(ids[start : start + step])
                self._warm_token_s = 0.5 * self._warm_token_s + 0.5 * took
                start += step
        finally:
            self._set_threads(decode_threads, prompt_threads)
        self.warmed_tokens += len(ids) - reuse

    def _generate(
        self,
        messages: Sequence[ChatMessage],
        max_new_tokens: int,
        cancel: threading.Event,
    ) -> Iterator[str]:
        ids, template_stops = self.prompt_tokens(messages)
        if len(ids) + max_new_tokens > self.context_tokens:
            raise InvalidInputError(
                f"prompt of {len(ids)} tokens + {max_new_tokens} new exceeds the context of "
                f"{self.context_tokens}: lower history_tokens or the knowledge file's size"
            )
        cached = self._llm.input_ids[: self._llm.n_tokens].tolist()
        reuse = 0  # llama.cpp keeps the longest common prefix (and re-feeds the last token)
        for a, b in zip(cached, ids[:-1], strict=False):
            if a != b:
                break
            reuse += 1
        self.last_prefill_tokens = len(ids) - reuse
        logger.debug("prefill %d of %d tokens (%d read ahead so far)", self.last_prefill_tokens,
                     len(ids), self.warmed_tokens)
        decode_threads, prompt_threads = self._threads
        burst = self.burst_tokens if prompt_threads > decode_threads else 0
        if burst:
            # The answer's first tokens decode on the prompt's threads: until the first chunk
            # is spoken nothing else needs the cores (no TTS yet), and its delay is the
            # user's wait. Later tokens go back to `threads`, beside the TTS and the video.
            self._set_threads(prompt_threads, prompt_threads)
        chunks = self._llm.create_completion(
            prompt=ids, stream=True, max_tokens=max_new_tokens, stop=template_stops,
            **self._sampling,
        )
        try:
            for n, chunk in enumerate(chunks, 1):
                self.generated_tokens += 1
                if n == burst:
                    self._set_threads(decode_threads, prompt_threads)
                if cancel.is_set():
                    return
                if delta := chunk["choices"][0]["text"]:
                    yield delta
        except (RuntimeError, ValueError) as exc:  # llama_decode failures
            raise LLMError(f"generation failed: {exc}") from exc
        finally:
            chunks.close()  # stops llama.cpp's loop at this token
            if burst:
                self._set_threads(decode_threads, prompt_threads)

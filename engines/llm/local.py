"""Local transformers chat engine (the GPU path): streamed deltas, prefix KV-cache reuse,
cancel within a token; on CUDA a static KV cache with graph-captured decode steps.

The model is loaded, and every call into it made, on the engine's own thread (`DecodeThread`:
one hop to the event loop, one generation at a time, the thread that owns the model and so
the CUDA context); `stream()` is an async iterator whose consumer going away stops the loop
before its next token. The KV cache of the last generation is kept: the next prompt's longest
common token prefix with it (system prompt and earlier turns) is reused, so a turn only
prefills its new tokens.

Devices (`engines/llm/placement.py`): "auto" takes a CUDA GPU when torch sees one and falls
back to the CPU with a warning when the GPU cannot take the model; "cuda" fails start-up
instead. On CUDA (bf16 by default, fp16 or fp32 on request) decoding goes through
`GraphDecoder` (`engines/llm/cuda_graphs.py`): one captured decode step per cache bucket,
greedy argmax and the repetition penalty inside the graph, sampling right after it on the
GPU. `cuda_graphs = false`, or a model the graph decoder cannot drive, decodes eagerly
(logged). `forced_answers` (benchmarks only, `engines/llm/forced.py`): every step runs the
model as usual but emits the next token of a written answer (timing-equivalent decoding, for
random weights). On the graph decoder, streams asking together take turns: after its first
`FIRST_SLICE_TOKENS` tokens, and every `SLICE_TOKENS` after, a stream gives the thread to the
others waiting (`DecodeThread` `YIELD`) and later resumes by prefilling what the cache lost
(its prompt and answer so far after the shared prefix): without it a turn's first word
waited for every earlier whole answer (32 sessions on the H200 box, 5-6 a worker: the first
token 0.8 s after the endpoint). Not on the eager path: there a resume could re-read a long
history for seconds (the CPU), so answers go one at a time. With `batch_streams` > 1 the
streams instead decode together, one row each of a batched cache (`BatchDecoder`,
`engines/llm/batch_streams.py`): no slices, no resumes.

Precision on the CPU (measured on 2 cores with the bundled 0.5B model): fp32 with
dynamic int8 Linear layers (TTFT ~0.25 s, ~12.7 tok/s) beats bf16 (1.7 s, 8.7 tok/s) and plain
fp32 (0.9 s, 4.2 tok/s).
"""

from __future__ import annotations

import gc
import inspect
import logging
import threading
import time
import warnings
from collections.abc import AsyncIterator, Generator, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import aclosing, closing
from pathlib import Path
from typing import Any

import numpy as np

from common.cpu_priority import SPEAKING, THINKING
from engines.llm.answer_text import AnswerText
from engines.llm.base import ChatMessage
from engines.llm.batch_graphs import BatchDecoder
from engines.llm.batch_streams import BatchStreams
from engines.llm.cuda_graphs import GraphDecoder, Sampling, buckets_for
from engines.llm.decode_thread import YIELD, DecodeThread, Yield
from engines.llm.errors import InvalidInputError, LLMError, ModelLoadError
from engines.llm.forced import ForcedAnswers
from engines.llm.hidden_graphs import HiddenStateGraphs
from engines.llm.history import fit_history
from engines.llm.model_files import resolve_hf_dir
from engines.llm.placement import (
    Placement,
    choose_device,
    fall_back,
    kv_cache_bytes,
    memory_problem,
    weights_bytes,
)
from engines.llm.prompt import PromptBuilder
from engines.progress import load_step

logger = logging.getLogger(__name__)
_TOP_K = 50  # sampling candidates (top-p is applied within them)
_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "int8": 4}  # int8: dynamic quantization of fp32
# Tokens a stream decodes before the streams waiting go first, then between turns. First: a
# first chunk of a word or two (the GPU profile's `first_chunk_max_chars` = 6) and the start
# of the next word that closes it; 12 tokens (~50 characters) made the sixth of six streams
# asking together wait for five prefills and 60 tokens (~0.5 s on the H200 box) for its
# first word. Then: a few seconds of speech each, so that one round over a worker's streams
# (each resume re-prefills tens to hundreds of tokens) ends before the shortest first
# chunk's audio does.
FIRST_SLICE_TOKENS = 4
SLICE_TOKENS = 16


def resolve_precision(precision: str, device: str, bf16_ok: bool = True) -> str:
    """"auto" is int8 on the CPU and bf16 on CUDA (fp16 where the GPU has no bf16)."""
    if precision == "auto":
        if device.startswith("cuda"):
            return "bf16" if bf16_ok else "fp16"
        return "int8"
    if precision not in _BYTES or (precision == "int8" and device != "cpu"):
        raise InvalidInputError(f"precision {precision!r} is not available on {device}")
    return precision


class TransformersLLM:
    """A causal LM from a Hugging Face directory or GGUF file (None = bundled default)."""

    def __init__(
        self,
        model: str | None = None,
        *,
        device: str = "auto",
        precision: str = "auto",
        threads: int = 0,
        prompt: PromptBuilder,
        history_tokens: int = 1536,
        context_tokens: int = 4096,
        cuda_graphs: bool = True,
        temperature: float = 0.7,
        top_p: float = 0.9,
        repetition_penalty: float = 1.05,
        seed: int | None = None,
        forced_answers: str | None = None,
        batch_streams: int = 0,
    ) -> None:
        import torch

        placement = choose_device(device, torch.cuda.is_available)
        resolve_precision(precision, placement.device)  # a bad option fails before any load
        model_dir = resolve_hf_dir(model)
        self.name = model_dir.name
        self.prompt = prompt
        self.history_tokens = history_tokens
        self.context_tokens = context_tokens
        self._temperature = temperature
        self._top_p = top_p
        self._repetition_penalty = repetition_penalty
        self._seed = seed
        # Benchmarks only: written answers as the decoded tokens (module docstring).
        self._forced = ForcedAnswers.load(forced_answers) if forced_answers else None
        if self._forced is not None:
            logger.warning("LLM: timing-equivalent decoding: answers are written ones (%s)",
                           forced_answers)
        self._graph: GraphDecoder | None = None  # the CUDA path; None = eager decoding
        self._batch_rows = batch_streams if batch_streams > 1 else 0
        self._batch: BatchStreams | None = None  # streams decoded together (batch_streams)
        self._take_turns = False  # streams asking together take turns (the graph path)
        self._cache: Any = None  # DynamicCache of the last generation (eager path)
        self._cached_ids: list[int] = []  # the tokens that cache holds
        self.last_prefill_tokens = 0  # tokens the last call had to prefill (reuse diagnostics)
        self.last_token_times: list[float] = []  # perf_counter() of each token of the last call
        # One generation at a time; the thread owns the model. On a GPU it mostly waits for
        # the device, takes little CPU, and its first token gates the answer's first audio:
        # the speaking threads' priority, not the CPU decode's (common/cpu_priority.py).
        self._thread = DecodeThread("llm-decode", SPEAKING if placement.on_cuda else THINKING)
        self._probe_thread = ThreadPoolExecutor(1, thread_name_prefix="llm-text-end")
        self._cuda_graphs = cuda_graphs  # the probe's forward captured too (on CUDA)
        self._hidden_graphs: HiddenStateGraphs | None = None  # set by prepare_hidden_states
        try:
            self._thread.call(
                lambda: self._load(model_dir, placement, precision, threads, cuda_graphs)
            )
            self._warm_up()
        except BaseException:
            self._thread.close()
            raise

    # --- loading (on the decode thread) ----------------------------------------------------------

    def _load(self, model_dir: Path, placement: Placement, precision: str, threads: int,
              cuda_graphs: bool) -> None:
        import torch
        from transformers import AutoTokenizer

        if threads > 0:
            torch.set_num_threads(threads)
        try:
            self.tokenizer: Any = AutoTokenizer.from_pretrained(model_dir)
        except Exception as exc:
            raise ModelLoadError(f"cannot load the tokenizer from {model_dir}: {exc}") from exc
        if not getattr(self.tokenizer, "chat_template", None):
            raise ModelLoadError(f"{model_dir} has no chat template (not an instruct model?)")
        if placement.on_cuda:
            placement = self._load_cuda(model_dir, placement, precision, cuda_graphs)
        if not placement.on_cuda:
            self._thread.lower_to(THINKING)  # ("auto" fell back from the GPU: CPU work now)
            self.precision = resolve_precision(precision, "cpu")
            self.model = self._load_net(model_dir, "cpu", self.precision)
            if self._batch_rows:
                self._batch = self._batch_streams(graphs=False)
        self.device = placement.device
        self._take_turns = self._graph is not None  # a resume's prefill costs a few ms there
        self._eos = self._eos_ids()
        # transformers 5 renamed `past_key_values` to `cache`; `logits_to_keep=1` skips the
        # vocabulary projection for every prompt token but the last (a large prefill saving).
        params = inspect.signature(type(self.model).forward).parameters
        self._cache_kwarg = "cache" if "cache" in params else "past_key_values"
        self._keep_kwargs = {"logits_to_keep": 1} if "logits_to_keep" in params else {}

    def _load_cuda(self, model_dir: Path, placement: Placement, precision: str,
                   cuda_graphs: bool) -> Placement:
        """Load onto the GPU and capture the decode graphs; the placement it ended on."""
        import torch
        from transformers import AutoConfig

        device = placement.device
        try:
            free, total = torch.cuda.mem_get_info(device)
            bf16_ok = torch.cuda.is_bf16_supported()
        except RuntimeError as exc:  # busy (exclusive compute mode), broken driver, lost GPU
            return fall_back(placement, f"the GPU cannot be used ({exc})")
        self.precision = resolve_precision(precision, device, bf16_ok)
        size = _BYTES[self.precision]
        try:
            text = AutoConfig.from_pretrained(model_dir).get_text_config(decoder=True)
        except Exception as exc:
            raise ModelLoadError(f"cannot read {model_dir}/config.json: {exc}") from exc
        need = weights_bytes(model_dir, size) + kv_cache_bytes(
            text, self.context_tokens, size) * max(1, self._batch_rows)
        problem = memory_problem(need, free, total, device)
        if problem is not None:
            return fall_back(placement, problem)
        try:
            self.model = self._load_net(model_dir, device, self.precision)
            if self._batch_rows:
                self._batch = self._batch_streams(graphs=cuda_graphs)
            elif cuda_graphs:
                self._graph = self._graph_decoder()
        except torch.cuda.OutOfMemoryError as exc:
            self.model = self._graph = self._batch = None
            gc.collect()
            torch.cuda.empty_cache()
            return fall_back(placement, f"CUDA ran out of memory while loading: {exc}")
        return placement

    def _graph_decoder(self) -> GraphDecoder | None:
        import torch

        try:
            decoder = GraphDecoder(self.model, buckets_for(self.context_tokens))
            decoder.prepare()
        except torch.cuda.OutOfMemoryError:
            raise
        except Exception as exc:  # an architecture or transformers the decoder cannot drive
            logger.warning("LLM: no graph decoding (%s); decoding eagerly", exc)
            return None
        return decoder

    def _batch_streams(self, graphs: bool) -> BatchStreams:
        """The batched decoder (`batch_streams` rows) and the loop that serves it; a model it
        cannot drive fails the load (asked for by name, unlike the graph decoder's fallback)."""
        decoder = BatchDecoder(self.model, buckets_for(self.context_tokens), self._batch_rows,
                               graphs=graphs)
        decoder.prepare()
        sampling = Sampling(self._temperature, self._top_p, self._repetition_penalty, self._seed)
        return BatchStreams(self._thread, decoder, sampling, self._prefilled)

    def _prefilled(self, tokens: int) -> None:
        self.last_prefill_tokens = tokens

    def _load_net(self, model_dir: Path, device: str, precision: str) -> Any:
        import torch
        from transformers import AutoModelForCausalLM

        dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
        try:
            with load_step(logger, f"LLM {model_dir.name} ({device}, {precision})"):
                net: Any = AutoModelForCausalLM.from_pretrained(
                    model_dir, dtype=dtypes.get(precision, torch.float32)
                )
                net.eval()
                if precision == "int8":
                    with warnings.catch_warnings():
                        # torch marks its eager int8 path deprecated (torchao replaces it); it
                        # is still the fastest CPU option here and is measured in the benchmark.
                        warnings.simplefilter("ignore", UserWarning)
                        net = torch.ao.quantization.quantize_dynamic(
                            net, {torch.nn.Linear}, dtype=torch.qint8, inplace=True
                        )
                return net.to(device)
        except torch.cuda.OutOfMemoryError:
            raise
        except Exception as exc:
            raise ModelLoadError(f"cannot load LLM from {model_dir}: {exc}") from exc

    def _warm_up(self) -> None:
        """One 1-token turn: the first call pays ~1 s of kernel set-up, and its KV cache then
        holds the persona prompt, so a session's first real turn prefills only its own words."""
        with load_step(logger, "LLM warm-up (persona prompt into the KV cache)"):
            if (batch := self._batch) is not None:  # every row: no first turn prefills it
                ids = self.prompt_ids([ChatMessage("user", "Hello")])
                self._thread.call(lambda: batch.decoder.warm(ids))
                return
            self._thread.call(
                lambda: list(self._generate([ChatMessage("user", "Hello")], 1, (), None))
            )

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        eos = self.model.generation_config.eos_token_id
        ids.update(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if self.tokenizer.eos_token_id is not None:
            ids.add(int(self.tokenizer.eos_token_id))
        im_end = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        if isinstance(im_end, int) and im_end != self.tokenizer.unk_token_id:
            ids.add(im_end)
        return ids

    @property
    def graph_decoder(self) -> GraphDecoder | None:
        """The CUDA-graph decoder (None: eager decoding). Decode-thread use only."""
        return self._graph

    def last_hidden_state(self, prompt: str) -> Future[np.ndarray]:
        """The model's last hidden state (after the final norm) at the last token of `prompt`
        (its special tokens read as such): the text-end probe's reading of a user's words
        (engines/turn/text_end.py). One eager forward without a cache (so it never disturbs the
        cache an answer reuses) on its own thread: on the decode thread it waited behind the
        answer the pause had already started (~0.5 s on the H200)."""
        return self._probe_thread.submit(lambda: self._last_hidden(prompt))

    def prepare_hidden_states(self, sample: str) -> Future[None]:
        """On CUDA with `cuda_graphs`: capture the probe's forward per prompt-length bucket
        (engines/llm/hidden_graphs.py; checked against the eager forward on `sample`), on
        the probe's thread. Elsewhere nothing: the eager forward."""
        return self._probe_thread.submit(lambda: self._capture_hidden(sample))

    def _capture_hidden(self, sample: str) -> None:
        if not (self._cuda_graphs and self.model.device.type == "cuda"):
            return
        ids = self.tokenizer.encode(sample, add_special_tokens=False)
        try:
            graphs = HiddenStateGraphs(self.model)
        except Exception as exc:  # noqa: BLE001 - a model it cannot drive: the eager forward
            logger.warning("text-end probe graphs not set up (%s): the eager forward", exc)
            return
        graphs.capture(ids, lambda: self._eager_hidden(ids))
        if graphs.captured:
            self._hidden_graphs = graphs

    def _last_hidden(self, prompt: str) -> np.ndarray:
        ids = self.tokenizer.encode(prompt, add_special_tokens=False)
        if not ids:
            raise InvalidInputError("an empty prompt has no hidden state")
        if self._hidden_graphs is not None:
            hidden = self._hidden_graphs.padded(ids)
            if hidden is not None:
                return hidden
        return self._eager_hidden(ids)

    def _eager_hidden(self, ids: list[int]) -> np.ndarray:
        import torch

        tokens = torch.tensor([ids], device=self.model.device)
        with torch.inference_mode():
            out = self.model.model(input_ids=tokens, use_cache=False)
        return np.asarray(out.last_hidden_state[0, -1].float().cpu().numpy())

    def embedding_rows(self, rows: Sequence[int], cols: int) -> np.ndarray:
        """`cols` values of each of `rows` of the token embedding (a fingerprint of the
        weights: engines/turn/text_end.py)."""
        def read() -> np.ndarray:
            weight = self.model.model.embed_tokens.weight
            kept = [r for r in rows if r < weight.shape[0]]
            return np.asarray(weight[kept, :cols].detach().float().cpu().numpy())

        return self._thread.call(read)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def prompt_ids(self, messages: Sequence[ChatMessage]) -> list[int]:
        """Token ids of the chat prompt actually sent (persona added, history trimmed)."""
        msgs = self.prompt.messages(messages)
        msgs = [*msgs[:1], *fit_history(msgs[1:], self.count_tokens, self.history_tokens)]
        ids: Any = self.tokenizer.apply_chat_template(
            [{"role": m.role, "content": m.content} for m in msgs],
            add_generation_prompt=True,
            tokenize=True,
        )
        if isinstance(ids, dict) or hasattr(ids, "keys"):  # BatchEncoding in transformers 5
            ids = ids["input_ids"]
        return [int(i) for i in ids]

    def stream(
        self, messages: Sequence[ChatMessage], *, max_new_tokens: int, stop: Sequence[str] = ()
    ) -> AsyncIterator[str]:
        """Text deltas of the answer to `messages` (see the module docstring)."""
        if max_new_tokens <= 0:
            raise InvalidInputError(f"max_new_tokens must be > 0, got {max_new_tokens}")
        stops = [*stop, *self.prompt.stops]
        if self._batch is not None:
            return self._batch_stream(messages, max_new_tokens, stops)
        return self._thread.stream(
            lambda cancel: self._generate(messages, max_new_tokens, stops, cancel)
        )

    async def _batch_stream(self, messages: Sequence[ChatMessage], max_new_tokens: int,
                            stops: Sequence[str]) -> AsyncIterator[str]:
        assert self._batch is not None
        ids = self.prompt_ids(messages)  # (the tokenizer only: ~1 ms)
        times: list[float] = []
        self.last_token_times = times
        text = AnswerText(self.tokenizer, self._eos, stops)
        async with aclosing(self._batch.stream(ids, max_new_tokens, self._forced_ids(messages),
                                               text, times)) as deltas:
            async for delta in deltas:
                yield delta

    def warm(self, messages: Sequence[ChatMessage]) -> None:
        """Not implemented for this engine (the hint is ignored)."""

    def close(self) -> None:
        self._probe_thread.shutdown(wait=False, cancel_futures=True)
        self._thread.close()

    def _generate(
        self,
        messages: Sequence[ChatMessage],
        max_new_tokens: int,
        stop: Sequence[str],
        cancel: threading.Event | None,
    ) -> Iterator[str | Yield]:
        """Decode on the calling (decode) thread, yielding text as tokens complete it (and
        `YIELD` where the streams waiting may go first)."""
        ids = self.prompt_ids(messages)
        forced = self._forced_ids(messages)
        text = AnswerText(self.tokenizer, self._eos, stop)
        times: list[float] = []
        self.last_token_times = times
        try:
            with closing(self._tokens(ids, max_new_tokens, cancel, forced)) as tokens:
                for token in tokens:
                    if isinstance(token, Yield):
                        yield token
                        continue
                    times.append(time.perf_counter())
                    if out := text.feed(token):
                        yield out
                    if text.done:
                        break
        except InvalidInputError:
            raise
        except Exception as exc:
            raise LLMError(f"generation failed: {exc}") from exc
        if tail := text.flush():
            yield tail

    def _forced_ids(self, messages: Sequence[ChatMessage]) -> list[int] | None:
        """The written answer's tokens and an end of turn (None: decode the model's own)."""
        if self._forced is None:
            return None
        question = next((m.content for m in reversed(messages) if m.role == "user"), "")
        answer = self._forced.pick(question)
        end = min(self._eos) if self._eos else None
        im_end = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        if isinstance(im_end, int) and im_end in self._eos:
            end = im_end
        ids = [int(i) for i in self.tokenizer.encode(answer, add_special_tokens=False)]
        return ids + ([end] if end is not None else [])

    def _tokens(
        self, ids: list[int], max_new_tokens: int, cancel: threading.Event | None,
        forced: list[int] | None = None,
    ) -> Generator[int | Yield, None, None]:
        """Answer token ids (EOS included: the caller stops there); `forced`: those. Between
        slices, where another stream waits, `YIELD`; the next slice decodes on from the
        prompt plus the tokens so far (sampling's repetition penalty restarts there)."""
        produced: list[int] = []
        until = FIRST_SLICE_TOKENS
        while len(produced) < max_new_tokens:
            rest = None if forced is None else forced[len(produced):]
            if rest is not None and not rest:
                return
            with closing(self._decoded(ids + produced, max_new_tokens - len(produced), cancel,
                                       rest)) as tokens:
                for token in tokens:
                    produced.append(token)
                    yield token
                    if (self._take_turns and len(produced) >= until
                            and self._thread.others_waiting()):
                        break
                else:
                    return
            until = len(produced) + SLICE_TOKENS
            yield YIELD

    def _decoded(
        self, ids: list[int], max_new_tokens: int, cancel: threading.Event | None,
        forced: list[int] | None = None,
    ) -> Generator[int, None, None]:
        """One decode of `ids`' answer on the graph decoder, else eagerly."""
        if self._graph is None:
            yield from self._decode(ids, max_new_tokens, cancel, forced)
            return
        sampling = Sampling(self._temperature, self._top_p, self._repetition_penalty, self._seed)
        # closing(): stopping here stops the decoder now, which records what the cache holds.
        with closing(self._graph.decode(ids, max_new_tokens, sampling, cancel,
                                        forced)) as decoded:
            for token in decoded:
                self.last_prefill_tokens = self._graph.last_prefill_tokens
                yield token

    def _decode(
        self, ids: list[int], max_new_tokens: int, cancel: threading.Event | None,
        forced: list[int] | None = None,
    ) -> Iterator[int]:
        """The eager path (CPU, or CUDA without graphs): a DynamicCache, one forward a token."""
        import torch
        from transformers import DynamicCache

        # Reuse the cached prefix; at least the last prompt token must be fed to get logits.
        reuse = 0
        for a, b in zip(self._cached_ids, ids[:-1], strict=False):
            if a != b:
                break
            reuse += 1
        if self._cache is None or reuse == 0:
            self._cache, reuse = DynamicCache(), 0
        elif self._cache.get_seq_length() > reuse:
            # A negative count means "drop this many from the end" in transformers 4.x and 5.x.
            self._cache.crop(reuse - self._cache.get_seq_length())
        self._cached_ids = ids[:reuse]
        self.last_prefill_tokens = len(ids) - reuse
        generator = torch.Generator(device=self.device)
        if self._seed is not None:
            generator.manual_seed(self._seed)
        else:
            generator.seed()
        generated: list[int] = []
        feed = ids[reuse:]
        try:
            with torch.inference_mode():
                for _ in range(max_new_tokens):
                    if cancel is not None and cancel.is_set():
                        break
                    inputs = torch.tensor([feed], device=self.device)
                    kwargs = {self._cache_kwarg: self._cache, **self._keep_kwargs}
                    logits = self.model(input_ids=inputs, use_cache=True, **kwargs).logits[
                        :, -1, :
                    ]
                    self._cached_ids.extend(feed)
                    token = self._sample(logits.float(), generated, generator)
                    if forced is not None:  # chosen (the work is done), then replaced
                        token = forced[min(len(generated), len(forced) - 1)]
                    yield token
                    if token in self._eos:
                        break
                    generated.append(token)
                    feed = [token]
        except Exception:  # (closing at a yield leaves the cache consistent: not this)
            self._cache, self._cached_ids = None, []  # unknown state: start clean next time
            raise

    def _sample(self, logits: Any, generated: list[int], generator: Any) -> int:
        import torch

        if generated and self._repetition_penalty != 1.0:
            # Penalize what this answer already said (not the prompt: echoing the user is fine).
            prev = torch.tensor(sorted(set(generated)), device=logits.device)
            scores = logits[0, prev]
            logits[0, prev] = torch.where(
                scores > 0, scores / self._repetition_penalty, scores * self._repetition_penalty
            )
        if self._temperature <= 0:
            return int(torch.argmax(logits, dim=-1).item())
        # Top-p over the 50 best tokens only: sorting the whole 150k vocabulary costs ~50 ms
        # per token on a busy CPU core, more than the int8 forward pass itself.
        top, index = torch.topk(logits[0], _TOP_K)
        probs = torch.softmax(top / self._temperature, dim=-1)
        if self._top_p < 1.0:
            probs = probs * (torch.cumsum(probs, dim=0) - probs < self._top_p)
        choice = torch.multinomial(probs / probs.sum(), 1, generator=generator)
        return int(index[choice].item())

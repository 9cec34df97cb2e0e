"""Graph-captured decoding for the transformers engine: one static KV cache, one captured
decode step per cache-size bucket, prompt-prefix reuse across turns.

Contract: a `GraphDecoder` belongs to the engine's decode thread (the thread that owns the
CUDA context); every method must be called there. `prepare()` allocates the cache and, on
CUDA, captures one decode step per bucket (`torch.cuda.CUDAGraph`). `decode(ids, n, sampling)`
yields token ids: the prompt tokens after the longest common prefix with the tokens the cache
already holds are prefilled eagerly (the cache positions after that prefix are simply
overwritten), then each new token is one graph replay. Closing the iterator stops it at the
next token; the cache then holds exactly the tokens that were fed, for the next call's reuse.

What the captured step does, all on static tensors: mark the input token as said (the
repetition penalty covers what this answer already said, as on the CPU path), attend over the
first `bucket` cache positions (an additive mask computed from the position in the graph),
penalize, take the greedy argmax, feed it back as the next input and advance the position.
Greedy decoding therefore never leaves the GPU between tokens, and the host keeps one step in
flight ahead of the token it reads, so the Python work per token (detokenizing, handing the
text to the event loop) overlaps the GPU. Sampling (temperature > 0) runs top-k/top-p and the
draw on the GPU right after the replay, outside the graph, and overwrites the fed-back token.

A turn's new prompt tokens (its words, the last answer's tail, the template's markers: a few
dozen) are prefilled by a captured graph too, one per (cache bucket, prefill length) with the
tokens padded to the length: the pads' keys and values land after the prompt, are never
visible to it (the mask is by position) and are overwritten by the answer's tokens. Eager,
a prefill costs ~60 ms of Python and kernel launches whatever its length (measured on the
H200); longer prompts (the persona at warm-up, a conversation that changed) still go eagerly.

Bucket choice: the smallest bucket that holds prompt + answer; a smaller bucket attends over
fewer positions, so short conversations decode faster. All buckets share the one cache (a
bucket's graph sees a view of its first positions), so switching buckets keeps the prefix.
On the CPU (tests) the same step runs eagerly: every line of it but the capture is exercised.

`decode(..., forced=ids)` (benchmarks only, `engines/llm/forced.py`): every step runs as
above, then the token it chose is overwritten on the device by the next of `ids` (a copy, no
host sync, as sampling overwrites it), so the answer and what the cache holds are `ids`.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections import deque
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from engines.llm.errors import InvalidInputError, ModelLoadError
from engines.progress import load_step

logger = logging.getLogger(__name__)

TOP_K = 50  # sampling candidates (top-p applies within them), as on the CPU path
PREFILL_CHUNK = 512  # prompt tokens per eager forward (bounds the prefill's attention memory)
PREFILL_GRAPHS = (16, 32, 64, 128, 256)  # prompt lengths with a captured prefill
IN_FLIGHT = 2  # decode steps queued on the GPU ahead of the host


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0  # <= 0: greedy (inside the graph)
    top_p: float = 1.0
    repetition_penalty: float = 1.0  # 1.0 = off; applied inside the graph
    seed: int | None = None


def capture_graph(step: Callable[[], None], device: Any, pool: Any,
                  warm: Callable[[], None] = lambda: None) -> Any:
    """`step` captured as a CUDA graph, after two warm-up runs on a side stream (as
    torch.cuda.graphs requires; `warm()` before each, outside the graph); `pool`: the memory
    pool the decoder's graphs share."""
    import torch

    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        for _ in range(2):
            warm()
            step()
    torch.cuda.current_stream(device).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    # thread_local: other threads (the face model's) may use CUDA while this one captures.
    with torch.cuda.graph(graph, pool=pool, capture_error_mode="thread_local"):
        step()
    return graph


def capture_buckets(buckets: Sequence[int], capture: Callable[[Callable[[], None]], Any],
                    step: Callable[[int], None], prefill: Callable[[int, int], None],
                    ) -> tuple[dict[int, Any], dict[tuple[int, int], Any]]:
    """The decode step per cache bucket and the prefill per (bucket, length) that fits."""
    steps: dict[int, Any] = {}
    prefills: dict[tuple[int, int], Any] = {}
    for size in buckets:
        steps[size] = capture(functools.partial(step, size))
        for n in PREFILL_GRAPHS:
            if n <= size:
                prefills[size, n] = capture(functools.partial(prefill, size, n))
    return steps, prefills


def bucket_for(buckets: Sequence[int], tokens: int) -> int:
    """The smallest of the (sorted) `buckets` that holds `tokens` (prompt + answer)."""
    for size in buckets:
        if tokens <= size:
            return size
    raise InvalidInputError(
        f"prompt + answer of {tokens} tokens exceeds the largest KV cache "
        f"({buckets[-1]}): lower history_tokens or raise context_tokens"
    )


def buckets_for(context_tokens: int) -> tuple[int, ...]:
    """Cache sizes that get a captured step: a quarter, a half and all of the context."""
    return tuple(sorted({max(256, context_tokens // 4), max(256, context_tokens // 2),
                         context_tokens}))


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@functools.cache
def _window_layer() -> type:
    """A transformers `StaticLayer` whose `update` returns only the first `window` positions:
    the graph captured for a small bucket attends over that view of the shared cache."""
    from transformers.cache_utils import StaticLayer

    class WindowLayer(StaticLayer):
        window = 0

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> Any:
            keys, values = super().update(key_states, value_states, *args, **kwargs)
            return keys[:, :, : self.window], values[:, :, : self.window]

    return WindowLayer


def check_supported(model: Any) -> None:
    """Raise `ModelLoadError` for models this decoder cannot drive (sliding-window or hybrid
    attention)."""
    config = model.config.get_text_config(decoder=True)
    kinds = set(getattr(config, "layer_types", None) or ["full_attention"])
    if kinds != {"full_attention"} or getattr(config, "use_sliding_window", False):
        raise ModelLoadError(f"graph decoding needs full attention in every layer, got {kinds}")


class GraphDecoder:
    """Static-cache decoding of one causal LM (see the module docstring)."""

    def __init__(self, model: Any, buckets: Sequence[int], *, graphs: bool = True) -> None:
        import torch
        from transformers.cache_utils import Cache

        check_supported(model)
        if not buckets or min(buckets) < 2:
            raise InvalidInputError(f"bad cache buckets {buckets!r}")
        self._torch = torch
        self.model = model
        self.buckets = tuple(sorted(set(buckets)))
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.on_cuda = self.device.type == "cuda"
        self.use_graphs = graphs and self.on_cuda
        # transformers 5.24 names the forward's cache argument `cache`, 5.17 `past_key_values`.
        params = inspect.signature(type(model).forward).parameters
        self._cache_kwarg = "cache" if "cache" in params else "past_key_values"
        config = model.config.get_text_config(decoder=True)
        self._layer_count = int(config.num_hidden_layers)
        layer = _window_layer()
        size = self.buckets[-1]
        self._layers: list[Any] = [layer(max_cache_len=size) for _ in range(self._layer_count)]
        self._cache: Any = Cache(layers=self._layers)
        if not hasattr(self._layers[0], "cumulative_length"):  # transformers < 5.17?
            raise ModelLoadError("this transformers' StaticLayer keeps no cumulative_length")
        dev = self.device
        # Every layer counts the positions it has written; one tensor holds all the counts,
        # so moving the write position is one kernel, not one per layer.
        self._counts = torch.zeros(self._layer_count, dtype=torch.long, device=dev)
        for i, each in enumerate(self._layers):
            each.cumulative_length = self._counts[i]
        vocab = int(model.get_output_embeddings().weight.shape[0])
        self._token = torch.zeros((1, 1), dtype=torch.long, device=dev)  # the fed token
        self._pos = torch.zeros((1, 1), dtype=torch.long, device=dev)  # its position
        self._seen = torch.zeros(vocab, dtype=torch.bool, device=dev)  # said in this answer
        self._penalty = torch.ones((), dtype=torch.float32, device=dev)
        self._next = torch.zeros(1, dtype=torch.long, device=dev)  # the step's greedy token
        self._logits = torch.zeros((1, vocab), dtype=torch.float32, device=dev)  # penalized
        self._arange = torch.arange(size, device=dev)
        self._neg = torch.finfo(self.dtype).min
        self._pf_ids = {n: torch.zeros((1, n), dtype=torch.long, device=dev)
                        for n in PREFILL_GRAPHS}  # a captured prefill's (padded) tokens
        self._pf_start = torch.zeros(1, dtype=torch.long, device=dev)  # its first position
        self._pf_last = torch.zeros(1, dtype=torch.long, device=dev)  # its last real token
        self._first_logits = torch.zeros((1, vocab), dtype=torch.float32, device=dev)
        self._graphs: dict[int, Any] = {}  # decode step per cache bucket
        self._prefills: dict[tuple[int, int], Any] = {}  # (bucket, length) -> prefill graph
        # One memory pool for all the graphs: each one's outputs are copied into the static
        # tensors above and replays never overlap, so their scratch memory may be shared.
        self._pool = torch.cuda.graph_pool_handle() if self.use_graphs else None
        if self.on_cuda:
            self._host = torch.zeros(IN_FLIGHT, dtype=torch.long, pin_memory=True)
            # Blocking: the decode thread sleeps until its token is there instead of
            # spinning a core (~0.07 of one per worker at 32 sessions, py-spy on the H200).
            self._events = [torch.cuda.Event(blocking=True) for _ in range(IN_FLIGHT)]
        else:
            self._host = torch.zeros(IN_FLIGHT, dtype=torch.long)
            self._events = []
        self.cached_ids: list[int] = []  # the tokens the cache holds, in order
        self.last_prefill_tokens = 0

    # --- set-up ------------------------------------------------------------------------------

    def prepare(self) -> None:
        """Allocate the cache (one eager token) and capture the decode and prefill graphs."""
        torch = self._torch
        with torch.inference_mode():
            self._prefill([0], 0, self.buckets[0])  # lazy cache allocation happens here
            self.reset()
            # Load the sampling kernels now: CUDA loads modules lazily, and the first draw
            # would otherwise cost a session's first sampled answer ~90 ms (measured).
            self._sample(self._logits, Sampling(temperature=1.0, top_p=0.9), self._generator(0))
            if not self.use_graphs:
                return
            with load_step(logger, f"LLM decode and prefill graphs, cache buckets {self.buckets}"):
                self._graphs, self._prefills = capture_buckets(
                    self.buckets, self._capture, self._step, self._prefill_step)

    def reset(self) -> None:
        """Forget what the cache holds (the next prompt is prefilled whole)."""
        self.cached_ids = []

    def _capture(self, step: Any) -> Any:
        self._set_length(0)
        self._pos.zero_()
        self._pf_start.zero_()
        self._pf_last.zero_()
        return capture_graph(step, self.device, self._pool, warm=lambda: self._set_length(0))

    # --- the two forwards ----------------------------------------------------------------------

    def _set_window(self, size: int) -> None:
        for layer in self._layers:
            layer.window = size

    def _set_length(self, n: int) -> None:
        """Where the next token goes: transformers' static layers count written positions."""
        self._counts.fill_(n)

    def _forward(self, ids: Any, positions: Any, mask: Any, keep: Any = 1) -> Any:
        kwargs = {self._cache_kwarg: self._cache}
        out = self.model(input_ids=ids, position_ids=positions, attention_mask=mask,
                         use_cache=True, logits_to_keep=keep, **kwargs)
        return out.logits[:, -1, :].float()

    def _prefill_step(self, size: int, n: int) -> None:
        """A prefill of `n` (padded) tokens from `_pf_start` (this is what its graph holds)."""
        torch = self._torch
        self._set_window(size)
        positions = (self._pf_start + self._arange[:n]).view(1, n)
        visible = self._arange[:size].view(1, size) <= positions.view(n, 1)
        mask = torch.where(visible, 0.0, self._neg).to(self.dtype).view(1, 1, n, size)
        logits = self._forward(self._pf_ids[n], positions, mask, keep=self._pf_last)
        self._first_logits.copy_(logits)

    def _step(self, size: int) -> None:
        """One decode step on the static tensors (this is what the graph holds)."""
        torch = self._torch
        self._set_window(size)
        self._seen.index_fill_(0, self._token.view(-1), True)
        visible = self._arange[:size] <= self._pos.view(1)
        mask = torch.where(visible, 0.0, self._neg).to(self.dtype).view(1, 1, 1, size)
        logits = self._forward(self._token, self._pos, mask)
        p = self._penalty
        logits = torch.where(self._seen, torch.where(logits > 0, logits / p, logits * p), logits)
        self._logits.copy_(logits)
        best = logits.argmax(dim=-1)
        self._next.copy_(best)
        self._token.copy_(best.view(1, 1))
        self._pos.add_(1)

    def _prefill(self, ids: Sequence[int], start: int, size: int) -> Any:
        """Feed `ids` at positions start..; the logits after the last one. A captured graph
        when one fits (see the module docstring), else eagerly in chunks."""
        torch = self._torch
        n = next((n for n in PREFILL_GRAPHS if n >= len(ids)), 0)
        graph = self._prefills.get((size, n))
        if graph is not None and start + n <= size:
            self._pf_ids[n][0, : len(ids)].copy_(torch.tensor(list(ids), dtype=torch.long))
            self._pf_start.fill_(start)
            self._pf_last.fill_(len(ids) - 1)
            self._set_length(start)
            graph.replay()
            self._set_length(start + len(ids))  # the pads after the prompt do not count
            return self._first_logits
        self._set_window(size)
        self._set_length(start)
        logits = None
        for at in range(0, len(ids), PREFILL_CHUNK):
            part = ids[at : at + PREFILL_CHUNK]
            first = start + at
            positions = torch.arange(first, first + len(part), device=self.device).view(1, -1)
            visible = self._arange[:size].view(1, size) <= positions.view(-1, 1)
            mask = torch.where(visible, 0.0, self._neg).to(self.dtype)
            inp = torch.tensor([list(part)], dtype=torch.long, device=self.device)
            logits = self._forward(inp, positions, mask.view(1, 1, len(part), size))
        assert logits is not None
        return logits

    # --- decoding -------------------------------------------------------------------------------

    def bucket_for(self, tokens: int) -> int:
        return bucket_for(self.buckets, tokens)

    def decode(self, ids: Sequence[int], max_new_tokens: int, sampling: Sampling,
               cancel: threading.Event | None = None,
               forced: Sequence[int] | None = None) -> Generator[int, None, None]:
        """Token ids of the answer to prompt `ids` (see the module docstring); with `forced`,
        at most those tokens, each step's own choice replaced by them."""
        if not ids or max_new_tokens < 1:
            raise InvalidInputError("decode needs prompt tokens and max_new_tokens >= 1")
        if forced is not None:
            if not forced:
                raise InvalidInputError("forced decoding needs at least one token")
            max_new_tokens = min(max_new_tokens, len(forced))
        size = self.bucket_for(len(ids) + max_new_tokens)
        return self._decode(list(ids), max_new_tokens, sampling, size, cancel, forced)

    def _decode(self, ids: list[int], max_new_tokens: int, sampling: Sampling, size: int,
                cancel: threading.Event | None,
                forced: Sequence[int] | None = None) -> Generator[int, None, None]:
        torch = self._torch
        written = None if forced is None else torch.tensor(
            list(forced[:max_new_tokens]), dtype=torch.long, device=self.device)
        # At least the last prompt token is fed: its logits give the first answer token.
        reuse = common_prefix(self.cached_ids, ids[:-1])
        self.last_prefill_tokens = len(ids) - reuse
        self.cached_ids = ids[:reuse]  # valid even if the prefill fails half-way
        produced: list[int] = []
        outstanding: deque[int] = deque()
        fed = 0  # decode steps launched; step j feeds produced[j]
        with torch.inference_mode():
            logits = self._prefill(ids[reuse:], reuse, size)
            self.cached_ids = ids
            self._seen.zero_()
            self._penalty.fill_(max(sampling.repetition_penalty, 1e-6))
            generator = self._generator(sampling.seed)
            first = self._choose(logits, sampling, generator)
            if written is not None:
                first = written[:1]  # chosen (the work is done), then replaced
            self._token.copy_(first.view(1, 1))
            self._pos.fill_(len(ids))
            try:
                produced.append(int(first.item()))
                yield produced[0]
                while len(produced) < max_new_tokens:
                    if cancel is not None and cancel.is_set():
                        return
                    while fed < max_new_tokens - 1 and len(outstanding) < IN_FLIGHT:
                        outstanding.append(self._launch(size, sampling, generator, fed,
                                                        written))
                        fed += 1
                    produced.append(self._read(outstanding.popleft()))
                    yield produced[-1]
            finally:
                # Steps still in flight fed their tokens too: read them, so the bookkeeping
                # of what the cache holds is exact.
                while outstanding:
                    produced.append(self._read(outstanding.popleft()))
                self.cached_ids = ids + produced[:fed]

    def _launch(self, size: int, sampling: Sampling, generator: Any, index: int,
                written: Any = None) -> int:
        slot = index % IN_FLIGHT
        if self.use_graphs:
            self._graphs[size].replay()
        else:
            self._step(size)
        if sampling.temperature > 0:
            token = self._sample(self._logits, sampling, generator)
            self._next.copy_(token)
            self._token.copy_(token.view(1, 1))
        if written is not None:  # step `index` feeds answer token `index`, makes `index + 1`
            token = written[index + 1 : index + 2]
            self._next.copy_(token)
            self._token.copy_(token.view(1, 1))
        self._host[slot].copy_(self._next[0], non_blocking=self.on_cuda)
        if self.on_cuda:
            self._events[slot].record()
        return slot

    def _read(self, slot: int) -> int:
        if self.on_cuda:
            self._events[slot].synchronize()
        return int(self._host[slot])

    def _generator(self, seed: int | None) -> Any:
        generator = self._torch.Generator(device=self.device)
        if seed is not None:
            generator.manual_seed(seed)
        else:
            generator.seed()
        return generator

    def _choose(self, logits: Any, sampling: Sampling, generator: Any) -> Any:
        if sampling.temperature > 0:
            return self._sample(logits, sampling, generator)
        return logits.argmax(dim=-1)

    def _sample(self, logits: Any, sampling: Sampling, generator: Any) -> Any:
        return draw(logits[0], sampling, generator)


def draw(logits: Any, sampling: Sampling, generator: Any) -> Any:
    """Top-k (50), top-p and a draw from one row of logits, on its device, without a host
    sync: [1] long."""
    import torch

    top, index = torch.topk(logits, TOP_K)
    probs = torch.softmax(top / sampling.temperature, dim=-1)
    if sampling.top_p < 1.0:
        probs = probs * ((torch.cumsum(probs, dim=0) - probs) < sampling.top_p)
    return index[torch.multinomial(probs, 1, generator=generator)]

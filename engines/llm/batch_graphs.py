"""Batched graph decoding: the streams of one process decoded together, one row each.

Why: on the graph decoder (engines/llm/cuda_graphs.py) streams asking together take turns,
and each resume re-prefills the stream's conversation after the shared persona; at 32
sessions on the H200 box (4-6 a worker) the slowest answers' first token came 300-700 ms after
the endpoint (bench/RESULTS.md, gpu). A decode step for B streams costs little more than for
one (the 1.5B model: 4.1 ms for one, 5.5 for six; `bench/gpu_llm_batch.py`), so here every
stream has a row of one static KV cache [B, heads, positions, dim] and all rows step at once.

Contract: a `BatchDecoder` belongs to the engine's decode thread, like `GraphDecoder`.

- A row holds one conversation at its own positions (slot = position, as in `GraphDecoder`):
  `admit(ids)` picks the free row whose held tokens share the longest prefix with `ids` (the
  same session's last turn, or at least the persona), prefills the rest into that row and
  returns the first token's logits. Rows are not tied to sessions; a row is busy from
  `admit` to `release`.
- `step()` runs one decode step for all rows: each active row feeds its token at its
  position and advances; inactive rows write into a scratch region past every bucket (never
  attended) and do not move. Greedy argmax and the repetition penalty (per row) run inside
  the step; the host chooses what each row feeds next (`feed(row, token)`: the greedy token,
  a draw, a written answer's), sent over in one transfer before the next step.
- Each forward writes a row's keys at that row's positions: the cache layers scatter by a
  per-row index (`_RowLayer`) instead of transformers' one shared write position.
- A prefill is one row's forward ([1, n] tokens): its keys go into its row (`index_put_` by
  row, head and position), it attends over its row; captured per (bucket, length).

On the CPU (tests) the same step and prefill run eagerly; on CUDA each is a captured graph.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Sequence
from typing import Any

from engines.llm.cuda_graphs import (
    PREFILL_GRAPHS,
    bucket_for,
    capture_buckets,
    capture_graph,
    check_supported,
    common_prefix,
)
from engines.llm.errors import InvalidInputError
from engines.progress import load_step

logger = logging.getLogger(__name__)


@functools.cache
def _row_layer() -> type:
    """A transformers `StaticLayer` that writes each row's keys at that row's own positions
    (`index`: [B, n] slots, set by the decoder before a forward) and returns the first
    `window` positions. With `row` set (a [1] tensor) the forward is one row's prefill
    ([1, n] tokens): its keys go into that row only and it attends over that row only."""
    from transformers.cache_utils import StaticLayer

    class RowLayer(StaticLayer):
        window = 0
        index: Any = None
        row: Any = None
        heads: Any = None  # arange(heads) as [heads, 1], for the one-row write

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> Any:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            keys: Any = self.keys
            values: Any = self.values
            b, h, n, _ = key_states.shape
            if self.row is not None:
                at = (self.row.view(1, 1), self.heads, self.index.view(1, n))
                keys.index_put_(at, key_states[0])
                values.index_put_(at, value_states[0])
                return (keys.index_select(0, self.row)[:, :, : self.window],
                        values.index_select(0, self.row)[:, :, : self.window])
            at = self.index.view(b, 1, n, 1)
            keys.scatter_(2, at.expand(b, h, n, self.k_head_dim), key_states)
            values.scatter_(2, at.expand(b, h, n, self.v_head_dim), value_states)
            return keys[:, :, : self.window], values[:, :, : self.window]

    return RowLayer


class BatchDecoder:
    """`rows` streams of one causal LM on one static cache (see the module docstring)."""

    def __init__(self, model: Any, buckets: Sequence[int], rows: int, *,
                 graphs: bool = True) -> None:
        import torch
        from transformers.cache_utils import Cache

        check_supported(model)
        if not buckets or min(buckets) < 2 or rows < 1:
            raise InvalidInputError(f"bad cache buckets {buckets!r} or rows {rows}")
        self._torch = torch
        self.model = model
        self.rows = rows
        self.buckets = tuple(sorted(set(buckets)))
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.use_graphs = graphs and self.device.type == "cuda"
        params = inspect.signature(type(model).forward).parameters
        self._cache_kwarg = "cache" if "cache" in params else "past_key_values"
        config = model.config.get_text_config(decoder=True)
        size = self.buckets[-1]
        # Inactive rows write here, and a padded prefill's pads may reach it: never attended.
        self.scratch = size
        layer = _row_layer()
        self._layers = [layer(max_cache_len=size + PREFILL_GRAPHS[-1])
                        for _ in range(int(config.num_hidden_layers))]
        heads = int(getattr(config, "num_key_value_heads", None) or config.num_attention_heads)
        for each in self._layers:
            each.heads = torch.arange(heads, device=self.device).view(heads, 1)
        self._cache: Any = Cache(layers=self._layers)
        dev = self.device
        weight = model.get_output_embeddings().weight
        vocab = int((weight() if callable(weight) else weight).shape[0])  # () int8 on the CPU
        self._token = torch.zeros((rows, 1), dtype=torch.long, device=dev)
        self._pos = torch.zeros((rows, 1), dtype=torch.long, device=dev)
        self._active = torch.zeros((rows, 1), dtype=torch.bool, device=dev)
        self._seen = torch.zeros((rows, vocab), dtype=torch.bool, device=dev)
        self._penalty = torch.ones((rows, 1), dtype=torch.float32, device=dev)
        self.logits = torch.zeros((rows, vocab), dtype=torch.float32, device=dev)  # penalized
        self._next = torch.zeros(rows, dtype=torch.long, device=dev)
        self._arange = torch.arange(size, device=dev)
        self._neg = torch.finfo(self.dtype).min
        self._step_index = torch.zeros((rows, 1), dtype=torch.long, device=dev)
        # A prefill's inputs: the row, its (padded) tokens, first position and last real token.
        self._pf_row = torch.zeros(1, dtype=torch.long, device=dev)
        self._pf_ids = {n: torch.zeros((1, n), dtype=torch.long, device=dev)
                        for n in PREFILL_GRAPHS}
        self._pf_start = torch.zeros(1, dtype=torch.long, device=dev)
        self._pf_last = torch.zeros(1, dtype=torch.long, device=dev)
        self._first_logits = torch.zeros((1, vocab), dtype=torch.float32, device=dev)
        self._graphs: dict[int, Any] = {}
        self._prefills: dict[tuple[int, int], Any] = {}
        self._pool = torch.cuda.graph_pool_handle() if self.use_graphs else None
        on_cuda = self.device.type == "cuda"
        self._host = torch.zeros(rows, dtype=torch.long, pin_memory=on_cuda)
        # What the host chose for the next step, copied over in one transfer each.
        self._feed_tokens = torch.zeros((rows, 1), dtype=torch.long, pin_memory=on_cuda)
        self._feed_active = torch.zeros((rows, 1), dtype=torch.bool, pin_memory=on_cuda)
        # Blocking: the thread sleeps until the step is done instead of spinning a core.
        self._done = torch.cuda.Event(blocking=True) if on_cuda else None
        self.held: list[list[int]] = [[] for _ in range(rows)]  # what each row's cache holds
        self._fed: list[int | None] = [None] * rows  # fed for the next step, not yet cached
        self.busy = [False] * rows
        self.last_prefill_tokens = 0

    # --- set-up ------------------------------------------------------------------------------

    def prepare(self) -> None:
        """Allocate the cache (one eager prefill) and capture the step and prefill graphs."""
        torch = self._torch
        with torch.inference_mode():
            self._step(self.buckets[0])  # allocates the cache, all rows (inactive: scratch)
            self._prefill(0, [0], 0, self.buckets[0])
            self.held = [[] for _ in range(self.rows)]
            if not self.use_graphs:
                return
            with load_step(logger, f"LLM batch graphs, {self.rows} rows, buckets "
                                   f"{self.buckets}"):
                self._graphs, self._prefills = capture_buckets(
                    self.buckets, lambda step: capture_graph(step, self.device, self._pool),
                    self._step, self._prefill_step)

    # --- the two forwards ----------------------------------------------------------------------

    def _forward(self, ids: Any, positions: Any, index: Any, mask: Any, size: int,
                 keep: Any = 1, row: Any = None) -> Any:
        for layer in self._layers:
            layer.window = size
            layer.index = index
            layer.row = row
        out = self.model(input_ids=ids, position_ids=positions, attention_mask=mask,
                         use_cache=True, logits_to_keep=keep, **{self._cache_kwarg: self._cache})
        return out.logits[:, -1, :].float()

    def _step(self, size: int) -> None:
        """One step of every row on the static tensors (what the step's graph holds)."""
        torch = self._torch
        self._seen.scatter_(1, self._token, self._active)  # active rows: their fed token
        self._step_index.copy_(torch.where(self._active, self._pos, self.scratch))
        visible = self._arange[:size].view(1, size) <= self._pos
        mask = torch.where(visible, 0.0, self._neg).to(self.dtype).view(self.rows, 1, 1, size)
        logits = self._forward(self._token, self._pos, self._step_index, mask, size)
        p = self._penalty
        logits = torch.where(self._seen, torch.where(logits > 0, logits / p, logits * p), logits)
        self.logits.copy_(logits)
        best = logits.argmax(dim=-1)
        self._next.copy_(best)  # (the host feeds each row's next token: `feed`)
        self._pos.add_(self._active.long())

    def _prefill_step(self, size: int, n: int) -> None:
        """Row `_pf_row`'s `n` (padded) tokens from `_pf_start` (what a prefill graph
        holds); the pads land after the prompt, masked until the answer overwrites them."""
        torch = self._torch
        positions = (self._pf_start + self._arange[:n]).view(1, n)
        visible = self._arange[:size].view(1, size) <= positions.view(n, 1)
        mask = torch.where(visible, 0.0, self._neg).to(self.dtype).view(1, 1, n, size)
        logits = self._forward(self._pf_ids[n], positions, positions, mask, size,
                               keep=self._pf_last, row=self._pf_row)
        self._first_logits.copy_(logits)

    def _prefill(self, row: int, ids: Sequence[int], start: int, size: int) -> Any:
        """Feed `ids` into `row` at positions start..; the logits after the last one."""
        torch = self._torch
        self._pf_row.fill_(row)
        for at in range(0, len(ids), PREFILL_GRAPHS[-1]):
            part = ids[at : at + PREFILL_GRAPHS[-1]]
            n = next(n for n in PREFILL_GRAPHS if n >= len(part))
            self._pf_ids[n].zero_()
            self._pf_ids[n][0, : len(part)].copy_(torch.tensor(list(part), dtype=torch.long))
            self._pf_start.fill_(start + at)
            self._pf_last.fill_(len(part) - 1)
            graph = self._prefills.get((size, n))
            if graph is not None and start + at + n <= size:
                graph.replay()
            else:
                self._prefill_step(size, n)
        return self._first_logits

    # --- rows -----------------------------------------------------------------------------------

    def bucket_for(self, tokens: int) -> int:
        return bucket_for(self.buckets, tokens)

    def free_row(self, ids: Sequence[int]) -> int | None:
        """The free row holding the longest prefix of `ids` (None: every row is busy)."""
        free = [r for r in range(self.rows) if not self.busy[r]]
        if not free:
            return None
        return max(free, key=lambda r: common_prefix(self.held[r], ids[:-1]))

    def admit(self, row: int, ids: Sequence[int], max_new_tokens: int,
              repetition_penalty: float) -> Any:
        """Prefill `ids` into `row` after the prefix it holds; the first token's logits
        ([1, vocab], on the device). The row is busy until `release`."""
        if not ids or max_new_tokens < 1:
            raise InvalidInputError("decode needs prompt tokens and max_new_tokens >= 1")
        size = self.bucket_for(len(ids) + max_new_tokens)
        ids = list(ids)
        reuse = common_prefix(self.held[row], ids[:-1])
        self.last_prefill_tokens = len(ids) - reuse
        self.busy[row] = True
        self.held[row] = ids[:reuse]  # valid even if the prefill fails half-way
        with self._torch.inference_mode():
            logits = self._prefill(row, ids[reuse:], reuse, size)
            self.held[row] = ids
            self._seen[row].zero_()
            self._penalty[row].fill_(max(repetition_penalty, 1e-6))
            self._pos[row].fill_(len(ids))
        return logits

    def warm(self, ids: Sequence[int]) -> None:
        """Prefill `ids` (the persona's prompt) into every row, so that no stream's first
        turn prefills it."""
        for row in range(self.rows):
            if not self.busy[row]:
                self.admit(row, ids, 1, 1.0)
                self.release(row)

    def feed(self, row: int, token: int) -> None:
        """What `row` feeds at the next step (which makes it active): its chosen token."""
        if not self.busy[row]:
            raise InvalidInputError(f"row {row} was not admitted")
        self._fed[row] = token

    def release(self, row: int) -> None:
        """`row` stops (its answer ended or was cancelled); its cache keeps what the steps
        wrote, the next admission's prefix (a token fed after the last step is not in it)."""
        self._fed[row] = None
        self.busy[row] = False

    def forget(self) -> None:
        """After a failed forward: the rows' contents are unknown; start them clean."""
        for row in range(self.rows):
            self.release(row)
        self.held = [[] for _ in range(self.rows)]

    def step(self) -> list[int]:
        """One decode step of every active row; each row's greedy (penalized) token, in row
        order (inactive rows' entries mean nothing). The fed tokens' keys are now cached."""
        torch = self._torch
        active = [r for r in range(self.rows) if self._fed[r] is not None]
        if not active:
            raise InvalidInputError("no row has a token to feed")
        size = self.bucket_for(max(len(self.held[r]) + 1 for r in active))
        for r, token in enumerate(self._fed):
            self._feed_tokens[r, 0] = token or 0
            self._feed_active[r, 0] = token is not None
        with torch.inference_mode():
            # (the buffers are free again: the last step, which read them, is done)
            self._token.copy_(self._feed_tokens, non_blocking=self._done is not None)
            self._active.copy_(self._feed_active, non_blocking=self._done is not None)
            if self.use_graphs:
                self._graphs[size].replay()
            else:
                self._step(size)
            self._host.copy_(self._next, non_blocking=self._done is not None)
            if self._done is not None:
                self._done.record()
                self._done.synchronize()
            tokens = [int(t) for t in self._host.tolist()]
        for r in active:
            self.held[r].append(self._fed[r])  # type: ignore[arg-type]
            self._fed[r] = None  # a row feeds again only when told to (`feed`)
        return tokens

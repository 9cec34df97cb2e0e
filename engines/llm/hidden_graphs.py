"""The text-end probe's forward (the model's last hidden state at a prompt's last token) as
one captured CUDA graph per prompt-length bucket.

Why: eager, that forward is a few hundred kernel launches and module calls in Python, queued
on the default stream behind whatever else runs there: on the H200 35 / 57 ms (p50, idle /
beside 3 answers decoding) against 5.0 / 6.5 captured on its own stream
(`bench/gpu_text_end.py --probe-graphs on|off`). Live, eager, 2-4 held-out turns in 20 waited
0.46-0.55 s for the probe's answer; captured, every probe read on the early words was in
before the pause (bench/RESULTS.md, gpu, 2026-12-04).

How: the prompt's tokens are padded on the right to the bucket's length and run with an
explicit causal mask (each position sees itself and those before it), so the hidden state at
the last real token is the unpadded forward's: the pads come after it and are never seen
(checked on the CPU against the plain forward, tests/engines/test_llm_hidden_graphs.py). No
KV cache: nothing an answer reuses is touched. The graphs have their own memory pool and, on
CUDA, their own stream (they replay on the probe's thread while the decode thread replays its
own on the default stream: on that one the probe queued behind the answers' steps, Whisper's
and piper's graphs), and the probe's thread waits for the state asleep
(engines/device_wait.py). Longer prompts than the largest bucket, and the CPU, take the plain
eager forward.

Capture is checked before use: the graph's hidden state for a sample prompt must point the
way the eager forward's does (cosine >= `MIN_COSINE`); a capture that fails or disagrees
leaves the eager forward, with a warning.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from engines.device_wait import wait_for_device
from engines.llm.cuda_graphs import capture_graph
from engines.progress import load_step

logger = logging.getLogger(__name__)

BUCKETS = (16, 32, 64, 128)  # prompt lengths with a captured forward (the probe's: HEAD + words)
MIN_COSINE = 0.99  # a captured forward's agreement with the eager one, or it is not used


class HiddenStateGraphs:
    """The padded forward (`padded`) of one causal LM and, on CUDA, its captured graphs.

    Contract: every method is called on one thread (the engine's probe thread)."""

    def __init__(self, model: Any, buckets: Sequence[int] = BUCKETS) -> None:
        import torch

        self._torch = torch
        self.model = model
        self.buckets = tuple(sorted(set(buckets)))
        self.device = next(model.parameters()).device
        dtype = next(model.parameters()).dtype
        self._ids = {n: torch.zeros((1, n), dtype=torch.long, device=self.device)
                     for n in self.buckets}
        arange = torch.arange(self.buckets[-1], device=self.device)
        self._positions = {n: arange[:n].view(1, n) for n in self.buckets}
        neg = torch.finfo(dtype).min
        self._masks = {n: torch.where(arange[:n].view(1, n) <= arange[:n].view(n, 1), 0.0, neg)
                       .to(dtype).view(1, 1, n, n) for n in self.buckets}
        self._last = torch.zeros(1, dtype=torch.long, device=self.device)  # the last real token
        hidden = int(model.config.get_text_config(decoder=True).hidden_size)
        self._out = torch.zeros(hidden, dtype=torch.float32, device=self.device)
        on_cuda = self.device.type == "cuda"
        self._stream = torch.cuda.Stream(self.device) if on_cuda else None
        self._host = torch.zeros(hidden, dtype=torch.float32, pin_memory=on_cuda)
        self._graphs: dict[int, Any] = {}

    @property
    def captured(self) -> tuple[int, ...]:
        return tuple(sorted(self._graphs))

    def _forward(self, n: int) -> None:
        """The padded forward of bucket `n` on the static tensors (what its graph holds)."""
        out = self.model.model(input_ids=self._ids[n], position_ids=self._positions[n],
                               attention_mask=self._masks[n], use_cache=False)
        self._out.copy_(out.last_hidden_state[0].index_select(0, self._last)[0].float())

    def padded(self, ids: Sequence[int]) -> np.ndarray | None:
        """The last hidden state at `ids`' last token through the padded forward (replayed
        where captured, else eager); None where no bucket holds `ids`."""
        n = next((n for n in self.buckets if n >= len(ids)), 0)
        if not n or not ids:
            return None
        torch = self._torch
        stream = self._stream
        with torch.inference_mode(), (torch.cuda.stream(stream) if stream is not None
                                      else contextlib.nullcontext()):
            self._ids[n].zero_()
            self._ids[n][0, : len(ids)].copy_(torch.tensor(list(ids), dtype=torch.long))
            self._last.fill_(len(ids) - 1)
            graph = self._graphs.get(n)
            if graph is not None:
                graph.replay()
            else:
                self._forward(n)
            self._host.copy_(self._out, non_blocking=stream is not None)
            if stream is not None:
                wait_for_device(torch, self.device)
            return np.array(self._host.numpy())

    def capture(self, sample: Sequence[int], eager: Callable[[], np.ndarray]) -> None:
        """Capture every bucket (CUDA only), then check the one `sample` falls in against
        `eager()` (the plain forward's hidden state for `sample`); failure or disagreement
        leaves no graphs (the eager forward), logged."""
        torch = self._torch
        if self.device.type != "cuda":
            return
        try:
            with load_step(logger, f"text-end probe graphs, prompt buckets {self.buckets}"), \
                    torch.inference_mode():
                pool = torch.cuda.graph_pool_handle()
                for n in self.buckets:
                    self._graphs[n] = capture_graph(
                        functools.partial(self._forward, n), self.device, pool)
            got, want = self.padded(sample), eager()
            if got is None:
                raise ValueError(f"the sample's {len(sample)} tokens fit no bucket")
            norms = float(np.linalg.norm(got) * np.linalg.norm(want))
            cosine = float(np.dot(got, want)) / norms if norms > 0.0 else 0.0
        except Exception as exc:  # noqa: BLE001 - the eager forward still works
            self._graphs.clear()
            logger.warning("text-end probe graphs not captured (%s): the eager forward", exc)
            return
        if not cosine >= MIN_COSINE:
            self._graphs.clear()
            logger.warning("text-end probe graphs disagree with the eager forward (cosine "
                           "%.4f < %.2f): the eager forward", cosine, MIN_COSINE)
            return
        logger.info("text-end probe graphs captured for %s tokens (cosine %.5f against the "
                    "eager forward)", self.buckets, cosine)

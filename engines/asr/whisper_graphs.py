"""Whisper's decode as CUDA graphs: a token is one replay instead of ~100 kernel launches.

Why: on the H200 the eager torch decode (`torch_whisper.py`) of a short question took 37 ms
alone and ~125 ms p50 live beside the server's event loop and video (bench/RESULTS.md, gpu):
every launch gives the GIL back and has to win it again from the threads that encode video.
Captured, the encoder pass is one replay, the prompt one more, and each token one; the host
reads the chosen tokens once every `BLOCK` steps.

Contract: a `WhisperGraphs` set serves one decode at a time (the runner leases one of
`num_workers` sets per decode). `encode(mel)` fills `state` (the cross-attention keys and values
of the window); `generate(prompt, sot_index, eot, max_steps)` -> the same `Generation` as
`TorchWhisper.generate`, whose rows stay valid until the set's next decode;
`TorchWhisper.detect_language` runs eagerly on `state` ("auto" costs one eager step).

The static shapes:
- the encoder: one graph per window length (whole seconds, `WhisperRunner._window`), captured
  at its first use or at load (`prepare`). It writes the keys and values into buffers sized
  for the longest window and a mask of the frames this window has: a masked key gets no
  weight, so the attention is the one over the shorter window (the CPU test compares);
- the prompt: one graph per (prompt length, position of <|startoftranscript|>): the prompt's
  pass, the no-speech probability and the first token's choice (with `suppress_first`);
- the step: one graph: the token chosen last goes in at its position; the logits plus
  `suppress`, the argmax and its log-probability are written at the step's row; then the
  token, the position and the row advance on the device.
The host replays `BLOCK` steps before it reads their tokens: the steps past the end of text
write rows that are cut off, never past position 447 (CTranslate2's length rule, applied by
the runner, bounds the steps). With `capture=False` (the CPU: tests) every body runs eagerly
on the same buffers, so all but the capture is exercised without a GPU.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

import torch

from engines.asr.torch_whisper_model import DecodeState, Generation, TorchWhisper
from engines.asr.whisper_runner import MAX_TEXT_POSITIONS
from engines.device_wait import wait_for_device

BLOCK = 4  # steps replayed before the host reads their tokens (an answer is ~10-30 tokens)


class WhisperGraphs:
    """One decode at a time on static buffers (see the module docstring)."""

    def __init__(self, model: TorchWhisper, suppress: torch.Tensor, suppress_first: torch.Tensor,
                 no_speech: int, *, capture: bool) -> None:
        dev = model.device
        self.model, self.capture = model, capture
        self._suppress, self._suppress_first, self._no_speech_id = (suppress, suppress_first,
                                                                    no_speech)
        head_dim = model.d_model // model.dec_heads
        frames = int(model.enc_pos.shape[0])  # encoder frames of the longest window (1500)
        keys = torch.zeros((len(model.dec_layers), 1, model.dec_heads, model.positions,
                            head_dim), device=dev, dtype=model.dtype)
        cross = (1, model.dec_heads, frames, head_dim)
        self.state = DecodeState(
            keys, torch.zeros_like(keys),
            [torch.zeros(cross, device=dev, dtype=model.dtype) for _ in model.dec_layers],
            [torch.zeros(cross, device=dev, dtype=model.dtype) for _ in model.dec_layers],
            # All frames at first: a row with every key masked would be NaN, and a NaN left
            # in a cache poisons later attention even where it is masked (0 x NaN).
            cross_mask=torch.ones((1, frames), device=dev, dtype=torch.bool),
        )
        self._frames = torch.arange(frames, device=dev)[None]  # (SDPA's masks are 2-D at least)
        self._positions = torch.arange(model.positions, device=dev)
        rows = MAX_TEXT_POSITIONS
        self._rows = torch.zeros((rows, model.n_vocab), device=dev)  # suppressed logits
        self._scores = torch.zeros(rows, device=dev)  # log-probability of each chosen token
        self._ids = torch.zeros(rows, device=dev, dtype=torch.long)  # the chosen tokens
        self._token = torch.zeros(1, device=dev, dtype=torch.long)  # the next step's input
        self._position = torch.zeros(1, device=dev, dtype=torch.long)  # ... and its position
        self._row = torch.zeros(1, device=dev, dtype=torch.long)  # the next step's row
        self._no_speech = torch.zeros(1, device=dev)
        self._mels: dict[int, torch.Tensor] = {}  # mel frames -> the encoder graph's input
        self._prompt_ids: dict[tuple[int, int], torch.Tensor] = {}  # -> the prompt's tokens
        self._graphs: dict[object, Any] = {}  # "step", mel frames or prompt key -> graph
        # One pool for the set's graphs: their outputs live in the buffers above and a set's
        # replays never overlap, so their scratch memory may be shared.
        self._pool = torch.cuda.graph_pool_handle() if capture else None

    # --- set-up ------------------------------------------------------------------------------

    def prepare(self, mel_frames: Iterable[int], prompts: Iterable[list[int]],
                sot: int) -> None:
        """Capture the graphs these windows and prompts need now, not in a session."""
        if not self.capture:
            return
        with torch.inference_mode():
            self._graph("step", self._step_body)
            for frames in mel_frames:
                self._mel(frames)
                self._graph(frames, functools.partial(self._encode_body, frames))
            for prompt in prompts:
                self._prompt_graph(prompt, prompt.index(sot))
            self.state.keys.zero_()  # (what the captures' warm-ups wrote)
            self.state.values.zero_()

    # --- a decode ----------------------------------------------------------------------------

    def encode(self, mel: torch.Tensor) -> None:
        """`mel` [1, n_mels, frames] (on the device) -> `state` holds its keys and values."""
        frames = int(mel.shape[2])
        self._mel(frames).copy_(mel)
        self._run(frames, lambda: self._encode_body(frames))

    def generate(self, prompt: list[int], sot_index: int, eot: int,
                 max_steps: int) -> Generation:
        """Greedy search after `prompt`, as `TorchWhisper.generate` (the suppression
        tensors given at construction)."""
        if self.capture:  # (a capture's warm-up steps from position 0: not in mid-decode)
            self._graph("step", self._step_body)
        self._prompt_graph(prompt, sot_index)
        ids: list[int] = []
        steps = done = 0
        if max_steps > 0:
            chosen = 1  # the prompt's graph chose the first token
            while True:
                replays = min(BLOCK - 1 if done == 0 else BLOCK, max_steps - chosen)
                for _ in range(replays):
                    self._run("step", self._step_body)
                chosen += replays
                if self.model.device.type == "cuda":
                    wait_for_device(torch, self.model.device)  # asleep, not spinning
                block = self._ids[done:chosen].tolist()  # the one read back per block
                end = next((i for i, token in enumerate(block) if token == eot), None)
                if end is not None:
                    ids += block[:end]
                    steps = done + end + 1
                    break
                ids += block
                done = steps = chosen
                if chosen >= max_steps:
                    break
        total = float(self._scores[:steps].sum())
        return Generation(ids, float(self._no_speech), total / max(len(ids), 1),
                          self._rows[:steps])

    # --- the bodies (what the graphs hold) ---------------------------------------------------

    def _encode_body(self, frames: int) -> None:
        encoded = self.model.encode(self._mels[frames])
        length = int(encoded.shape[1])
        state = self.state
        for (k, v), keys, values in zip(self.model.cross(encoded), state.cross_keys,
                                        state.cross_values, strict=True):
            keys[:, :, :length].copy_(k)
            values[:, :, :length].copy_(v)
        assert state.cross_mask is not None
        torch.lt(self._frames, length, out=state.cross_mask)

    def _prompt_body(self, key: tuple[int, int]) -> None:
        length, sot_index = key
        hidden = self.model.step(self._prompt_ids[key], self._positions[:length], self.state)
        first = self.model.logits(torch.stack([hidden[sot_index], hidden[length - 1]]))
        self._no_speech.copy_(torch.softmax(first[0], -1)[self._no_speech_id])
        self._row.zero_()
        self._choose(first[1], self._suppress_first)
        self._position.fill_(length)

    def _step_body(self) -> None:
        hidden = self.model.step(self._token, self._position, self.state)
        self._choose(self.model.logits(hidden)[0], self._suppress)
        self._position.add_(1)

    def _choose(self, logits: torch.Tensor, bias: torch.Tensor) -> None:
        """The greedy choice at the current row; its token becomes the next input."""
        row = logits + bias
        token = row.argmax().reshape(1)
        self._rows.index_copy_(0, self._row, row[None])
        self._scores.index_copy_(0, self._row, torch.log_softmax(row, -1).gather(0, token))
        self._ids.index_copy_(0, self._row, token)
        self._token.copy_(token)
        self._row.add_(1)

    # --- graphs ------------------------------------------------------------------------------

    def _prompt_graph(self, prompt: list[int], sot_index: int) -> None:
        """Load `prompt` into its graph's input and run it (captured at first use)."""
        key = (len(prompt), sot_index)
        if key not in self._prompt_ids:
            self._prompt_ids[key] = torch.zeros(len(prompt), device=self.model.device,
                                                dtype=torch.long)
        self._prompt_ids[key].copy_(torch.tensor(prompt))
        self._run(key, lambda: self._prompt_body(key))

    def _mel(self, frames: int) -> torch.Tensor:
        """The encoder graph's input for windows of `frames` mel frames."""
        if frames not in self._mels:
            self._mels[frames] = torch.zeros((1, self.model.n_mels, frames),
                                             device=self.model.device, dtype=self.model.dtype)
        return self._mels[frames]

    def _run(self, key: object, body: Callable[[], None]) -> None:
        if self.capture:
            self._graph(key, body).replay()
        else:
            body()

    def _graph(self, key: object, body: Callable[[], None]) -> Any:
        graph = self._graphs.get(key)
        if graph is None:
            graph = self._graphs[key] = self._capture(body)
        return graph

    def _capture(self, body: Callable[[], None]) -> Any:
        """Warm up on a side stream (as torch.cuda.graphs requires), then capture. The
        warm-up runs from position 0 so its writes stay inside the buffers."""
        device = self.model.device
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):
            for _ in range(2):
                self._position.zero_()
                self._row.zero_()
                body()
        torch.cuda.current_stream(device).wait_stream(stream)
        self._position.zero_()
        self._row.zero_()
        graph = torch.cuda.CUDAGraph()
        # thread_local: the LLM's and the face's threads may use CUDA while this one captures.
        with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
            body()
        return graph

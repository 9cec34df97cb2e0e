"""Whisper in plain PyTorch from the CTranslate2 weights: for GPUs CTranslate2 cannot use.

Contract: `TorchWhisperRunner(config)` is a `WhisperRunner` (whisper_runner.py) with the
CTranslate2 runner's behaviour: `decode(pcm16k, language)` -> `Decoded`, `accept`,
`max_audio_s`, `multilingual`. It exists because CTranslate2's PyPI wheels are CUDA 12 builds
and a machine with only CUDA 13 libraries cannot load them (device.py); torch brings its own
CUDA. The model itself (`TorchWhisper`) is in torch_whisper_model.py.

What it copies from CTranslate2 (src/models/whisper.cc, src/decoding.cc), so the two agree:
- the model: `model.bin` read by `ct2_weights` (aliases resolved: the output projection is
  the token embedding), dimensions from the tensor shapes, head counts from the file;
  pre-norm layers, exact GELU, fused QKV (self) and KV (cross) projections as CT2 stores them;
- the input: the reduced context of `WhisperRunner._window` (no padding to 30 s), the
  encoder's positional embeddings cut to its length;
- the prompt: the whole prompt goes through the decoder at once; the no-speech probability
  is the softmax of the raw logits at <|startoftranscript|>, at the no-speech token;
- greedy search (beam_size 1 only): `config.json`'s `suppress_ids` at every step and
  `suppress_ids_begin` (blank, end of text) at the first, what CT2's `generate` does with its
  defaults `suppress_tokens=[-1]`, `suppress_blank=True`; at most
  min(max_length // 2, max_length - (prompt length - 1)) steps, `max_length` as the CT2 runner
  passes it; the score is the sum of the log-softmax of the suppressed logits of every chosen
  token, end of text included, over the number of tokens kept (length_penalty 1): CT2's
  `scores[0]`, used as the average log-probability;
- "auto": one decoder step on <|startoftranscript|> alone, the argmax over `lang_ids`.

Device (`[asr] device`): "cpu" -> float32 on the CPU; "cuda" -> float16 on CUDA, or
`AsrModelLoadError` when torch has no CUDA or a probe encode fails; "auto" -> CUDA when it
works, else the CPU (logged once at load). `compute_type` and `cpu_threads` are CTranslate2's:
torch's intra-op threads are process-wide and left as they are.

Speed: the encoder output's cross-attention keys and values are computed once per decode;
the self-attention cache is pre-allocated for all 448 positions and each step writes its
position with `index_copy_` and attends over all of them under a mask. So the step
(`TorchWhisper.step`) has static shapes and no host-side indexing. On CUDA
(`[asr] cuda_graphs`, the default) the encoder, the prompt and the step are captured as
graphs (`whisper_graphs.py`: a token is one replay; the host reads the tokens every few
steps); eager, the host reads one token id per step (to stop at end of text).

Threads: the weights are read-only; each `decode` has its own cache (eager) or leases one of
`num_workers` sets of graphs and buffers, so calls from several threads run side by side, at
most `num_workers` at once (the others wait, as CTranslate2's queue does).
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

from engines.asr.config import AsrConfig
from engines.asr.ct2_weights import read_ct2_model
from engines.asr.errors import AsrModelLoadError, InvalidAsrConfigError
from engines.asr.model_files import resolve_whisper_model
from engines.asr.torch_whisper_model import TorchWhisper
from engines.asr.whisper_graphs import WhisperGraphs
from engines.asr.whisper_runner import Decoded, WhisperRunner
from engines.progress import load_step

logger = logging.getLogger(__name__)

_PROBE_FRAMES = 100  # 1 s of log-mel frames: a CUDA problem shows itself at the first encode


class TorchWhisperRunner(WhisperRunner):
    """A CTranslate2 Whisper model run by torch (see the module docstring)."""

    def __init__(self, config: AsrConfig, *, static: bool | None = None) -> None:
        """`static`: decode on the static buffers of `whisper_graphs` (None: on CUDA when
        `config.cuda_graphs`; True on the CPU runs those bodies eagerly, for tests)."""
        path = resolve_whisper_model(config.model)
        try:
            import tokenizers
            from faster_whisper.feature_extractor import FeatureExtractor
        except ImportError as exc:
            msg = "faster-whisper is missing: pip install 'rtc-avatar[asr]'"
            raise AsrModelLoadError(msg) from exc
        device, dtype = _placement(config.device)
        with load_step(logger, f"whisper ({path.name}, torch {device.type} {_name(dtype)})"):
            variables = read_ct2_model(path / "model.bin").variables
            self.model = TorchWhisper(variables, device, dtype)
            if device.type == "cuda":
                self.model = _probed(self.model, variables, config.device)
        del variables
        settings = _model_config(path)
        if not (path / "tokenizer.json").is_file():
            raise AsrModelLoadError(f"no tokenizer.json in {path}")
        self._set_up(config, tokenizers.Tokenizer.from_file(str(path / "tokenizer.json")),
                     FeatureExtractor(feature_size=self.model.n_mels),
                     self.model.n_vocab >= 51865)  # CTranslate2's test (multilingual vocab)
        # The language tokens sit between <|startoftranscript|> and <|translate|>.
        translate = self._hf_tokenizer.token_to_id("<|translate|>") or self._sot + 1
        self._lang_ids = ([int(i) for i in settings.get("lang_ids", [])]
                          or list(range(self._sot + 1, translate)))
        self._suppress = self._bias(settings.get("suppress_ids", []))
        self._suppress_first = self._bias([*settings.get("suppress_ids", []),
                                           *settings.get("suppress_ids_begin", [])])
        self._slots = threading.BoundedSemaphore(config.num_workers)
        # On a GPU each decode mostly waits on it, asleep: `num_workers` side by side.
        self.device_calls = config.num_workers if self.model.device.type == "cuda" else 0
        if static is None:  # (the model itself: "auto" may have fallen back to the CPU)
            static = config.cuda_graphs and self.model.device.type == "cuda"
        self._graph_sets = self._make_graph_sets(config) if static else None

    def decode(
        self, pcm16k: np.ndarray, language: str | None = None, beam_size: int | None = None,
        prompt: str | None = None,
    ) -> Decoded:
        if (beam_size or 1) != 1:
            raise InvalidAsrConfigError(f"runtime = \"torch\" decodes greedily, not with "
                                        f"beam_size = {beam_size}")
        start = time.perf_counter()
        language = language or self.config.language
        mel, duration = self._window(pcm16k)
        with self._slots, self._lease() as graphs, torch.inference_mode():
            model = self.model
            features = torch.from_numpy(mel[None]).to(model.device)
            if graphs is not None:
                graphs.encode(features)
                state = graphs.state
            else:
                state = model.new_state(model.encode(features))
            if language == "auto":
                token = model.detect_language(state, self._sot, self._lang_ids)
                language = self._hf_tokenizer.id_to_token(token)[2:-2]  # "<|zh|>" -> "zh"
            tokens = self._prompt_for(language, prompt)
            max_length = self._max_length(duration, tokens)
            max_steps = min(max_length // 2, max_length - (len(tokens) - 1))  # CT2's rule
            if graphs is not None:
                result = graphs.generate(tokens, tokens.index(self._sot), self._eot, max_steps)
            else:
                result = model.generate(state, tokens, tokens.index(self._sot),
                                        self._no_speech, self._eot, max_steps,
                                        self._suppress, self._suppress_first)
            text = self._text(result.ids)
            k = self._end_token(result.ids, result.logits.shape[0], text)
            end = 0.0 if k is None else self._end_mass(
                result.logits[k].cpu().numpy(), result.ids[k])
        return Decoded(
            text=text,
            language=language,
            no_speech_prob=result.no_speech_prob,
            avg_logprob=result.avg_logprob,
            end_probability=end,
            seconds=time.perf_counter() - start,
        )

    def _make_graph_sets(self, config: AsrConfig) -> queue.SimpleQueue[WhisperGraphs]:
        """`num_workers` sets of static buffers, each with its graphs captured for every
        window length and the prompts of "en" and "zh" (on CUDA; eager bodies on the CPU)."""
        capture = self.model.device.type == "cuda"
        frames = self._window_frames()
        sets: queue.SimpleQueue[WhisperGraphs] = queue.SimpleQueue()
        what = (f"whisper CUDA graphs ({config.num_workers} x {len(frames)} windows)" if capture
                else "whisper static buffers (no capture on the CPU)")
        with load_step(logger, what), torch.inference_mode():
            for _ in range(config.num_workers):
                graphs = WhisperGraphs(self.model, self._suppress, self._suppress_first,
                                       self._no_speech, capture=capture)
                graphs.prepare(frames, self._prompts.values(), self._sot)
                sets.put(graphs)
        return sets

    @contextmanager
    def _lease(self) -> Iterator[WhisperGraphs | None]:
        """A set of graphs for one decode (None: eager); the `_slots` bound how many wait."""
        if self._graph_sets is None:
            yield None
            return
        graphs = self._graph_sets.get()
        try:
            yield graphs
        finally:
            self._graph_sets.put(graphs)

    def _bias(self, ids: list[int]) -> torch.Tensor:
        bias = torch.zeros(self.model.n_vocab, device=self.model.device)
        bias[[i for i in ids if 0 <= i < self.model.n_vocab]] = float("-inf")
        return bias


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _model_config(path: Path) -> dict[str, Any]:
    """The model's config.json (suppressed tokens, language tokens); {} without one."""
    try:
        settings = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise AsrModelLoadError(f"cannot read {path / 'config.json'}: {exc}") from exc
    return settings if isinstance(settings, dict) else {}


def _placement(device: str) -> tuple[torch.device, torch.dtype]:
    """`[asr] device` -> where torch runs and in what precision (see the module docstring)."""
    if device == "cpu":
        return torch.device("cpu"), torch.float32
    if torch.cuda.is_available():
        if device == "auto":
            logger.info("ASR: torch on CUDA (%s), float16", torch.cuda.get_device_name(0))
        return torch.device("cuda"), torch.float16
    problem = (f"torch {torch.__version__} sees no CUDA device (torch.cuda.is_available() is "
               "False: no GPU, no driver, or a CPU-only torch build)")
    if device == "cuda":
        raise AsrModelLoadError(f'[asr] device = "cuda" (runtime = "torch"): {problem}; '
                                'use "cpu" or "auto"')
    logger.warning("ASR: %s; decoding on the CPU", problem)
    return torch.device("cpu"), torch.float32


def _probed(model: TorchWhisper, variables: dict[str, np.ndarray], device: str) -> TorchWhisper:
    """The CUDA model once it has encoded 1 s of silence; "auto" falls back to the CPU."""
    try:
        with torch.inference_mode():
            model.encode(torch.zeros((1, model.n_mels, _PROBE_FRAMES), device=model.device))
        torch.cuda.synchronize()
        return model
    except RuntimeError as exc:
        problem = f"torch {torch.__version__} cannot run Whisper on CUDA: {exc}"
    if device == "cuda":
        raise AsrModelLoadError(f'[asr] device = "cuda" (runtime = "torch"): {problem}')
    logger.warning("ASR: %s; decoding on the CPU", problem)
    return TorchWhisper(variables, torch.device("cpu"), torch.float32)

"""Whisper in plain PyTorch from the CTranslate2 weights: for GPUs CTranslate2 cannot use.

Contract: `TorchWhisperRunner(config)` is a `WhisperRunner` (whisper.py) with the CTranslate2
runner's behaviour: `decode(pcm16k, language)` -> `Decoded`, `accept`, `max_audio_s`,
`multilingual`. It exists because CTranslate2's PyPI wheels are CUDA 12 builds and a machine
with only CUDA 13 libraries cannot load them (device.py); torch brings its own CUDA.

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
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F

from engines.asr.config import AsrConfig
from engines.asr.ct2_weights import read_ct2_model
from engines.asr.errors import AsrModelLoadError, InvalidAsrConfigError
from engines.asr.model_files import resolve_whisper_model
from engines.asr.whisper import Decoded, WhisperRunner
from engines.progress import load_step

if TYPE_CHECKING:
    from engines.asr.whisper_graphs import WhisperGraphs

logger = logging.getLogger(__name__)

_PROBE_FRAMES = 100  # 1 s of log-mel frames: a CUDA problem shows itself at the first encode
_LN_EPS = 1e-5  # CTranslate2's LayerNorm epsilon


@dataclass(frozen=True)
class _Layer:
    """One transformer layer's tensors, by CTranslate2 scope (`.../self_attention/...`)."""

    tensors: dict[str, torch.Tensor]

    def __getitem__(self, name: str) -> torch.Tensor:
        return self.tensors[name]


@dataclass
class DecodeState:
    """One decode's caches: self-attention keys/values for every position, cross-attention
    keys/values of the encoder output (computed once)."""

    keys: torch.Tensor  # [layers, 1, heads, positions, head_dim]
    values: torch.Tensor
    cross_keys: list[torch.Tensor]  # per layer [1, heads, frames, head_dim]
    cross_values: list[torch.Tensor]
    # [1, frames] bool, True on the encoder frames the window has: graphs keep the cross keys
    # for the longest window and mask what a shorter one leaves (whisper_graphs.py)
    cross_mask: torch.Tensor | None = None


@dataclass(frozen=True)
class Generation:
    ids: list[int]  # generated tokens, end of text left out
    no_speech_prob: float
    avg_logprob: float  # CTranslate2's score (length-normalised sum of log-probabilities)
    logits: torch.Tensor  # [steps, vocab] float32, after suppression (CT2's logits_vocab)


class TorchWhisper:
    """Whisper's encoder and decoder as functions of the weights (nothing trains here, so no
    nn.Module: the step is one plain function of tensors)."""

    def __init__(self, variables: dict[str, np.ndarray], device: torch.device,
                 dtype: torch.dtype) -> None:
        self.device, self.dtype = device, dtype

        def tensor(name: str) -> torch.Tensor:
            if name not in variables:
                raise AsrModelLoadError(f"not a CTranslate2 Whisper model: no {name}")
            value = variables[name]
            if value.dtype.kind != "f":
                raise AsrModelLoadError(f"{name} is {value.dtype} without a scale: the torch "
                                        "runtime reads float16, float32, bfloat16 and int8 "
                                        "or int16 weights with their scales")
            return torch.from_numpy(np.asarray(value)).to(device=device, dtype=dtype)

        def layers(scope: str) -> list[_Layer]:
            layer = re.compile(rf"{scope}/layer_(\d+)/")  # not {scope}/layer_norm
            count = len({m.group(1) for n in variables if (m := layer.match(n))})
            prefixes = [f"{scope}/layer_{i}/" for i in range(count)]
            return [_Layer({n[len(p):]: tensor(n) for n in variables
                            if n.startswith(p) and variables[n].ndim > 0}) for p in prefixes]

        self.conv1_w, self.conv1_b = tensor("encoder/conv1/weight"), tensor("encoder/conv1/bias")
        self.conv2_w, self.conv2_b = tensor("encoder/conv2/weight"), tensor("encoder/conv2/bias")
        self.enc_pos = tensor("encoder/position_encodings/encodings")
        self.enc_ln = (tensor("encoder/layer_norm/gamma"), tensor("encoder/layer_norm/beta"))
        self.enc_layers = layers("encoder")
        self.embedding = tensor("decoder/embeddings/weight")
        projection = variables.get("decoder/projection/weight")
        # The output projection is stored as an alias of the embedding: share one tensor.
        self.projection = (self.embedding if projection is None
                           or projection is variables["decoder/embeddings/weight"]
                           else tensor("decoder/projection/weight"))
        self.dec_pos = tensor("decoder/position_encodings/encodings")
        self.dec_ln = (tensor("decoder/layer_norm/gamma"), tensor("decoder/layer_norm/beta"))
        self.dec_layers = layers("decoder")
        if not self.enc_layers or not self.dec_layers:
            raise AsrModelLoadError("not a CTranslate2 Whisper model: no encoder/decoder layers")
        self.n_mels = int(self.conv1_w.shape[1])
        self.d_model = int(self.embedding.shape[1])
        self.n_vocab = int(self.embedding.shape[0])
        self.positions = int(self.dec_pos.shape[0])  # 448
        self.enc_heads = int(variables.get("encoder/num_heads", self.d_model // 64))
        self.dec_heads = int(variables.get("decoder/num_heads", self.d_model // 64))
        self._key_positions = torch.arange(self.positions, device=device)

    # --- the encoder --------------------------------------------------------------------------

    def encode(self, mel: torch.Tensor) -> torch.Tensor:
        """[1, n_mels, frames] -> [1, frames // 2, d_model] (frames even, at most 3000)."""
        x = F.gelu(F.conv1d(mel.to(self.dtype), self.conv1_w, self.conv1_b, padding=1))
        x = F.gelu(F.conv1d(x, self.conv2_w, self.conv2_b, stride=2, padding=1))
        x = x.transpose(1, 2) + self.enc_pos[: x.shape[2]]
        for layer in self.enc_layers:
            h = self._norm(x, layer, "self_attention")
            q, k, v = self._split(_linear(h, layer, "self_attention/linear_0"), 3, self.enc_heads)
            x = x + _linear(_merge(F.scaled_dot_product_attention(q, k, v)), layer,
                            "self_attention/linear_1")
            x = x + self._ffn(x, layer)
        return F.layer_norm(x, (self.d_model,), *self.enc_ln, eps=_LN_EPS)

    # --- the decoder --------------------------------------------------------------------------

    def new_state(self, encoded: torch.Tensor) -> DecodeState:
        """A decode's caches; the cross-attention keys and values of `encoded` computed now.
        The self-attention cache starts at zero: a masked position must hold no NaN (a zero
        weight times NaN is NaN)."""
        head_dim = self.d_model // self.dec_heads
        shape = (len(self.dec_layers), 1, self.dec_heads, self.positions, head_dim)
        keys = torch.zeros(shape, device=self.device, dtype=self.dtype)
        cross = self.cross(encoded)
        return DecodeState(keys, torch.zeros_like(keys), [c[0] for c in cross],
                           [c[1] for c in cross])

    def cross(self, encoded: torch.Tensor) -> list[tuple[torch.Tensor, ...]]:
        """Per decoder layer, the cross-attention keys and values of `encoded`
        ([1, heads, frames, head_dim] each)."""
        return [self._split(_linear(encoded, layer, "attention/linear_1"), 2, self.dec_heads)
                for layer in self.dec_layers]

    def step(self, tokens: torch.Tensor, positions: torch.Tensor,
             state: DecodeState) -> torch.Tensor:
        """Run `tokens` [n] at `positions` [n] (device tensors) through the decoder, writing
        their keys and values into `state`; -> the final hidden states [n, d_model]."""
        x = (self.embedding[tokens] + self.dec_pos[positions])[None]
        mask = positions[:, None] >= self._key_positions[None, :]  # [n, positions]: causal
        for i, layer in enumerate(self.dec_layers):
            h = self._norm(x, layer, "self_attention")
            q, k, v = self._split(_linear(h, layer, "self_attention/linear_0"), 3, self.dec_heads)
            state.keys[i].index_copy_(2, positions, k)
            state.values[i].index_copy_(2, positions, v)
            a = F.scaled_dot_product_attention(q, state.keys[i], state.values[i], attn_mask=mask)
            x = x + _linear(_merge(a), layer, "self_attention/linear_1")
            h = self._norm(x, layer, "attention")
            (q,) = self._split(_linear(h, layer, "attention/linear_0"), 1, self.dec_heads)
            a = F.scaled_dot_product_attention(q, state.cross_keys[i], state.cross_values[i],
                                               attn_mask=state.cross_mask)
            x = x + _linear(_merge(a), layer, "attention/linear_2")
            x = x + self._ffn(x, layer)
        return F.layer_norm(x[0], (self.d_model,), *self.dec_ln, eps=_LN_EPS)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[n, d_model] -> [n, vocab] float32."""
        return F.linear(hidden, self.projection).float()

    def generate(self, state: DecodeState, prompt: list[int], sot_index: int,
                 no_speech: int, eot: int, max_steps: int, suppress: torch.Tensor,
                 suppress_first: torch.Tensor) -> Generation:
        """Greedy search after `prompt` (see the module docstring for what matches CT2).
        `suppress*`: [vocab] float32, -inf on suppressed tokens, 0 elsewhere."""
        positions = torch.arange(len(prompt), device=self.device)
        hidden = self.step(torch.tensor(prompt, device=self.device), positions, state)
        first = self.logits(hidden[[sot_index, len(prompt) - 1]])
        no_speech_prob = float(torch.softmax(first[0], -1)[no_speech])
        rows = torch.empty((max_steps, self.n_vocab), device=self.device)
        scores = torch.empty(max_steps, device=self.device)
        position = positions[-1:].clone()
        logits, ids, steps = first[1:], [], 0
        for step in range(max_steps):
            row = rows[step]
            torch.add(logits[0], suppress_first if step == 0 else suppress, out=row)
            token = row.argmax().reshape(1)
            scores[step : step + 1] = torch.log_softmax(row, -1).gather(0, token)
            steps = step + 1
            chosen = int(token.item())  # the one value read back per step: end of text?
            if chosen == eot:
                break
            ids.append(chosen)
            if steps < max_steps:
                position += 1
                logits = self.logits(self.step(token, position, state))
        total = float(scores[:steps].sum())
        return Generation(ids, no_speech_prob, total / max(len(ids), 1), rows[:steps])

    def detect_language(self, state: DecodeState, sot: int, lang_ids: list[int]) -> int:
        """The language token Whisper puts after <|startoftranscript|> (CT2's
        `detect_language`: one step from position 0, the argmax over the language tokens).
        `state` can go on to `generate`: the prompt overwrites what this step wrote."""
        zero = torch.zeros(1, dtype=torch.long, device=self.device)
        logits = self.logits(self.step(torch.tensor([sot], device=self.device), zero, state))
        return lang_ids[int(logits[0, lang_ids].argmax())]

    # --- parts -----------------------------------------------------------------------------

    def _norm(self, x: torch.Tensor, layer: _Layer, scope: str) -> torch.Tensor:
        return F.layer_norm(x, (self.d_model,), layer[f"{scope}/layer_norm/gamma"],
                            layer[f"{scope}/layer_norm/beta"], eps=_LN_EPS)

    def _ffn(self, x: torch.Tensor, layer: _Layer) -> torch.Tensor:
        h = F.gelu(_linear(self._norm(x, layer, "ffn"), layer, "ffn/linear_0"))
        return _linear(h, layer, "ffn/linear_1")

    @staticmethod
    def _split(fused: torch.Tensor, parts: int, heads: int) -> tuple[torch.Tensor, ...]:
        """[1, n, parts * d] -> `parts` tensors [1, heads, n, d // heads]."""
        n = fused.shape[1]
        split = fused.view(1, n, parts, heads, -1).permute(2, 0, 3, 1, 4)
        return tuple(split.unbind(0))


def _linear(x: torch.Tensor, layer: _Layer, scope: str) -> torch.Tensor:
    return F.linear(x, layer[f"{scope}/weight"], layer.tensors.get(f"{scope}/bias"))


def _merge(heads: torch.Tensor) -> torch.Tensor:
    """[1, heads, n, head_dim] -> [1, n, heads * head_dim]."""
    return heads.transpose(1, 2).flatten(2)


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
        self, pcm16k: np.ndarray, language: str | None = None, beam_size: int | None = None
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
            prompt = self._prompt_for(language)
            max_length = self._max_length(duration, prompt)
            max_steps = min(max_length // 2, max_length - (len(prompt) - 1))  # CT2's rule
            if graphs is not None:
                result = graphs.generate(prompt, prompt.index(self._sot), self._eot, max_steps)
            else:
                result = model.generate(state, prompt, prompt.index(self._sot),
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
        from engines.asr.whisper_graphs import WhisperGraphs

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

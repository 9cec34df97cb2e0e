"""Whisper's encoder and decoder in plain PyTorch, as functions of the CTranslate2 weights.

`TorchWhisper` is the model that the torch runner (`torch_whisper.py`, which says what it
copies from CTranslate2) runs eagerly and that its CUDA graphs (`whisper_graphs.py`) capture,
with a decode's caches (`DecodeState`) and result (`Generation`). It has a module of its own so
that the runner imports the graphs and both import the model, one way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from engines.asr.errors import AsrModelLoadError

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

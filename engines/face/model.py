"""The audio-to-landmark network (PyTorch definition; shipped and run as one ONNX file).

Contract: `AudioToLandmarks(features [B, T, 80] log-mel, T a multiple of 4) -> offsets
[B, T / 4, 68, 2]`, one row per 25 fps video frame, in the normalized face frame (`shapes.py`).

Shape: per-channel normalisation (stored statistics) -> a stride-2 convolution to 50 Hz ->
causal dilated residual blocks (~0.9 s of past context) -> every 2nd step is taken as a video
frame -> two causal convolutions at 25 fps -> a linear head to 136 coordinates. The input is
padded on the left with `left_context` (~110) rows of silence, so an utterance's first frames
see what they would after a pause and no convolution reads zero padding.

Bounded look-ahead: the input is extended by `lookahead` (6) rows of silence and frame k depends
on feature rows up to 4k + 6 only, so it sees features up to 60 ms after its time; with the
feature window's own 12.5 ms that is 72.5 ms of audio after the frame's time (the limit is
80 ms). Nothing else looks ahead (every convolution pads on the left only; a test perturbs
single rows to check this).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import torch
from torch import nn

from engines.face.features import FEATS_PER_FRAME, N_MELS, SILENCE_VALUE
from engines.face.shapes import NUM_LANDMARKS

CONFIG_KEY = "rtc_avatar.face.config"  # ONNX metadata key holding `ModelConfig` as JSON


@dataclass(frozen=True)
class ModelConfig:
    n_mels: int = N_MELS
    channels: int = 64
    dilations: tuple[int, ...] = (1, 2, 4, 8, 1, 2, 4)  # at the 50 Hz inner rate
    frame_layers: int = 2
    lookahead: int = 6  # feature rows (10 ms each) past the frame time
    stride: int = FEATS_PER_FRAME
    fps: int = 25

    @property
    def left_context(self) -> int:
        """Rows of silence padded on the left: at least the receptive field (in feature rows),
        and odd so that (left + lookahead - 3) / 2 lands on the 50 Hz grid."""
        field = 4 + 4 * sum(self.dilations) + 2 * self.stride * self.frame_layers
        return field + (1 - (field + self.lookahead) % 2)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ModelConfig:
        raw = json.loads(text)
        raw["dilations"] = tuple(raw["dilations"])
        return cls(**raw)


class CausalConv(nn.Module):
    """Conv1d that pads (k - 1) * dilation on the left, so output t sees inputs <= t."""

    def __init__(self, c_in: int, c_out: int, kernel: int, dilation: int = 1) -> None:
        super().__init__()
        self.pad = (kernel - 1) * dilation
        self.conv = nn.Conv1d(c_in, c_out, kernel, dilation=dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(nn.functional.pad(x, (self.pad, 0)))


class ResidualBlock(nn.Module):
    def __init__(self, channels: int, dilation: int) -> None:
        super().__init__()
        self.conv = CausalConv(channels, channels, 3, dilation)
        self.mix = nn.Conv1d(channels, channels, 1)
        self.act = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mix(self.act(self.conv(x)))


class AudioToLandmarks(nn.Module):
    feat_mean: torch.Tensor
    feat_std: torch.Tensor

    def __init__(self, config: ModelConfig | None = None) -> None:
        super().__init__()
        self.config = config or ModelConfig()
        c = self.config.channels
        # Feature statistics are set from the training data before training starts.
        self.register_buffer("feat_mean", torch.zeros(1, self.config.n_mels, 1))
        self.register_buffer("feat_std", torch.ones(1, self.config.n_mels, 1))
        # 100 Hz -> 50 Hz: output j reads rows 2j .. 2j + 3 of the padded input.
        self.inp = nn.Conv1d(self.config.n_mels, c, 4, stride=2)
        self.blocks = nn.ModuleList(ResidualBlock(c, d) for d in self.config.dilations)
        self.frame_layers = nn.ModuleList(
            CausalConv(c, c, 3) for _ in range(self.config.frame_layers)
        )
        self.head = nn.Conv1d(c, NUM_LANDMARKS * 2, 1)
        self.act = nn.SiLU()

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        cfg = self.config
        x = features.transpose(1, 2)  # [B, n_mels, T]
        # An utterance starts after silence and ends in silence: pad both sides with it, the
        # left by the whole receptive field so no convolution ever reads its zero padding.
        left = cfg.left_context
        x = nn.functional.pad(x, (left, cfg.lookahead), value=SILENCE_VALUE)
        x = (x - self.feat_mean) / self.feat_std
        x = self.act(self.inp(x))
        for block in self.blocks:
            x = block(x)
        # [B, C, T / 4]: frame k reads up to padded row left + 4k + lookahead, i.e. the 50 Hz
        # step (left + lookahead - 3) / 2 + 2k.
        x = x[:, :, (left + cfg.lookahead - 3) // 2 :: cfg.stride // 2]
        for layer in self.frame_layers:
            x = x + self.act(layer(x))
        y = self.head(x)  # [B, 136, K]
        return y.transpose(1, 2).reshape(y.shape[0], y.shape[2], NUM_LANDMARKS, 2)


def build_model(config: ModelConfig | None = None, seed: int | None = None) -> AudioToLandmarks:
    """A freshly initialised model (deterministic for a given seed)."""
    if seed is not None:
        torch.manual_seed(seed)
    return AudioToLandmarks(config)

"""The audio-to-landmark network (PyTorch definition; shipped and run as one ONNX file).

Contract: `AudioToLandmarks(features [B, T, 80] log-mel, T a multiple of 4) -> offsets
[B, T / 4, 68, 2]`, one row per 25 fps video frame, in the normalized face frame
(`common.face_geometry`).

Shape: per-channel normalisation (stored statistics) -> a stride-4 convolution over 80 ms
windows, one per video frame -> causal dilated residual blocks at 25 fps (~1.8 s of past
context) -> a linear head to 136 coordinates. The input is padded on the left with
`left_context` (~190) rows of silence, so an utterance's first frames see what they would after
a pause and no convolution reads zero padding.

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

from common.face_geometry import NUM_LANDMARKS
from engines.face.features import FEATS_PER_FRAME, N_MELS, SILENCE_VALUE

CONFIG_KEY = "rtc_avatar.face.config"  # ONNX metadata key holding `ModelConfig` as JSON


@dataclass(frozen=True)
class ModelConfig:
    n_mels: int = N_MELS
    channels: int = 128
    dilations: tuple[int, ...] = (1, 2, 4, 8, 1, 2, 4)  # at the 25 fps frame rate
    kernel_in: int = 8  # feature rows per input window (80 ms)
    lookahead: int = 6  # feature rows (10 ms each) past the frame time
    stride: int = FEATS_PER_FRAME
    fps: int = 25

    @property
    def left_context(self) -> int:
        """Rows of silence padded on the left: at least the receptive field (in feature rows),
        and such that the input windows end exactly `lookahead` rows after each frame."""
        field = self.kernel_in + 2 * self.stride * sum(self.dilations)
        offset = (self.kernel_in - 1 - self.lookahead) % self.stride
        return field + (offset - field) % self.stride

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
        cfg, c = self.config, self.config.channels
        # Feature statistics are set from the training data before training starts.
        self.register_buffer("feat_mean", torch.zeros(1, cfg.n_mels, 1))
        self.register_buffer("feat_std", torch.ones(1, cfg.n_mels, 1))
        # 100 Hz -> 25 fps: output j reads padded rows 4j .. 4j + kernel_in - 1.
        self.inp = nn.Conv1d(cfg.n_mels, c, cfg.kernel_in, stride=cfg.stride)
        self.blocks = nn.ModuleList(ResidualBlock(c, d) for d in cfg.dilations)
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
        # Frame k is window j0 + k, which ends on padded row left + 4k + lookahead.
        j0 = (left + cfg.lookahead - cfg.kernel_in + 1) // cfg.stride
        y = self.head(x[:, :, j0:])  # [B, 136, T / 4]
        return y.transpose(1, 2).reshape(y.shape[0], y.shape[2], NUM_LANDMARKS, 2)


def build_model(config: ModelConfig | None = None, seed: int | None = None) -> AudioToLandmarks:
    """A freshly initialised model (deterministic for a given seed)."""
    if seed is not None:
        torch.manual_seed(seed)
    return AudioToLandmarks(config)

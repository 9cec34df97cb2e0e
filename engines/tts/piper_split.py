"""A piper voice in two parts: the text's side on onnxruntime (CPU), the audio's on a GPU.

Why: a piper (VITS) voice is a text encoder and a duration predictor (~2,400 of its ~2,750
ONNX nodes, their shapes set by the phonemes and the predicted durations) and then a flow and
a HiFi-GAN decoder (~360 nodes, shapes set by the number of frames). On a CPU the second part
is most of the time (this VM, one thread: the first part 8-10 of 46-48 CPU ms for a one-word
chunk, 32-34 of 249-259 for a later one; bench/gpu_tts.py). Run whole on a GPU, node by
node, the first part's ~2,400 launches cost more CPU than the CPU's synthesis (bench/
RESULTS.md, gpu). So the first part stays on onnxruntime, which lets go of the interpreter
while it computes, and the second runs in torch on the device as one captured CUDA graph per
length bucket (engines/graph_torch.py): a call costs the worker's CPU the text side's few
milliseconds and one replay (on the H200 box: 14.9 / 39.5 ms a first / later chunk, 14 / 39
of them CPU, against 43.8 / 278.3 for the whole voice on its CPU; `config/gpu.toml`).

The buckets: the frames are padded with zeros (masked, as VITS masks its batches) to the next
bucket's length and the audio cut back to the frames'. The flow is masked, so only the
decoder's last ~50 ms see the padding instead of its convolutions' own zero edge: on speech
the chunk differs from the whole graph's by 56-90 dB below its level (bench/gpu_tts.py, 20
chunks, noise off; > 40 dB tested). Frames beyond
the largest bucket run eagerly at their own length.

`PiperSplitSession.run(None, feeds)` answers as the whole voice's onnxruntime session does
(audio, then the per-phoneme frame counts piper's alignments read), so `PiperVoice` uses it
unchanged.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

# Decoder lengths captured, in frames (256 samples, ~11.6 ms each at 22.05 kHz): a one-word
# chunk is ~20-40 frames, a long sentence ~400-800.
BUCKETS = (64, 128, 256, 512, 1024)
# The first node of the second part: piper's VITS exports name nodes by module.
FLOW_PREFIX = "/flow/"


class PiperSplitSession:
    """`model` (a piper voice, `onnx.ModelProto`, its alignment output added) split at its
    flow: the first part on `text_session(model)` (an onnxruntime session factory), the
    second in torch on `device`, captured per bucket where the device is a GPU."""

    def __init__(self, model: Any, device: str, text_session: Any, *,
                 buckets: tuple[int, ...] = BUCKETS, cuda_graphs: bool = True) -> None:
        from onnx import shape_inference
        from onnx.utils import Extractor

        from engines.graph_torch import TorchGraph

        model = shape_inference.infer_shapes(model)  # the parts' inputs get their dimensions
        inputs = [i.name for i in model.graph.input]
        outputs = [o.name for o in model.graph.output]
        extractor = Extractor(model)
        crossing = _crossing(model)
        audio_side = extractor.extract_model(crossing, outputs[:1])
        frames, mask, channels = _latent_and_mask(audio_side, crossing)
        text_side = extractor.extract_model(inputs, [frames, mask, *outputs[1:]])
        self.text = text_session(text_side)  # the text side's session (benchmarks time it)
        self._audio = TorchGraph(audio_side, device, cuda_graph=False)
        self._frames, self._mask = frames, mask
        self.buckets = tuple(sorted(buckets))
        if cuda_graphs and self._audio.capturable:
            for size in self.buckets:
                self._audio.capture({frames: (1, channels, size), mask: (1, 1, size)})
            logger.debug("piper's decoder captured for %s frames", self.captured)

    @property
    def on_gpu(self) -> bool:
        """Whether the audio's side runs on a GPU (its calls then mostly wait on it)."""
        return str(self._audio.device).startswith("cuda")

    @property
    def captured(self) -> list[int]:
        """The bucket lengths (frames) that run as a captured graph."""
        return [shapes[0][2] for shapes in self._audio.captured]

    def bucket(self, frames: int) -> int:
        """The length `frames` is padded to: the smallest bucket that holds it, else itself."""
        return next((size for size in self.buckets if size >= frames), frames)

    def run(self, output_names: list[str] | None, feeds: dict[str, np.ndarray]
            ) -> list[np.ndarray]:
        """The whole voice's outputs for `feeds`: audio, then the alignment's frame counts."""
        if output_names is not None:
            raise ValueError("PiperSplitSession answers every output (output_names None)")
        z, mask, *rest = self.text.run(None, feeds)
        frames = z.shape[2]
        size = self.bucket(frames)
        if size > frames:
            z = np.pad(z, ((0, 0), (0, 0), (0, size - frames)))
            mask = np.pad(mask, ((0, 0), (0, 0), (0, size - frames)))
        audio = self._audio.run(None, {self._frames: z, self._mask: mask})[0]
        hop = audio.shape[-1] // size
        return [audio[..., :frames * hop], *rest]


def _crossing(model: Any) -> list[str]:
    """The tensors the flow reads from before it (a piper VITS export: its latent frames
    and their mask)."""
    nodes = list(model.graph.node)
    start = next((i for i, n in enumerate(nodes) if n.name.startswith(FLOW_PREFIX)), None)
    if start is None:
        raise ValueError(f"no {FLOW_PREFIX} nodes: not a piper (VITS) voice export")
    before = {t for n in nodes[:start] for t in n.output}
    crossing: list[str] = []
    for node in nodes[start:]:
        crossing += [t for t in node.input if t in before and t not in crossing]
    return crossing


def _latent_and_mask(audio_side: Any, crossing: list[str]) -> tuple[str, str, int]:
    """Which crossing tensor is the latent (1, C, T) and which the mask (1, 1, T), and C."""
    dims = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim]
            for i in audio_side.graph.input}
    masks = [t for t in crossing if len(dims.get(t, [])) == 3 and dims[t][1] == 1]
    latents = [t for t in crossing if len(dims.get(t, [])) == 3 and dims[t][1] > 1]
    if len(crossing) != 2 or len(masks) != 1 or len(latents) != 1:
        raise ValueError(f"the flow reads {crossing} from before it; expected a latent and "
                         "a mask (a piper VITS export)")
    return latents[0], masks[0], int(dims[latents[0]][1])

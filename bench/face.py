"""Benchmark: the face stage per frame: features -> model -> Kalman smoothing -> render -> VP8.

Rows, p50/p95 over repeated runs after warm-up (frames/s: video frames per second of compute):
log-mel features, the model on ONNX Runtime (1 thread; batch 1, and N sessions' utterances in
one call), smoothing (per 4 s utterance), the 512x512 render of the default portrait with lip
motion and its VP8 encode (rtc_server/video_encoder.py, one libvpx thread as aiortc picks at
that size) per frame, the pipeline (one utterance: features, model, smoothing, every frame
rendered); with CUDA, the model in torch with CUDA graphs (as config/gpu.toml), batch 1 and N.

    .venv/bin/python bench/face.py [--repeats 30] [--seconds 4] [--sessions 64]
        [--bitrate 500] [--model PATH] [--skip-render] [--json OUT]

`--skip-render` leaves out the render, encode and pipeline rows. CPU numbers on a shared
2-core machine are noisy: rerun when it is idle.
"""

from __future__ import annotations

import argparse
import fractions
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.stats import pct  # noqa: E402
from common.face_geometry import PARAMS, params_to_offsets  # noqa: E402
from engines.face.features import SAMPLE_RATE, log_mel  # noqa: E402
from engines.face.runtime import OnnxRuntimeFace  # noqa: E402
from engines.face.smoothing import KalmanSmoother  # noqa: E402

Row = dict[str, Any]


def speechlike(seconds: float, seed: int) -> np.ndarray:
    """Deterministic amplitude-modulated noise with pauses: content does not change timings."""
    rng = np.random.default_rng(seed)
    n = int(seconds * SAMPLE_RATE)
    t = np.arange(n) / SAMPLE_RATE
    envelope = np.clip(np.sin(2 * np.pi * 3.0 * t), 0, None) * (np.sin(2 * np.pi * 0.4 * t) > -0.5)
    return (6000 * envelope * rng.standard_normal(n)).astype(np.int16)


def lip_motion(count: int) -> np.ndarray:
    """Offsets [count, 68, 2]: the mouth opening and closing about 3 times a second."""
    params = np.zeros((count, len(PARAMS)), np.float32)
    t = np.arange(count) / 25.0
    params[:, PARAMS.index("open")] = 0.45 * (1 + np.sin(2 * np.pi * 3.1 * t))
    params[:, PARAMS.index("jaw")] = 0.25 * (1 + np.sin(2 * np.pi * 3.1 * t + 0.4))
    return params_to_offsets(params)


def _time(fn: Callable[[], object], repeats: int, warmup: int = 3,
          sync: Callable[[], None] | None = None) -> list[float]:
    for _ in range(warmup):
        fn()
    if sync:
        sync()
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        if sync:
            sync()
        out.append((time.perf_counter() - start) * 1000.0)
    return out


def _row(name: str, batch: int, frames: int, ms: list[float]) -> Row:
    p50, p95 = pct(ms, 0.5), pct(ms, 0.95)
    return {"name": name, "batch": batch, "p50_ms": round(p50, 3), "p95_ms": round(p95, 3),
            "frames_per_s": round(frames * batch / (p50 / 1000.0), 1)}


def video_rows(offsets: np.ndarray, pipeline: Callable[[Any], None], repeats: int,
               kbps: int) -> list[Row]:
    """Render and encode per frame, and the pipeline with every frame rendered."""
    import av

    from engines.portrait import detect_portrait_landmarks
    from media.avatar import AvatarRenderer
    from media.idle import default_portrait
    from media.tracks import i420
    from rtc_server.video_encoder import AvatarVp8Encoder

    image = default_portrait()
    renderer = AvatarRenderer(image, detect_portrait_landmarks(image))
    moving = lip_motion(max(repeats * 10, 50))
    counter = iter(range(10**9))
    rows = [_row("render 512x512 (per frame)", 1, 1, _time(
        lambda: renderer.render(moving[next(counter) % len(moving)]), len(moving), warmup=10))]
    frames = []
    for i, frame_offsets in enumerate(moving):
        frame = av.VideoFrame.from_ndarray(i420(renderer.render(frame_offsets)), format="yuv420p")
        frame.pts, frame.time_base = i * 3600, fractions.Fraction(1, 90000)
        frames.append(frame)
    encoder = AvatarVp8Encoder()
    encoder.target_bitrate = kbps * 1000
    encoder.encode(frames[0], force_keyframe=True)
    queue = iter(frames[1:])
    rows.append(_row(f"VP8 encode, {kbps} kbit/s (per frame)", 1, 1,
                     _time(lambda: encoder.encode(next(queue)), len(frames) - 1, warmup=0)))
    avatar = renderer.session()
    rows.append(_row("pipeline: features+model+smooth+render", 1, len(offsets),
                     _time(partial(pipeline, avatar), max(3, repeats // 5), warmup=1)))
    return rows


def cpu_rows(args: argparse.Namespace) -> list[Row]:
    pcm = speechlike(args.seconds, 0)
    feats = log_mel(pcm, SAMPLE_RATE)
    frames = len(feats) // 4
    ort = OnnxRuntimeFace(args.model, threads=1)
    batch = [log_mel(speechlike(args.seconds, i), SAMPLE_RATE) for i in range(args.sessions)]
    offsets = ort.predict(feats)
    rows = [
        _row("features (log-mel)", 1, frames, _time(lambda: log_mel(pcm, SAMPLE_RATE),
                                                     args.repeats)),
        _row("model onnxruntime cpu", 1, frames, _time(lambda: ort.predict(feats), args.repeats)),
        _row("model onnxruntime cpu", args.sessions, frames,
             _time(lambda: ort.predict_batch(batch), max(3, args.repeats // 5), warmup=1)),
        _row("smoothing (per utterance)", 1, frames,
             _time(lambda: KalmanSmoother().smooth(offsets), args.repeats)),
    ]

    def pipeline(avatar: Any) -> None:
        o = KalmanSmoother().smooth(ort.predict(log_mel(pcm, SAMPLE_RATE)))
        for k in range(len(o)):
            avatar.frame(k, o[k])

    if not args.skip_render:
        rows += video_rows(offsets, pipeline, args.repeats, args.bitrate)
    return rows


def gpu_rows(args: argparse.Namespace) -> list[Row]:
    import torch

    from engines.face.torch_runtime import TorchFace

    feats = log_mel(speechlike(args.seconds, 0), SAMPLE_RATE)
    frames = len(feats) // 4
    batch = [log_mel(speechlike(args.seconds, i), SAMPLE_RATE) for i in range(args.sessions)]
    face = TorchFace(args.model, device="cuda", cuda_graphs=True)
    sync = torch.cuda.synchronize
    return [_row("model torch cuda fp32, CUDA graphs", 1, frames,
                 _time(partial(face.predict, feats), args.repeats, sync=sync)),
            _row("model torch cuda fp32, CUDA graphs", args.sessions, frames,
                 _time(partial(face.predict_batch, batch), args.repeats, sync=sync))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--bitrate", type=int, default=500, help="VP8 target, kbit/s")
    parser.add_argument("--model", default=None)
    parser.add_argument("--skip-render", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = cpu_rows(args)
    device = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cpus"
    try:
        import torch

        if torch.cuda.is_available():
            device += f", {torch.cuda.get_device_name(0)}, torch {torch.__version__}"
            rows += gpu_rows(args)
    except ImportError:
        pass
    print(f"# face benchmark, {time.strftime('%Y-%m-%d')}: {args.seconds:g} s utterances "
          f"({int(args.seconds * 25)} frames), {args.sessions} sessions batched; {device}")
    print("| stage | batch | p50 ms | p95 ms | video frames/s |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['name']} | {r['batch']} | {r['p50_ms']:.2f} | {r['p95_ms']:.2f} | "
              f"{r['frames_per_s']:,.0f} |")
    if args.json:
        args.json.write_text(json.dumps({"device": device, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

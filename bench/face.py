"""Benchmark: the face pipeline (features -> model -> Kalman smoothing -> render) per frame.

Rows (each p50/p95 over repeated runs, after warm-up):
- cpu pipeline, batch 1: one 4 s utterance through log-mel features, ONNX Runtime, smoothing and
  the 512x512 renderer; frames/s = video frames produced per second of compute on one thread;
- per stage: features, model (onnxruntime / torch CPU), smoothing, render (ms per call/frame);
- model batched across N sessions (onnxruntime CPU, one call with N utterances);
- with CUDA (the device tool's GPU machine): the torch runtime eager and with CUDA graphs, fp32
  and fp16, batch 1 and batched across N sessions, plus TensorRT when it is installed.

    .venv/bin/python bench/face.py [--repeats 30] [--seconds 4] [--sessions 64]
        [--model PATH] [--skip-render] [--json OUT]

The render rows need dlib (portrait landmarks); the GPU machine has none, so use --skip-render
there. CPU numbers on a shared 2-core machine are noisy: rerun when it is idle.
"""

from __future__ import annotations

import argparse
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


def cpu_rows(model_path: str | None, seconds: float, sessions: int, repeats: int,
             render: bool) -> list[Row]:
    rows: list[Row] = []
    pcm = speechlike(seconds, 0)
    feats = log_mel(pcm, SAMPLE_RATE)
    frames = len(feats) // 4
    ort = OnnxRuntimeFace(model_path, threads=1)
    rows.append(_row("features (log-mel)", 1, frames, _time(lambda: log_mel(pcm, SAMPLE_RATE),
                                                               repeats)))
    rows.append(_row("model onnxruntime cpu", 1, frames, _time(lambda: ort.predict(feats),
                                                                 repeats)))
    batch = [log_mel(speechlike(seconds, i), SAMPLE_RATE) for i in range(sessions)]
    rows.append(_row("model onnxruntime cpu", sessions, frames,
                     _time(lambda: ort.predict_batch(batch), max(3, repeats // 5), warmup=1)))
    try:
        from engines.face.torch_runtime import TorchFace

        tf = TorchFace(model_path, device="cpu")
        rows.append(_row("model torch cpu", 1, frames, _time(lambda: tf.predict(feats),
                                                               repeats)))
    except Exception as exc:  # torch is optional for the CPU table
        print(f"# torch cpu skipped: {exc}", file=sys.stderr)
    offsets = ort.predict(feats)
    rows.append(_row("smoothing (per utterance)", 1, frames,
                     _time(lambda: KalmanSmoother().smooth(offsets), repeats)))
    if render:
        from skimage import data

        from engines.portrait import detect_portrait_landmarks
        from media.avatar import AvatarRenderer

        image = np.ascontiguousarray(data.astronaut())
        renderer = AvatarRenderer(image, detect_portrait_landmarks(image))
        avatar = renderer.session()
        counter = iter(range(10**9))

        def one_frame() -> None:
            k = next(counter)
            avatar.frame(k, offsets[k % frames])

        render_ms = _time(one_frame, repeats * 10, warmup=10)
        rows.append(_row("render 512x512 (per frame)", 1, 1, render_ms))

        def pipeline() -> None:
            f = log_mel(pcm, SAMPLE_RATE)
            o = KalmanSmoother().smooth(ort.predict(f))
            for k in range(len(o)):
                avatar.frame(k, o[k])

        rows.append(_row("pipeline: features+model+smooth+render", 1, frames,
                         _time(pipeline, max(3, repeats // 5), warmup=1)))
    return rows


def gpu_rows(model_path: str | None, seconds: float, sessions: int, repeats: int) -> list[Row]:
    import torch

    from engines.face.torch_runtime import TorchFace

    rows: list[Row] = []
    feats = log_mel(speechlike(seconds, 0), SAMPLE_RATE)
    frames = len(feats) // 4
    batch = [log_mel(speechlike(seconds, i), SAMPLE_RATE) for i in range(sessions)]
    sync = torch.cuda.synchronize
    for half in (False, True):
        tag = "fp16" if half else "fp32"
        for graphs in (False, True):
            face = TorchFace(model_path, device="cuda", cuda_graphs=graphs, half=half)
            label = f"model torch cuda {tag} {'cuda-graphs' if graphs else 'eager'}"
            rows.append(_row(label, 1, frames, _time(partial(face.predict, feats), repeats,
                                                     sync=sync)))
            rows.append(_row(label, sessions, frames,
                             _time(partial(face.predict_batch, batch), repeats, sync=sync)))
        # Transfer-free: features already on the GPU, result left there (the model's own cost).
        x = torch.from_numpy(np.stack(batch)).cuda()
        x1 = x[:1]
        rows.append(_row(f"model torch cuda {tag} eager, device tensors", 1, frames,
                         _time(partial(face.run_device, x1), repeats, sync=sync)))
        rows.append(_row(f"model torch cuda {tag} eager, device tensors", sessions, frames,
                         _time(partial(face.run_device, x), repeats, sync=sync)))
    try:
        from engines.face.tensorrt_runtime import TensorRTFace

        trt_face = TensorRTFace(model_path, max_batch=sessions)
        rows.append(_row("model tensorrt fp16", 1, frames, _time(lambda: trt_face.predict(feats),
                                                                   repeats)))
        rows.append(_row("model tensorrt fp16", sessions, frames,
                         _time(lambda: trt_face.predict_batch(batch), repeats)))
    except Exception as exc:  # not installable on the machines this was built on
        print(f"# tensorrt skipped: {exc}", file=sys.stderr)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--model", default=None)
    parser.add_argument("--skip-render", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = cpu_rows(args.model, args.seconds, args.sessions, args.repeats, not args.skip_render)
    device = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cpus"
    try:
        import torch

        if torch.cuda.is_available():
            device += f", {torch.cuda.get_device_name(0)}, torch {torch.__version__}"
            rows += gpu_rows(args.model, args.seconds, args.sessions, args.repeats)
    except ImportError:
        pass
    print(f"# face benchmark: {args.seconds:g} s utterances ({int(args.seconds * 25)} frames), "
          f"{args.sessions} sessions batched; {device}")
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

"""Train the audio-to-landmark model on synthetic speech and export the shipped ONNX file.

Usage: `python -m engines.face.training [--steps N] [--seed S] [--out PATH] [--quick]`

Steps: synthesize (or read the cached) training speech (`data.py`), compute log-mel features
and viseme landmark targets, train `AudioToLandmarks` on random 4 s windows (Adam, cosine
schedule, seeded numpy/torch, deterministic torch kernels, fixed thread count), evaluate on the
held-out sentences, export ONNX with the metrics in its metadata, check ONNX Runtime against
torch, and print the metrics as JSON. Same seed + same cached speech + same thread count = the
same weights. Progress lines go to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from common.face_geometry import INNER_LIP_PAIRS, INNER_LIPS, JAW, OUTER_LIPS, mouth_opening
from engines.face.artifact import DEFAULT_MODEL_PATH, export_onnx
from engines.face.features import FEATS_PER_FRAME, SILENCE_VALUE
from engines.face.training.data import DataPlan, Utterance, build_dataset, targets
from engines.progress import Progress

logger = logging.getLogger("engines.face.training")

WINDOW_FRAMES = 100  # 4 s per training window
CONTEXT_FRAMES = 48  # real audio before each window (1.92 s > the 1.85 s receptive field)
MOUTH = sorted(set(OUTER_LIPS) | set(INNER_LIPS) | set(JAW))
UPPER = [u for u, _ in INNER_LIP_PAIRS]
LOWER = [lo for _, lo in INNER_LIP_PAIRS]


def _prepare(utts: list[Utterance]) -> list[tuple[np.ndarray, np.ndarray, bool, str]]:
    progress = Progress(logger, "features and targets", len(utts))
    out = []
    for i, u in enumerate(utts):
        feats, offsets, _ = targets(u)
        # Lead with silence so windows starting at the utterance start have context too.
        pad_f = np.full((CONTEXT_FRAMES * FEATS_PER_FRAME, feats.shape[1]), SILENCE_VALUE,
                        np.float32)
        pad_o = np.zeros((CONTEXT_FRAMES, 68, 2), np.float32)
        out.append((np.concatenate([pad_f, feats]), np.concatenate([pad_o, offsets]),
                    u.held_out, u.voice))
        progress.update(i + 1)
    return out


def _batch(items: list[tuple[np.ndarray, np.ndarray, bool, str]], rng: np.random.Generator,
           size: int) -> tuple[np.ndarray, np.ndarray]:
    span = CONTEXT_FRAMES + WINDOW_FRAMES
    weights = np.array([len(o) for _, o, _, _ in items], dtype=np.float64)
    picks = rng.choice(len(items), size=size, p=weights / weights.sum())
    x = np.full((size, span * FEATS_PER_FRAME, items[0][0].shape[1]), SILENCE_VALUE, np.float32)
    y = np.zeros((size, span, 68, 2), np.float32)
    for b, i in enumerate(picks):
        feats, offs, _, _ = items[i]
        start = int(rng.integers(0, max(1, len(offs) - CONTEXT_FRAMES - WINDOW_FRAMES // 2)))
        seg_o = offs[start : start + span]
        seg_f = feats[start * FEATS_PER_FRAME : (start + len(seg_o)) * FEATS_PER_FRAME]
        x[b, : len(seg_f)] = seg_f
        y[b, : len(seg_o)] = seg_o
    # Level augmentation: +-6 dB of gain shifts log power; the floor stays the floor.
    gain = rng.uniform(-6.0, 6.0, size=(size, 1, 1)) * math.log(10.0) / 10.0
    x = np.maximum(x + gain.astype(np.float32), SILENCE_VALUE)
    return x, y


def evaluate(predict: Any, items: list[tuple[np.ndarray, np.ndarray, bool, str]]
             ) -> dict[str, float]:
    """Held-out metrics: mouth RMSE (face units), opening correlation (all, piper, espeak),
    mean |opening| in silence-target frames."""
    preds, trues, engines = [], [], []
    for feats, offs, _, voice in items:
        pred = predict(feats)
        preds.append(pred[CONTEXT_FRAMES:])
        trues.append(offs[CONTEXT_FRAMES:])
        engines.append(np.full(len(offs) - CONTEXT_FRAMES, voice.startswith("piper")))
    p, t, is_piper = np.concatenate(preds), np.concatenate(trues), np.concatenate(engines)
    op_p, op_t = mouth_opening(p), mouth_opening(t)
    quiet = op_t < 0.005
    return {
        "mouth_rmse": float(np.sqrt(np.mean((p[:, MOUTH] - t[:, MOUTH]) ** 2))),
        "opening_corr": float(np.corrcoef(op_p, op_t)[0, 1]),
        "opening_corr_piper": float(np.corrcoef(op_p[is_piper], op_t[is_piper])[0, 1]),
        "opening_corr_espeak": float(np.corrcoef(op_p[~is_piper], op_t[~is_piper])[0, 1]),
        "opening_mae": float(np.mean(np.abs(op_p - op_t))),
        "closed_opening_mean": float(np.mean(np.abs(op_p[quiet]))) if quiet.any() else 0.0,
        "frames": int(len(p)),
    }


def train(steps: int, seed: int, batch: int, threads: int, plan: DataPlan, out: Path,
          lr: float = 3e-3) -> dict[str, Any]:
    import torch

    from engines.face.model import build_model

    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    started = time.perf_counter()
    bars: dict[str, Progress] = {}

    def on_synth(done: int, total: int) -> None:
        bars.setdefault("synth", Progress(logger, "synthesizing training speech", total))
        bars["synth"].update(done)

    utts = build_dataset(plan, on_synth)
    items = _prepare(utts)
    train_items = [it for it in items if not it[2]]
    test_items = [it for it in items if it[2]]
    logger.info("utterances: %d train, %d held out; %.1f min of training audio",
                len(train_items), len(test_items),
                sum(len(o) - CONTEXT_FRAMES for _, o, _, _ in train_items) / 25 / 60)
    model = build_model(seed=seed)
    all_feats = np.concatenate([f for f, _, _, _ in train_items])
    speech = all_feats[all_feats.max(axis=1) > SILENCE_VALUE + 1.0]
    model.feat_mean.copy_(torch.from_numpy(speech.mean(axis=0)).view(1, -1, 1))
    model.feat_std.copy_(torch.from_numpy(speech.std(axis=0) + 1e-3).view(1, -1, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    warmup = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (
        1 + math.cos(math.pi * min(s, steps) / steps)))
    rng = np.random.default_rng(seed)
    progress = Progress(logger, "training", steps, every_s=10.0)
    running = 0.0
    model.train()
    for step in range(steps):
        xb, yb = _batch(train_items, rng, batch)
        x, y = torch.from_numpy(xb), torch.from_numpy(yb)[:, CONTEXT_FRAMES:] * 10.0
        pred = model(x)[:, CONTEXT_FRAMES:] * 10.0
        # Landmarks, their frame-to-frame motion, and (the lip-sync metric) the lip gap.
        gap_err = (pred[:, :, LOWER, 1] - pred[:, :, UPPER, 1]) - (y[:, :, LOWER, 1]
                                                                  - y[:, :, UPPER, 1])
        loss = (torch.mean((pred - y) ** 2)
                + 0.5 * torch.mean((pred.diff(dim=1) - y.diff(dim=1)) ** 2)
                + torch.mean(gap_err.mean(dim=2) ** 2))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        running = 0.98 * running + 0.02 * loss.item() if step else loss.item()
        progress.update(step + 1, f"loss {running:.4f}")
    model.eval()

    def predict(feats: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return np.asarray(model(torch.from_numpy(feats)[None])[0].numpy())

    metrics: dict[str, Any] = dict(evaluate(predict, test_items))
    metrics.update(steps=steps, seed=seed, batch=batch, threads=threads, data_key=plan.key(),
                   train_minutes_audio=round(
                       sum(len(o) - CONTEXT_FRAMES for _, o, _, _ in train_items) / 1500, 1))
    # Only deterministic values go into the file, so a rerun writes the same bytes.
    export_onnx(model, out, metrics)
    metrics["train_seconds"] = round(time.perf_counter() - started, 1)
    from engines.face.runtime import OnnxRuntimeFace

    ort_model = OnnxRuntimeFace(out)
    probe = test_items[0][0]
    metrics["onnx_max_abs_diff"] = float(np.abs(ort_model.predict(probe) - predict(probe)).max())
    logger.info("exported %s (%d bytes)", out, out.stat().st_size)
    return metrics


def main(argv: list[str] | None = None) -> int:
    from common.logs import setup_logging

    parser = argparse.ArgumentParser(prog="python -m engines.face.training", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=DEFAULT_MODEL_PATH)
    parser.add_argument("--quick", action="store_true",
                        help="tiny data and 30 steps: a smoke test of the pipeline")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    setup_logging(args.log_level)
    plan = DataPlan()
    if args.quick:
        plan = DataPlan(n_sentences=60, held_out=10, per_voice=6, held_out_per_voice=2,
                        voices=plan.voices[1:2] + plan.voices[3:5])
        args.steps = min(args.steps, 30)
    metrics = train(args.steps, args.seed, args.batch, args.threads, plan, args.out)
    json.dump(metrics, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

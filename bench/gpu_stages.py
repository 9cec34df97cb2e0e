"""bench/gpu.py's stage measurements other than the LLM: the face model (direct calls and the
cross-session batcher), CTranslate2 on CUDA, and the stages that stay on the CPU.

Each function returns plain rows (dicts) that bench/gpu.py prints and saves.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from bench.face import speechlike
from bench.stats import pct
from engines.face.features import SAMPLE_RATE, log_mel
from engines.face.runtime import FaceRuntime
from engines.face.smoothing import KalmanSmoother
from rtc_server.face_batch import BatchReport, FaceBatcher

Row = dict[str, Any]
CHUNK_S = 4.0  # one TTS chunk (a sentence) per request; the first chunk of an answer is shorter


def timed(fn: Callable[[], object], repeats: int, sync: Callable[[], None] | None = None,
          warmup: int = 3) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        if sync is not None:
            sync()
        out.append((time.perf_counter() - start) * 1000.0)
    return out


def summary(name: str, ms: list[float], **extra: Any) -> Row:
    return {"name": name, "p50_ms": round(pct(ms, 0.5), 3), "p95_ms": round(pct(ms, 0.95), 3),
            "max_ms": round(max(ms), 3) if ms else float("nan"), "n": len(ms), **extra}


def face_calls(face: FaceRuntime, label: str, repeats: int) -> list[Row]:
    """One predict_batch call of 1, 8 and 64 sessions' 4 s chunks; parity with batch 1."""
    feats = [log_mel(speechlike(CHUNK_S, i), SAMPLE_RATE) for i in range(64)]
    rows = []
    for n in (1, 8, 64):
        rows.append(summary(f"{label}: one call, {n} sessions' chunks", timed(
            partial(face.predict_batch, feats[:n]), repeats), batch=n))
    batched = face.predict_batch(feats)
    worst = max(float(np.abs(b - face.predict(f)).max()) for f, b in zip(feats, batched,
                                                                         strict=True))
    rows.append({"name": f"{label}: batch-64 vs batch-1, max abs (face units)",
                 "value": f"{worst:.2e}"})
    return rows


async def _batched_sessions(face: FaceRuntime, sessions: int, burst_repeats: int,
                            steady_s: float, window_ms: float) -> list[Row]:
    executor = ThreadPoolExecutor(1, thread_name_prefix="face")
    reports: list[BatchReport] = []
    batcher = FaceBatcher(face.predict_batch, executor, window_s=window_ms / 1000.0,
                          max_batch=64, max_pending=max(256, sessions), check=face.check,
                          on_batch=reports.append)
    feats = [log_mel(speechlike(CHUNK_S, i), SAMPLE_RATE) for i in range(sessions)]

    async def one(f: np.ndarray) -> float:
        start = time.perf_counter()
        await batcher.predict(f)
        return (time.perf_counter() - start) * 1000.0

    for f in feats[:2]:  # warm-up
        await one(f)
    reports.clear()
    burst: list[float] = []
    for _ in range(burst_repeats):  # every session's chunk at the same instant
        burst += await asyncio.gather(*(one(f) for f in feats))
    burst_reports, reports[:] = list(reports), []

    rng = random.Random(sessions)
    steady: list[float] = []
    end = time.perf_counter() + steady_s

    async def session(f: np.ndarray) -> None:
        # A chunk every 0.1-0.5 s per session: ~5x the chunk rate of a live answer.
        await asyncio.sleep(rng.uniform(0.0, 0.5))
        while time.perf_counter() < end:
            steady.append(await one(f))
            await asyncio.sleep(rng.uniform(0.1, 0.5))

    await asyncio.gather(*(session(f) for f in feats))
    await batcher.close()
    executor.shutdown(wait=True)
    rows = []
    for kind, lat, reps in (("all at once", burst, burst_reports), ("random arrivals", steady,
                                                                     reports)):
        waits = [r.waited_s * 1000.0 for r in reps]
        runs = [r.run_s * 1000.0 for r in reps]
        rows.append(summary(
            f"batcher, {sessions} sessions, {kind}: chunk latency", lat, batch=sessions,
            batches=len(reps), mean_batch=round(float(np.mean([r.size for r in reps])), 1),
            max_wait_ms=round(max(waits), 3), call_p50_ms=round(pct(runs, 0.5), 3),
            call_max_ms=round(max(runs), 3)))
    return rows


def batcher_rows(face: FaceRuntime, sessions: tuple[int, ...] = (1, 8, 64),
                 burst_repeats: int = 20, steady_s: float = 3.0,
                 window_ms: float = 2.0) -> list[Row]:
    rows: list[Row] = []
    for n in sessions:
        rows += asyncio.run(_batched_sessions(face, n, burst_repeats, steady_s, window_ms))
    return rows


def cpu_rows(repeats: int) -> list[Row]:
    """Per-chunk CPU work around the face model, on this host's CPU."""
    from engines.face import create_face

    ort = create_face()
    rows = []
    for seconds in (1.5, CHUNK_S):
        pcm = speechlike(seconds, 1)
        rows.append(summary(f"log-mel features, {seconds:g} s chunk (CPU)", timed(
            partial(log_mel, pcm, SAMPLE_RATE), repeats)))
    feats = log_mel(speechlike(CHUNK_S, 1), SAMPLE_RATE)
    offsets = ort.predict(feats)
    rows.append(summary("Kalman smoothing, 4 s chunk (CPU)", timed(
        lambda: KalmanSmoother().smooth(offsets), repeats)))
    rows.append(summary("face model onnxruntime CPU, 1 chunk of 4 s (CPU reference)", timed(
        lambda: ort.predict(feats), repeats)))
    return rows


def ctranslate2_cuda(model_dir: Path | None) -> Row:
    """Can faster-whisper's CTranslate2 decode on this GPU? The exact answer, tried."""
    try:
        import ctranslate2
    except ImportError as exc:
        return {"name": "ctranslate2 on CUDA", "value": f"not run: ctranslate2 missing ({exc})"}
    from engines.asr.device import probe

    count = ctranslate2.get_cuda_device_count()
    info = f"ctranslate2 {ctranslate2.__version__}, {count} CUDA device(s)"
    if model_dir is None:
        return {"name": "ctranslate2 on CUDA", "value": f"{info}; not run: no model given"}
    try:
        cpu = ctranslate2.models.Whisper(str(model_dir), device="cpu")
        probe(cpu)
        model = ctranslate2.models.Whisper(str(model_dir), device="cuda", compute_type="float16")
        probe(model)
    except Exception as exc:  # noqa: BLE001 - the message is the result
        return {"name": "ctranslate2 on CUDA",
                "value": f"{info}; FAILS: {type(exc).__name__}: {exc}"}
    mel = ctranslate2.StorageView.from_array(np.zeros((1, model.n_mels, 500), np.float32))
    ms = timed(lambda: model.encode(mel, to_cpu=True), 20)
    return {"name": "ctranslate2 on CUDA", "value": f"{info}; runs: encode 5 s p50 "
            f"{pct(ms, 0.5):.2f} ms (tiny random model)"}


def whisper_cpu(tokenizer_dir: Path | None, threads: tuple[int, ...] = (2, 4)) -> list[Row]:
    """The ASR pause decode on this host's CPU: a Whisper-base-shaped model (RANDOM weights,
    English vocabulary, int8), 2 s of speech + 3 s of padding, 20 tokens forced."""
    if tokenizer_dir is None:
        return [{"name": "Whisper base CPU decode", "value": "not run: no tokenizer given"}]
    import tempfile

    import ctranslate2
    import torch
    from transformers import (
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperTokenizer,  # the fast tokenizer (transformers 5 has one class per model)
    )

    tokenizer = WhisperTokenizer.from_pretrained(tokenizer_dir)
    config = WhisperConfig(vocab_size=51864, d_model=512, encoder_layers=6, decoder_layers=6,
                           encoder_attention_heads=8, decoder_attention_heads=8,
                           encoder_ffn_dim=2048, decoder_ffn_dim=2048, num_mel_bins=80)
    rows = []
    with tempfile.TemporaryDirectory() as root:
        torch.manual_seed(0)
        WhisperForConditionalGeneration(config).save_pretrained(f"{root}/hf")
        tokenizer.save_pretrained(f"{root}/hf")
        ctranslate2.converters.TransformersConverter(f"{root}/hf").convert(
            f"{root}/ct2", quantization="int8", force=True)
        prompt = tokenizer.convert_tokens_to_ids(["<|startoftranscript|>", "<|notimestamps|>"])
        extractor = WhisperFeatureExtractor(feature_size=80)
        audio = np.zeros(5 * SAMPLE_RATE, np.float32)
        audio[: 2 * SAMPLE_RATE] = speechlike(2.0, 3) / 32768.0  # 2 s of speech, 3 s padding
        for n in threads:
            model = ctranslate2.models.Whisper(f"{root}/ct2", device="cpu", compute_type="int8",
                                               intra_threads=n)

            def decode(model: Any = model) -> None:
                mel = extractor(audio, sampling_rate=SAMPLE_RATE, return_tensors="np",
                                padding="do_not_pad").input_features[:, :, :500]
                features = ctranslate2.StorageView.from_array(np.ascontiguousarray(mel))
                model.generate(features, [prompt], beam_size=1, max_length=20,
                               suppress_tokens=[tokenizer.eos_token_id], suppress_blank=False)

            rows.append(summary(f"Whisper-base-shaped int8 CPU, {n} threads: log-mel + decode "
                                "of a 2 s question (5 s window), 20 tokens",
                                timed(decode, 10, warmup=2)))
    return rows

"""Benchmark: every stage of an answer on one GPU, and a voice-to-voice estimate built from them.

Made for the device tool's H200 (`python3 bench/gpu.py --out $OUT`); on a machine without
CUDA it runs the CPU rows and the batcher on ONNX Runtime as a smoke and says what it skipped.

- LLM (`TransformersLLM` on CUDA: static KV cache, captured decode steps, `stream()` from its
  decode thread): Qwen2.5-shaped models with RANDOM weights (the bundled 1.1 GB GGUF cannot
  travel to the GPU machine, which takes 64 MiB per call and reaches no network), saved as a
  Hugging Face directory and loaded through the engine's own path, with the bundled Qwen
  tokenizer and chat template and the companion persona's prompt. Per turn of a growing
  conversation: tokens prefilled, time to the first token, time to the first speakable chunk
  (the token at which the agent's chunker, `first_max_chars` as deployed, releases the first
  chunk of typical answers: counted on written answers with the real tokenizer), ms per token.
  Also
  eager decoding, sampling, and the bare decoder on the main thread, for comparison.
- Face: the torch runtime with CUDA graphs, one call for 1, 8 and 64 sessions' 4 s chunks;
  the cross-session batcher with 1, 8 and 64 sessions (all at once, and random arrivals).
- ASR: whether CTranslate2 (faster-whisper's backend) runs on this GPU, tried; the pause
  decode of a Whisper-base-shaped model (random weights) on this host's CPU.
- CPU stages on this host, then the estimate; its assumed parts are named with their sources.

    python3 bench/gpu.py [--out DIR] [--shapes 1.5b,0.5b,3b] [--turns 12] [--tokens 64]
        [--tokenizer DIR] [--ct2-model DIR] [--whisper-tokenizer DIR] [--repeats 50]
        [--llm-only]

The LLM rows live in bench/gpu_llm.py, the others in bench/gpu_stages.py.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.gpu_llm import llm_rows  # noqa: E402  (LLM rows: bench/gpu_llm.py)
from bench.gpu_stages import (  # noqa: E402
    Row,
    batcher_rows,
    cpu_rows,
    ctranslate2_cuda,
    face_calls,
    whisper_cpu,
)

# Assumed stage times of the estimate, with their sources.
PAUSE_MS = 200  # [vad] pause_ms: the short pause at which the turn model is asked (hearing)
SMART_TURN_MS = 26  # Smart Turn v3.2, onnxruntime 1 thread (shared/RECIPES.md)
ASR_CPU_MS = 200  # Whisper base int8 pause decode of a 2 s question on 2 CPU cores (~0.2 s,
# the hearing work's measurement, 2026-12-01; RECIPES: 0.39 s for a 2 s clip)
TTS_MS = 120  # piper first audio of a 3-word first chunk, p50 (bench/RESULTS.md think_speak)
LEAD_MS = 20  # [agent] lead_ms
NETWORK_MS = 30  # one way over a LAN plus the browser's jitter buffer: assumed, not measured


def estimate(llm: Row | None, face_ms: float | None, asr_ms: float | None) -> list[Row]:
    chunk = llm["chunk_p50_ms"] if llm else float("nan")
    face = face_ms if face_ms is not None else float("nan")
    asr, asr_source = (asr_ms, "measured above: base-shaped, 4 threads of this host") if (
        asr_ms is not None) else (ASR_CPU_MS, "assumed: ~0.2 s on 2 cores (hearing work)")
    parts = [
        ("pause that asks the turn model", PAUSE_MS, "assumed: [vad] pause_ms (hearing work)"),
        ("ASR pause decode, Whisper base on the CPU", asr,
         f"{asr_source}; CTranslate2 cannot use this GPU"),
        ("LLM first speakable chunk (GPU)", chunk, "measured above, p50"),
        ("TTS first audio, piper (CPU)", TTS_MS, "bench/RESULTS.md think_speak, p50, 2 cores"),
        ("face: features (CPU) + batched GPU call", face, "measured above"),
        ("audio track lead", LEAD_MS, "[agent] lead_ms"),
        ("network and jitter buffer", NETWORK_MS, "assumed"),
    ]
    rows: list[Row] = [{"name": f"estimate part: {n}", "value": f"{v:.0f} ms ({s})"}
                       for n, v, s in parts]
    total = sum(v for _, v, _ in parts)
    # With the ASR off the critical path (the final ready when Smart Turn says "complete"):
    fast = total - asr + SMART_TURN_MS
    rows.append({"name": "ESTIMATE voice-to-voice, ASR on the CPU (deployable here)",
                 "value": f"{total:.0f} ms"})
    rows.append({"name": "ESTIMATE voice-to-voice, transcript final at the Smart Turn verdict "
                         f"({PAUSE_MS} + {SMART_TURN_MS} ms: a GPU ASR)",
                 "value": f"{fast:.0f} ms"})
    return rows


def render(rows: list[Row], device: str) -> str:
    lines = [f"# bench/gpu.py, {time.strftime('%Y-%m-%d %H:%M')}, {device}", ""]
    for r in rows:
        body = ", ".join(f"{k} {v}" for k, v in r.items() if k != "name")
        lines.append(f"- {r['name']}: {body}")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(os.environ["OUT"]) if os.environ.get(
        "OUT") else None)
    parser.add_argument("--shapes", default="1.5b,0.5b")
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--tokenizer", type=Path, default=None,
                        help="a directory with the Qwen tokenizer files (default: the bundled "
                             "0.5B model, converted)")
    parser.add_argument("--ct2-model", type=Path, default=None,
                        help="a small CTranslate2 Whisper model for the CUDA probe")
    parser.add_argument("--whisper-tokenizer", type=Path, default=None,
                        help="Whisper tokenizer files: time a base-shaped decode on the CPU")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--llm-only", action="store_true", help="skip face, ASR and CPU rows")
    args = parser.parse_args()
    import torch

    cuda = torch.cuda.is_available()
    device = f"{platform.machine()}, {os.cpu_count()} cpus, torch {torch.__version__}"
    if cuda:
        device += f", {torch.cuda.get_device_name(0)}"
    rows: list[Row] = []
    llm_main: Row | None = None
    if cuda:
        import transformers

        device += f", transformers {transformers.__version__}"
        if args.tokenizer is None:
            from engines.llm.model_files import resolve_hf_dir

            args.tokenizer = resolve_hf_dir("qwen2.5-coder-0.5b")
        for i, shape in enumerate(s for s in args.shapes.split(",") if s):
            got = llm_rows(shape, args.tokenizer, args.turns, args.tokens, extras=i == 0)
            rows += got
            llm_main = llm_main or next(r for r in got if "chunk_p50_ms" in r)
            print(render(got, device), flush=True)
    else:
        rows.append({"name": "LLM and GPU face rows", "value": "skipped: no CUDA GPU here"})
    if args.llm_only:
        print(render(rows, device))
        return 0
    from engines.face import FaceConfig, create_face

    face_ms = None
    faces = [("torch CUDA graphs fp32", FaceConfig(engine="torch", device="cuda")),
             ("torch CUDA graphs fp16", FaceConfig(engine="torch", device="cuda", half=True))]
    for label, config in faces if cuda else [("onnxruntime CPU (smoke)", FaceConfig())]:
        face: Any = create_face(config)
        if hasattr(face, "warm_up"):
            start = time.perf_counter()
            graphs = face.warm_up(64)
            rows.append({"name": f"face {label} warm-up", "value": f"{graphs} graphs in "
                         f"{time.perf_counter() - start:.1f} s"})
        rows += face_calls(face, f"face {label}", args.repeats if cuda else 3)
        sessions = (1, 8, 64) if cuda else (1, 8)
        got = batcher_rows(face, sessions, burst_repeats=20 if cuda else 2,
                           steady_s=3.0 if cuda else 1.0)
        rows += got
        face_ms = face_ms if face_ms is not None else got[-1]["p50_ms"]
        print(render(rows[-8:], device), flush=True)
    rows.append(ctranslate2_cuda(args.ct2_model))
    asr = whisper_cpu(args.whisper_tokenizer)
    rows += asr
    cpu = cpu_rows(args.repeats)
    rows += cpu
    features_ms = next(r["p50_ms"] for r in cpu if "1.5 s chunk" in r["name"])
    asr_ms = next((r["p50_ms"] for r in asr if "4 threads" in r["name"]), None)
    rows += estimate(llm_main, None if face_ms is None else face_ms + features_ms, asr_ms)
    text = render(rows, device)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "gpu_bench.md").write_text(text)
        (args.out / "gpu_bench.json").write_text(json.dumps({"device": device, "rows": rows},
                                                            indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Piper by runtime: onnxruntime on the CPU ("cpu"), onnxruntime's CUDA provider ("cuda",
`[tts] use_cuda`), the voice's graph in torch on the GPU ("torch-cuda", `[tts] runtime =
"torch"`, `device = "cuda"`) or on the CPU ("torch-cpu"), or split: the text side on
onnxruntime, the decoder in torch captured per length bucket ("split-cuda", `[tts] runtime =
"split"`; "split-cpu" eager).

The text is what the GPU profile speaks: `bench/gpu_answers.json`'s answers cut by the agent's
chunker with the profile's `first_chunk_max_chars`, so "first" chunks are the one- or
two-word openings whose synthesis sits between the end of turn and the first audio, and
"later" the sentences after them. For each arm:

- serial: every chunk once, one at a time (ms per call, p50 / p95, and the process's CPU ms
  per call: what piper still costs the worker's cores when the voice runs on the GPU);
- concurrent: `--threads` callers at once, each speaking its share of the answers, as the
  sessions of one worker do (ms per call, p50 / p95), while a ticker thread asks to wake
  every millisecond: its lateness p50 / p95 / max is what a worker's event loop would feel
  of the calls' hold on the interpreter (onnxruntime lets it go while it computes; the
  torch runtime keeps it while it launches kernels);
- with a split arm, the CPU ms per call of its text side (onnxruntime) against the whole
  voice's: what the split leaves on the worker's cores;
- the same audio: with piper's noise off (noise_scale 0, noise_w_scale 0) each arm's samples
  against the first arm's, per chunk (length equal, correlation, how far below the speech
  the difference is in dB, largest difference).

    python bench/gpu_tts.py [--arms cpu,cuda,torch-cuda,split-cuda] [--threads 6] [--json F]

Run on the GPU machine through bench/gpu_device.sh (the "cuda" arm with `EXTRAS=ortgpu`,
onnxruntime-gpu).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.stats import pct  # noqa: E402
from bench.together import at_once  # noqa: E402
from engines.text.chunker import Chunker, ChunkerConfig  # noqa: E402
from engines.tts.piper_tts import PiperTTS  # noqa: E402
from rtc_server.config import load_config  # noqa: E402

PROFILE = REPO / "config" / "gpu.toml"


def answer_chunks(answers: list[str], first_max_chars: int) -> list[list[str]]:
    """Each answer's chunks, cut as the agent cuts them."""
    out = []
    for answer in answers:
        chunker = Chunker(ChunkerConfig(first_max_chars=first_max_chars))
        out.append([c.strip() for c in [*chunker.push(answer), *chunker.flush()] if c.strip()])
    return out


def timed_call(tts: PiperTTS, text: str) -> float:
    start = time.perf_counter()
    for _ in tts.synthesize(text):
        pass
    return (time.perf_counter() - start) * 1000


def serial(tts: PiperTTS, texts: list[str]) -> tuple[list[float], float]:
    """ms per call, and the process's CPU ms per call."""
    cpu = time.process_time()
    ms = [timed_call(tts, t) for t in texts]
    return ms, (time.process_time() - cpu) * 1000 / max(len(texts), 1)


def concurrent(tts: PiperTTS, answers: list[list[str]], threads: int
               ) -> tuple[list[float], list[float]]:
    """`threads` callers at once, caller i speaking the chunks of answers i, i + threads, ...;
    and a ticker's lateness (ms) over a 1 ms sleep meanwhile."""
    done = threading.Event()
    late: list[float] = []

    def ticker() -> None:
        while not done.is_set():
            start = time.perf_counter()
            time.sleep(0.001)
            late.append((time.perf_counter() - start) * 1000 - 1.0)

    tick = threading.Thread(target=ticker, daemon=True)
    tick.start()
    try:
        ms = at_once(threads, lambda i: [timed_call(tts, text) for chunks in answers[i::threads]
                                         for text in chunks])
    finally:
        done.set()
        tick.join()
    return ms, late


def make(arm: str, quiet: bool = False) -> PiperTTS:
    noise = 0.0 if quiet else None
    runtime, _, device = arm.partition("-")
    if runtime in ("torch", "split"):
        return PiperTTS(runtime=runtime, device=device, noise_scale=noise, noise_w_scale=noise)
    return PiperTTS(use_cuda=arm == "cuda", threads=1, noise_scale=noise, noise_w_scale=noise)


def noiseless(tts: PiperTTS, text: str) -> np.ndarray:
    """The chunk's samples from a voice made with its noise off (the same each time)."""
    parts = [speech.pcm for speech in tts.synthesize(text)]
    return np.concatenate(parts).astype(np.float32) if parts else np.zeros(0, np.float32)


def compare(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    n = min(len(a), len(b))
    corr = float(np.corrcoef(a[:n], b[:n])[0, 1]) if n > 1 else float("nan")
    gap = float(np.sqrt(np.mean((a[:n] - b[:n]) ** 2))) if n else 0.0
    level = float(np.sqrt(np.mean(a[:n] ** 2))) if n else 0.0
    snr = 20 * float(np.log10(level / gap)) if gap > 0 else float("inf")
    return {"len_a": len(a), "len_b": len(b), "corr": corr, "snr_db": snr,
            "max_diff": float(np.max(np.abs(a[:n] - b[:n]))) if n else 0.0,
            "peak": float(np.max(np.abs(a))) if len(a) else 0.0}


def text_side_cpu(split: PiperTTS, whole: PiperTTS, texts: list[str]) -> tuple[float, float]:
    """CPU ms per call of the split voice's text side and of the whole voice (both
    onnxruntime on this CPU, noise as the voice's), over `texts`."""
    voice = split.voice
    feeds = []
    for text in texts:
        ids = [i for phonemes in voice.phonemize(text) for i in voice.phonemes_to_ids(phonemes)]
        feeds.append({"input": np.array([ids], np.int64),
                      "input_lengths": np.array([len(ids)], np.int64),
                      "scales": np.array([0.667, 1.0, 0.8], np.float32)})
    out = []
    for session in (voice.session.text, whole.voice.session):
        for f in feeds[:3]:
            session.run(None, f)
        cpu = time.process_time()
        for f in feeds:
            session.run(None, f)
        out.append((time.process_time() - cpu) * 1000 / max(len(feeds), 1))
    return out[0], out[1]


def stats(ms: list[float]) -> dict[str, float]:
    return {"n": len(ms), "p50": pct(ms, 0.5), "p95": pct(ms, 0.95),
            "max": max(ms) if ms else float("nan")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arms", default="cpu,split-cuda")
    parser.add_argument("--threads", type=int, default=6, help="concurrent callers")
    parser.add_argument("--answers", type=Path, default=REPO / "bench" / "gpu_answers.json")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    first_max = load_config(PROFILE).agent.first_chunk_max_chars
    answers = [str(a["answer"]) for a in json.loads(args.answers.read_text())]
    per_answer = answer_chunks(answers, first_max)
    first = [chunks[0] for chunks in per_answer if chunks]
    later = [c for chunks in per_answer for c in chunks[1:]]
    print(f"{len(answers)} answers: {len(first)} first chunks (e.g. {first[:3]}), "
          f"{len(later)} later", flush=True)
    results: dict[str, Any] = {"first_max_chars": first_max, "threads": args.threads, "arms": {}}
    audio: dict[str, list[np.ndarray]] = {}
    for arm in args.arms.split(","):
        loaded = time.perf_counter()
        tts = make(arm)
        load_s = time.perf_counter() - loaded
        first_call = timed_call(tts, "Warming up the voice.")
        for text in first[:5]:
            timed_call(tts, text)
        s_first, cpu_first = serial(tts, first)
        s_later, cpu_later = serial(tts, later)
        conc, late = concurrent(tts, per_answer, args.threads)
        audio[arm] = [noiseless(make(arm, quiet=True), t) for t in [*first[:10], *later[:10]]]
        sf, sl, cc, lt = stats(s_first), stats(s_later), stats(conc), stats(late)
        results["arms"][arm] = {
            "load_s": load_s, "first_call_ms": first_call, "serial_first": sf,
            "serial_later": sl, "cpu_ms_per_first": cpu_first, "cpu_ms_per_later": cpu_later,
            "concurrent": cc, "ticker_late": lt}
        print(f"{arm}: load {load_s:.1f} s, first call {first_call:.0f} ms; serial first "
              f"chunks {sf['p50']:.1f} / {sf['p95']:.1f} ms (CPU {cpu_first:.1f} ms each), "
              f"later {sl['p50']:.1f} / {sl['p95']:.1f} ms (CPU {cpu_later:.1f}); "
              f"{args.threads} at once {cc['p50']:.1f} / {cc['p95']:.1f} ms, a ticker late "
              f"{lt['p50']:.2f} / {lt['p95']:.2f} / {lt['max']:.1f} ms", flush=True)
    split_arm = next((arm for arm in args.arms.split(",") if arm.startswith("split-")), None)
    if split_arm:  # where the split's CPU goes: its text side against the whole voice
        split, whole = make(split_arm), make("cpu")
        sides = {kind: text_side_cpu(split, whole, texts)
                 for kind, texts in (("first", first), ("later", later))}
        results["text_side_cpu_ms"] = sides
        print("CPU ms per call, the split's text side / the whole voice on onnxruntime: first "
              f"chunks {sides['first'][0]:.1f} / {sides['first'][1]:.1f}, later "
              f"{sides['later'][0]:.1f} / {sides['later'][1]:.1f}", flush=True)
    arms = list(audio)
    for arm in arms[1:]:
        pairs = [compare(a, b) for a, b in zip(audio[arms[0]], audio[arm], strict=True)]
        results.setdefault("same_audio", {})[arm] = pairs
        print(f"noise off, {arm} against {arms[0]}: lengths equal "
              f"{sum(p['len_a'] == p['len_b'] for p in pairs)}/{len(pairs)}, correlation "
              f"min {min(p['corr'] for p in pairs):.4f}, difference below the speech "
              f"{min(p['snr_db'] for p in pairs):.1f}-{max(p['snr_db'] for p in pairs):.1f} "
              f"dB, largest difference "
              f"{max(p['max_diff'] for p in pairs):.0f} of peaks "
              f"{min(p['peak'] for p in pairs):.0f}-{max(p['peak'] for p in pairs):.0f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

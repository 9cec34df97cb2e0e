"""Kokoro-82M (int8 ONNX) speed on another machine's CPU, without its phonemizers there.

The GPU machine has onnxruntime but none of Kokoro's phonemizers (misaki, jieba, espeak-ng)
and takes 64 MiB per transfer. The text side is done here, the model side there:

    # here: the sentences of bench/tts.py (testkit.sentences), cut by the agent's chunker and
    # phonemized as the engine does (normalize, KokoroG2P, split_phonemes), as token ids, with
    # the two voices' style tables
    .venv/bin/python bench/gpu_kokoro.py prepare --out .gpu/kokoro_tokens.npz \
        [--voices zm_yunxia af_heart] [--sentences 12]
    # there (numpy + onnxruntime only): the model as the engine runs it (`_session`: one
    # session, intra-op threads, no spinning, graph optimization "all")
    python3 bench/gpu_kokoro.py run --model kokoro-v1.0.int8.onnx \
        --tokens kokoro_tokens.npz --threads 1,2,4

Per voice and thread count: `first ms`, p50/p95 of the first chunk's inference (what the voice
adds to an answer's first audio once its chunk is cut); `rtf`, inference time over the audio's
length per sentence (p50; the audio untrimmed: the engine trims a few ms of silence); `cpu`,
the process's CPU time over the audio's length. Phonemizing is not timed (it is here).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SAMPLE_RATE = 24000
MAX_TOKENS = 510


def prepare(out: Path, voices: list[str], sentences: int) -> None:
    from engines.text.normalize import normalize
    from engines.tts.kokoro import KokoroTTS, split_phonemes
    from engines.voicing import SpokenChunks
    from testkit.sentences import EN_SENTENCES, ZH_SENTENCES

    arrays: dict[str, np.ndarray] = {}
    layout: dict[str, list[list[int]]] = {}  # voice -> per sentence, pieces per chunk
    for voice in voices:
        tts = KokoroTTS(voice)
        texts = (ZH_SENTENCES if tts.language.startswith("z") else EN_SENTENCES)[:sentences]
        arrays[f"style_{voice}"] = np.asarray(tts._style, np.float32)
        per_sentence: list[list[int]] = []
        k = 0
        for text in texts:
            chunks = []
            for chunk in SpokenChunks().all(text):
                spoken = normalize(chunk).strip()
                pieces = split_phonemes(tts.g2p(spoken), tts.max_tokens) if spoken else []
                ids = [[tts._vocab[c] for c in p if c in tts._vocab][:MAX_TOKENS]
                       for p in pieces]
                ids = [i for i in ids if i]
                for piece in ids:
                    arrays[f"tokens_{voice}_{k}"] = np.asarray(piece, np.int64)
                    k += 1
                chunks.append(len(ids))
            per_sentence.append(chunks)
        layout[voice] = per_sentence
    arrays["layout"] = np.frombuffer(json.dumps(layout).encode(), np.uint8)
    np.savez(out, **arrays)  # type: ignore[arg-type]
    print(f"wrote {out}: {sum(len(a) for a in layout.values())} sentences, "
          f"{out.stat().st_size / 1e6:.2f} MB")


def _session(model: str, threads: int) -> Any:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    return onnxruntime.InferenceSession(model, sess_options=options,
                                        providers=["CPUExecutionProvider"])


def run(model: str, tokens: Path, threads: list[int], limit: int = 0) -> str:
    from bench.stats import pct

    data = np.load(tokens)
    layout: dict[str, list[list[int]]] = json.loads(bytes(data["layout"]).decode())
    lines = [f"bench/gpu_kokoro.py run, {time.strftime('%Y-%m-%d %H:%M')}, "
             f"{platform.machine()}, {__import__('os').cpu_count()} cpus", "",
             "| voice | threads | first ms p50 | first ms p95 | rtf p50 | cpu/audio |",
             "|---|---|---|---|---|---|"]
    for n in threads:
        session = _session(model, n)
        for voice, sentences in layout.items():
            style = data[f"style_{voice}"]

            def infer(ids: np.ndarray, style: np.ndarray = style,
                      session: Any = session) -> float:
                out = session.run(None, {
                    "tokens": np.array([[0, *ids, 0]], np.int64),
                    "style": style[len(ids) - 1].reshape(1, -1),
                    "speed": np.array([1.0], np.float32)})[0]
                return float(np.asarray(out).size) / SAMPLE_RATE

            infer(data[f"tokens_{voice}_0"])  # warm-up: onnxruntime's first-call set-up
            first, rtf, cpu, audio, k = [], [], 0.0, 0.0, 0
            for chunks in sentences[:limit or None]:
                took = seconds = 0.0
                for c, pieces in enumerate(chunks):
                    t0, c0 = time.perf_counter(), time.process_time()
                    for _ in range(pieces):
                        seconds += infer(data[f"tokens_{voice}_{k}"])
                        k += 1
                    dt = time.perf_counter() - t0
                    cpu += time.process_time() - c0
                    took += dt
                    if c == 0:
                        first.append(dt * 1000)
                audio += seconds
                rtf.append(took / max(seconds, 1e-3))
                print(f"{voice} threads {n}: sentence {len(rtf)} {took:.2f} s for "
                      f"{seconds:.2f} s of audio (first chunk {first[-1]:.0f} ms)",
                      file=sys.stderr, flush=True)
            lines.append(f"| {voice} | {n} | {pct(first, 0.5):.0f} | {pct(first, 0.95):.0f} | "
                         f"{pct(rtf, 0.5):.3f} | {cpu / max(audio, 1e-3):.3f} |")
            print(lines[-1], flush=True)
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("prepare", "run"))
    parser.add_argument("--out", type=Path, default=Path(".gpu/kokoro_tokens.npz"))
    parser.add_argument("--voices", nargs="+", default=["zm_yunxia", "af_heart"])
    parser.add_argument("--sentences", type=int, default=12, help="prepared; run: the first N")
    parser.add_argument("--model", default="kokoro-v1.0.int8.onnx")
    parser.add_argument("--tokens", type=Path, default=Path("kokoro_tokens.npz"))
    parser.add_argument("--threads", default="1,2,4")
    args = parser.parse_args()
    if args.command == "prepare":
        prepare(args.out, args.voices, args.sentences)
    else:
        print(run(args.model, args.tokens, [int(t) for t in args.threads.split(",")],
                  args.sentences))
    return 0


if __name__ == "__main__":
    sys.exit(main())

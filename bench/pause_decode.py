"""The pause decode alone: one Whisper decode of a whole spoken question, as the hearing lane
makes it `decode_ahead_ms` into a silence (engines/asr/ahead.py), per runtime, threads and
context padding. The end of turn waits for this text (bench/RESULTS.md, section gpu), so its
time on the machine that serves is what the pause settings must be weighed against.

    python bench/pause_decode.py --model base --threads 1,2,4 --pads 3,1 --repeats 5
    python bench/pause_decode.py --runtimes torch --device cuda --graphs off,on --busy 0,2

`--graphs` (runtime torch): eager or CUDA graphs (`[asr] cuda_graphs`); `--busy N`: N Python
threads spin beside the decodes, as the server's event loop and video do: a decode that
launches many kernels waits for the GIL at each (measured live on the H200: 37 ms alone,
~125 ms in the server).

Questions are the voice-to-voice set, spoken by piper (testkit.conversation.speech_of) with
the missing silence of a pause appended as the lane does. Prints one Markdown row per setting:
decode p50 / p95 ms and the share of it the encoder takes, and the text of the first question.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.stats import pct  # noqa: E402
from engines.asr import AsrConfig  # noqa: E402
from engines.asr.audio import SAMPLE_RATE  # noqa: E402
from engines.asr.whisper import WhisperRunner  # noqa: E402
from testkit.conversation import QUESTIONS, speech_of  # noqa: E402

logger = logging.getLogger("bench.pause_decode")
PAUSE_S = 0.2  # the pause the decode ahead completes with silence


def questions(n: int) -> list[np.ndarray]:
    silence = np.zeros(int(PAUSE_S * SAMPLE_RATE), np.int16)
    return [np.concatenate([speech_of(q), silence]) for q in QUESTIONS[:n]]


def encoder_ms(runner: WhisperRunner, pcm: np.ndarray) -> float:
    """The encoder's part of a decode, on the decode's own window (CTranslate2 only; nan
    otherwise)."""
    model = getattr(runner, "_model", None)
    ct2 = getattr(runner, "_ct2", None)
    if model is None or ct2 is None:
        return float("nan")
    mel, _ = runner._window(pcm)
    view = ct2.StorageView.from_array(np.ascontiguousarray(mel[None]))
    start = time.perf_counter()
    model.encode(view)
    return (time.perf_counter() - start) * 1000


@contextlib.contextmanager
def busy(threads: int) -> Iterator[None]:
    """`threads` pure-Python loops holding the GIL between their switch intervals."""
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            sum(range(2000))

    workers = [threading.Thread(target=spin, daemon=True) for _ in range(threads)]
    for worker in workers:
        worker.start()
    try:
        yield
    finally:
        stop.set()
        for worker in workers:
            worker.join()


def run(config: AsrConfig, audio: list[np.ndarray], repeats: int,
        spinners: int) -> tuple[list[float], float, list[str]]:
    from engines.asr.streaming import WhisperStreamingASR

    runner = WhisperStreamingASR(config).runner
    runner.decode(audio[0])  # the first call's one-off costs
    took, encoder = [], []
    with busy(spinners):
        for _ in range(repeats):
            for pcm in audio:
                took.append(runner.decode(pcm).seconds * 1000)
                encoder.append(encoder_ms(runner, pcm))
    texts = [runner.accept(runner.decode(pcm)) for pcm in audio]
    share = float(np.nanmedian(encoder)) / pct(took, 0.5) if np.isfinite(encoder).any() else \
        float("nan")
    return took, share, texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="base", help="base | tiny.en | a directory")
    parser.add_argument("--runtimes", default="ctranslate2", help="comma-separated [asr] runtimes")
    parser.add_argument("--device", default="cpu", help="[asr] device")
    parser.add_argument("--threads", default="1,2,4", help="comma-separated cpu_threads")
    parser.add_argument("--pads", default="3", help="comma-separated context_pad_s")
    parser.add_argument("--questions", type=int, default=10)
    parser.add_argument("--graphs", default="on", help="comma-separated off|on (runtime torch)")
    parser.add_argument("--busy", default="0", help="comma-separated spinning Python threads")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    audio = questions(args.questions)
    seconds = [a.size / SAMPLE_RATE for a in audio]
    print(f"{len(audio)} questions, {min(seconds):.1f}-{max(seconds):.1f} s with the pause's "
          f"{PAUSE_S:.1f} s, x{args.repeats}; model {args.model}, device {args.device}\n")
    print("| runtime | graphs | threads | context pad s | busy threads | decode p50 / p95 ms "
          "| encoder share | texts as the first row's | text |")
    print("|---|---|---|---|---|---|---|---|---|")
    base = AsrConfig(model=args.model, device=args.device)
    first: list[str] | None = None
    for runtime in args.runtimes.split(","):
        for graphs in args.graphs.split(",") if runtime == "torch" else ["-"]:
            for threads in (int(t) for t in args.threads.split(",")):
                for pad in (float(p) for p in args.pads.split(",")):
                    for spinners in (int(b) for b in args.busy.split(",")):
                        config = replace(base, runtime=runtime, cpu_threads=threads,
                                         context_pad_s=pad, cuda_graphs=graphs == "on")
                        took, share, texts = run(config, audio, args.repeats, spinners)
                        first = first or texts
                        same = sum(a == b for a, b in zip(texts, first, strict=True))
                        print(f"| {runtime} | {graphs} | {threads} | {pad:g} | {spinners} | "
                              f"{pct(took, 0.5):.0f} / {pct(took, 0.95):.0f} | {share:.0%} | "
                              f"{same}/{len(texts)} | {texts[0]} |", flush=True)


if __name__ == "__main__":
    main()

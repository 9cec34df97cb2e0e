"""Try the ASR alone: `python -m engines.asr FILE.wav`.

Reads any audio file (PyAV decodes and resamples it to 16 kHz mono), runs the endpointer on
20 ms frames and one ASR stream per utterance, and prints each partial and final transcript
with its audio time and compute time. `--realtime` paces the audio like a live microphone, so
the printed final latency is what a user would wait after their speech ended.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import numpy as np

from engines.asr import AsrConfig, create_asr
from engines.asr.audio import SAMPLE_RATE
from engines.asr.base import AsrStream
from engines.asr.errors import InvalidAudioError
from engines.vad import SpeechEnded, SpeechStarted, VadConfig, create_endpointer

logger = logging.getLogger("engines.asr")
_FRAME = SAMPLE_RATE * 20 // 1000


def read_audio(path: Path) -> np.ndarray:
    """Decode any audio file to 16 kHz mono int16 with PyAV."""
    import av

    try:
        container = av.open(str(path))
    except (av.error.FFmpegError, OSError) as exc:
        raise InvalidAudioError(f"cannot read {path}: {exc}") from exc
    resampler = av.AudioResampler(format="s16", layout="mono", rate=SAMPLE_RATE)
    chunks = []
    with container:
        for frame in container.decode(audio=0):
            for out in resampler.resample(frame):
                chunks.append(out.to_ndarray().reshape(-1))
        for out in resampler.resample(None):
            chunks.append(out.to_ndarray().reshape(-1))
    return np.concatenate(chunks).astype(np.int16) if chunks else np.zeros(0, np.int16)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engines.asr", description=__doc__)
    parser.add_argument("file", type=Path, help="audio file (wav, mp3, ...)")
    parser.add_argument("--engine", default="faster-whisper", help="faster-whisper | funasr")
    parser.add_argument("--model", default=None, help="Whisper model dir / FunASR model")
    parser.add_argument("--realtime", action="store_true", help="pace audio like a microphone")
    parser.add_argument("--end-silence-ms", type=int, default=400, help="endpointer hangover")
    parser.add_argument(
        "--pause-hint-ms", type=int, default=0,
        help="call the stream's pause_hint() at this much trailing silence (0 = never)",
    )
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)

    from common.logs import setup_logging

    setup_logging(args.log_level)
    kwargs: dict[str, str] = {"engine": args.engine}
    if args.model:
        kwargs["funasr_model" if args.engine == "funasr" else "model_path"] = args.model
    config = AsrConfig(**kwargs)  # type: ignore[arg-type]
    load_start = time.perf_counter()
    asr = create_asr(config)
    print(f"loaded {config.engine} in {time.perf_counter() - load_start:.2f} s")
    audio = read_audio(args.file)
    print(f"{args.file}: {audio.shape[0] / SAMPLE_RATE:.2f} s")
    audio = np.concatenate([audio, np.zeros(SAMPLE_RATE, np.int16)])  # let the last one end

    endpointer = create_endpointer(VadConfig(end_silence_ms=args.end_silence_ms))
    stream: AsrStream | None = None
    hinted = False
    wall0 = time.perf_counter()
    for i in range(0, audio.shape[0] - _FRAME + 1, _FRAME):
        frame = audio[i : i + _FRAME]
        t_audio = (i + _FRAME) / SAMPLE_RATE
        if args.realtime:
            time.sleep(max(0.0, wall0 + t_audio - time.perf_counter()))
        event = endpointer.push(frame)
        if isinstance(event, SpeechStarted):
            stream, hinted = asr.open(), False
            print(f"[{t_audio:6.2f}s] speech started at {event.t:.2f} s")
            frame = event.audio
        if stream is None:
            continue
        if isinstance(event, SpeechEnded):
            start = time.perf_counter()
            final = stream.finish()
            took = time.perf_counter() - start
            print(
                f"[{t_audio:6.2f}s] FINAL (speech ended at {event.t:.2f} s, "
                f"finish() {took * 1000:.0f} ms): {final}"
            )
            stream = None
            continue
        start = time.perf_counter()
        partial = stream.feed(frame)
        silence_ms = endpointer.trailing_silence_ms
        if args.pause_hint_ms > 0 and silence_ms >= args.pause_hint_ms and not hinted:
            hinted = True
            hint = getattr(stream, "pause_hint", None)
            if hint is not None:
                hint()
        elif silence_ms == 0:
            hinted = False
        if partial is not None:
            took = time.perf_counter() - start
            print(f"[{t_audio:6.2f}s] partial ({took * 1000:.0f} ms): {partial}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

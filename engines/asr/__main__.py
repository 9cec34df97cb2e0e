"""Try hearing alone: `python -m engines.asr FILE.wav`.

Reads any audio file (`engines.pcm.read_audio`: PyAV decodes it to 16 kHz mono), runs the
endpointer, the turn model and one ASR stream per utterance over it
(`engines.asr.offline.listen`, in audio time), and prints each endpointer event, each pause's
verdict, the partials and the final transcripts with their audio times and the compute time.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
import time
from pathlib import Path

import numpy as np

from engines.asr import AsrConfig, create_asr
from engines.asr.audio import SAMPLE_RATE
from engines.asr.offline import listen
from engines.pcm import read_audio
from engines.turn import TurnConfig, load_turn_model
from engines.vad import SpeechEnded, SpeechPaused, SpeechStarted, VadConfig, VadEvent

logger = logging.getLogger("engines.asr")


def _print_event(now: float, event: VadEvent) -> None:
    if isinstance(event, SpeechStarted):
        print(f"[{now:6.2f}s] speech started at {event.t:.2f} s")
    elif isinstance(event, SpeechPaused):
        print(f"[{now:6.2f}s] pause (voice stopped at {event.t:.2f} s)")
    elif isinstance(event, SpeechEnded):
        print(f"[{now:6.2f}s] end ({event.reason}, voice stopped at {event.t:.2f} s)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engines.asr", description=__doc__)
    parser.add_argument("file", type=Path, help="audio file (wav, mp3, ...)")
    parser.add_argument("--engine", default="faster-whisper", help="faster-whisper | funasr")
    parser.add_argument("--model", default=None,
                        help="base | tiny.en | Whisper CTranslate2 dir | FunASR model dir")
    parser.add_argument("--language", default="en", help="en | zh | auto")
    parser.add_argument("--runtime", default=AsrConfig.runtime, help="ctranslate2 | torch")
    parser.add_argument("--device", default=AsrConfig.device, help="cpu | cuda | auto")
    parser.add_argument("--turn", default=TurnConfig.model, help="smart-turn-v3.2 | none")
    parser.add_argument("--pause-ms", type=int, default=VadConfig.pause_ms)
    parser.add_argument("--end-silence-ms", type=int, default=VadConfig.end_silence_ms,
                        help="hangover without a turn model")
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)

    from common.logs import setup_logging

    setup_logging(args.log_level)
    config = AsrConfig(engine=args.engine, language=args.language, runtime=args.runtime,
                       device=args.device)
    if args.model:
        field = "funasr_model" if args.engine == "funasr" else "model"
        config = dataclasses.replace(config, **{field: args.model})
    load_start = time.perf_counter()
    asr = create_asr(config)
    turn = TurnConfig(model=args.turn)
    model = load_turn_model(turn)
    print(f"loaded {config.engine} and turn model {turn.model} in "
          f"{time.perf_counter() - load_start:.2f} s")
    audio = read_audio(args.file, SAMPLE_RATE)
    print(f"{args.file}: {audio.shape[0] / SAMPLE_RATE:.2f} s")
    audio = np.concatenate([audio, np.zeros(2 * SAMPLE_RATE, np.int16)])  # let the last end

    vad = VadConfig(pause_ms=args.pause_ms, end_silence_ms=args.end_silence_ms)
    start = time.perf_counter()
    heard = listen(audio, asr, vad=vad, turn=turn, turn_model=model, on_event=_print_event)
    took = time.perf_counter() - start
    for i, utterance in enumerate(heard, 1):
        for pause in utterance.pauses:
            p = "-" if pause.probability is None else f"{pause.probability:.2f}"
            verdict = "complete" if pause.complete else "incomplete"
            print(f"  #{i} pause at {pause.t:6.2f}s: p={p} {verdict}: {pause.text}")
        for t, partial in utterance.partials:
            print(f"  #{i} partial [{t:6.2f}s]: {partial}")
        print(f"#{i} FINAL [{utterance.onset:.2f}-{utterance.voice_end:.2f} s, "
              f"{utterance.reason}]: {utterance.text}")
    print(f"{len(heard)} utterances; compute {took:.1f} s for "
          f"{audio.shape[0] / SAMPLE_RATE:.1f} s of audio")
    return 0


if __name__ == "__main__":
    sys.exit(main())

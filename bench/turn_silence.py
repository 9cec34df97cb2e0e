"""What more silence tells the end of turn: for each question, Smart Turn's probability,
Whisper's probability for the final mark and the verdict (`engines.turn.policy`) after
N ms of silence, for several N.

    .venv/bin/python bench/turn_silence.py [--silences 160,200,300,400,600] [--voice piper]
        [--questions "Who wrote Romeo and Juliet?|..."]

Why: on the H200 the same questions waited for more silence in every run (bench/RESULTS.md,
section gpu); this says which signal was unsure and whether silence alone changes it (the
case for `[turn] recheck_ms`). Offline, deterministic: the voice's synthesis, 0.5 s of room
before it, Whisper base (CTranslate2 int8) and Smart Turn v3.2 as the server loads them.
Prints one Markdown row per question.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engines.asr import AsrConfig  # noqa: E402
from engines.asr.base import PauseText  # noqa: E402
from engines.asr.whisper import load_runner  # noqa: E402
from engines.turn import TurnConfig, load_turn_model  # noqa: E402
from engines.turn.policy import complete_after_ms  # noqa: E402
from testkit.pauses import COMPLETE_QUESTIONS  # noqa: E402
from testkit.speech import synth, voiced_bounds  # noqa: E402

SR = 16000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--silences", default="160,200,300,400,600", help="ms, comma-separated")
    parser.add_argument("--voice", default="piper", help="testkit.speech engine")
    parser.add_argument("--questions", help="'|'-separated (default: testkit.pauses' complete)")
    parser.add_argument("--pause-ms", type=int, default=200, help="[vad] pause_ms")
    args = parser.parse_args()
    silences = [int(s) for s in args.silences.split(",")]
    questions = args.questions.split("|") if args.questions else list(COMPLETE_QUESTIONS)
    turn = TurnConfig()
    model = load_turn_model(turn)
    assert model is not None
    runner = load_runner(AsrConfig(model="base"))
    print("| question | " + " | ".join(f"{ms} ms: Smart Turn / final mark / ends at"
                                       for ms in silences) + " |")
    print("|---|" + "---|" * len(silences))
    room = np.zeros(SR // 2, np.int16)
    for question in questions:
        speech = synth(question, args.voice)
        first, last = voiced_bounds(speech)
        cells = []
        for ms in silences:
            audio = np.concatenate([room, speech[first:last], np.zeros(SR * ms // 1000, np.int16)])
            probability = model.complete_probability(audio)
            decoded = runner.decode(audio)
            after = complete_after_ms(probability, PauseText(runner.accept(decoded),
                                                             decoded.end_probability),
                                      turn, args.pause_ms)
            ends = "limit" if after is None else f"{after:.0f}"
            cells.append(f"{probability:.2f} / {decoded.end_probability:.2f} / {ends}")
        print(f"| {question} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()

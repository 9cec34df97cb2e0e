"""Whisper's greedy search against a beam, on questions in voices nothing was tuned on.

Whether a beam would spare the end of turn Whisper base's misrecognitions ("Why do cats
pur?", "Nema Famous Painting by Van Gogh"): each question is synthesized in each Kokoro voice
(testkit.speech, cached), 0.2 s of silence after it, and decoded whole once per beam size by
the CPU runner (CTranslate2, as `[asr] runtime = "ctranslate2"` loads it). A misheard
utterance is one whose words (lower case, punctuation dropped) differ from the question's.
Prints each misheard utterance with every beam's text and final-mark probability (0.0 where
the runner gives none), then the counts and the time per decode.

    .venv/bin/python bench/asr_beam.py [--voices bm_george,bf_emma,am_adam] [--beams 1,5]
        [--questions-file bench/questions_heldout.txt ...] [--model base]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engines.asr.config import AsrConfig  # noqa: E402
from engines.asr.whisper import load_runner  # noqa: E402
from testkit.speech import synth  # noqa: E402

HELD_OUT = ("bench/questions_heldout.txt", "bench/questions_heldout2.txt")


def words(text: str) -> list[str]:
    return re.sub(r"[^a-z0-9 ]", "", text.lower().replace("-", " ")).split()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--voices", default="bm_george,bf_emma,am_adam", help="Kokoro voices")
    parser.add_argument("--beams", default="1,5", help="beam sizes, comma-separated")
    parser.add_argument("--questions-file", action="append", type=Path,
                        help="one question a line (default: both held-out sets)")
    parser.add_argument("--model", default="base", help="base | tiny.en | a directory")
    args = parser.parse_args()
    beams = [int(b) for b in args.beams.split(",")]
    files = args.questions_file or [Path(f) for f in HELD_OUT]
    questions = [line.strip() for f in files for line in f.read_text().splitlines()
                 if line.strip() and not line.startswith("#")]
    runner = load_runner(AsrConfig(model=args.model, runtime="ctranslate2"))
    misheard = dict.fromkeys(beams, 0)
    seconds = dict.fromkeys(beams, 0.0)
    n = 0
    for voice in args.voices.split(","):
        for question in questions:
            pcm = np.concatenate([synth(question, "kokoro", voice=voice),
                                  np.zeros(3200, np.int16)])
            n += 1
            heard = {b: runner.decode(pcm, beam_size=b) for b in beams}
            wrong = [b for b in beams if words(heard[b].text) != words(question)]
            for b in beams:
                seconds[b] += heard[b].seconds
                misheard[b] += b in wrong
            if wrong:
                print(f"{voice} {question!r}: " + "; ".join(
                    f"beam {b} {heard[b].text!r} (mark {heard[b].end_probability:.2f})"
                    for b in beams), flush=True)
    print(f"{n} utterances; misheard: " + ", ".join(
        f"beam {b} {misheard[b]}" for b in beams) + "; seconds a decode: " + ", ".join(
        f"beam {b} {seconds[b] / max(n, 1):.3f}" for b in beams))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What more silence tells the end of turn: for each question, Smart Turn's probability,
Whisper's probability for the final mark and the verdict (`engines.turn.policy`) after
N ms of silence, for several N.

    .venv/bin/python bench/turn_silence.py [--silences 160,200,300,400,600] [--voice piper]
        [--voice-name am_michael] [--questions "Who wrote Romeo and Juliet?|..." |
         --questions-file bench/questions_heldout.txt | --prefixes]

`--prefixes`: instead of questions, the words before each mid-sentence pause of
testkit.pauses' PAUSE_QUESTIONS, cut from the whole sentence as the voice said it (what the
turn must not end on; piper or espeak): each row adds the transcript Whisper wrote.

`--text-model qwen2.5-coder-0.5b|qwen2.5-coder-1.5b` adds a third signal's column: the
bundled chat model's probability that the user's message ends after what Whisper wrote (its
`<|im_end|>` as the next token, llama.cpp), the kind of text-completeness signal LiveKit's
turn detector fine-tunes a Qwen2.5-0.5B for; here the instruct model as shipped.
`--text-end` adds the trained probe's (engines/turn/text_end.py: the bundled 1.5B's hidden
state, in torch on this CPU) probability and the verdict with it at each silence, at
`--text-end-threshold`.

Why: on the H200 the same questions waited for more silence in every run (bench/RESULTS.md,
section gpu); this says which signal was unsure and whether silence alone changes it (the
case for `[turn] recheck_ms`). Offline, deterministic: the voice's synthesis, 0.5 s of room
before it, Whisper base (CTranslate2 int8) and Smart Turn v3.2 as the server loads them.
Prints one Markdown row per question.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engines.asr import AsrConfig  # noqa: E402
from engines.asr.base import PauseText  # noqa: E402
from engines.asr.whisper import load_runner  # noqa: E402
from engines.turn import TurnConfig, load_turn_model  # noqa: E402
from engines.turn.policy import complete_after_ms  # noqa: E402
from testkit.pauses import COMPLETE_QUESTIONS, PAUSE_QUESTIONS, paused_question  # noqa: E402
from testkit.speech import synth, voiced_bounds  # noqa: E402

SR = 16000


def message_end(model: str) -> Callable[[str], float]:
    """The bundled chat model's probability that a user message ends after `text` (its
    `<|im_end|>` next, under the model's own chat format with a one-line system prompt)."""
    from llama_cpp import Llama

    from engines.llm.model_files import resolve_gguf

    llm = Llama(model_path=str(resolve_gguf(model)), n_ctx=512, n_threads=2, verbose=False,
                logits_all=True)
    end = llm.tokenize(b"<|im_end|>", add_bos=False, special=True)[0]
    head = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"

    def probability(text: str) -> float:
        llm.reset()
        llm.eval(llm.tokenize((head + text).encode(), add_bos=False, special=True))
        logits = np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        weights = np.exp(logits - logits.max())
        return float(weights[end] / weights.sum())

    return probability


def probe_reader() -> Callable[[str], float]:
    """The text-end probe's probability for a heard text, as the server computes it."""
    from engines.turn.text_end import HEAD, TextEndProbe, normalized
    from engines.turn.training.train import hidden_states, load_model

    net, tokenizer = load_model(None)
    probe = TextEndProbe.load()

    def probability(text: str) -> float:
        words = normalized(text)
        if not words:
            return 0.0
        return probe.probability(hidden_states(net, tokenizer, [words])[0])

    assert HEAD  # (hidden_states adds it)
    return probability


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--silences", default="160,200,300,400,600", help="ms, comma-separated")
    parser.add_argument("--voice", default="piper", help="testkit.speech engine")
    parser.add_argument("--voice-name", help="that engine's voice (e.g. kokoro's am_michael)")
    parser.add_argument("--questions-file", help="one question a line ('#' comments)")
    parser.add_argument("--questions", help="'|'-separated (default: testkit.pauses' complete)")
    parser.add_argument("--prefixes", action="store_true",
                        help="the paused questions' words before their pause (not a turn end)")
    parser.add_argument("--pause-ms", type=int, default=200, help="[vad] pause_ms")
    parser.add_argument("--prompt", default=None, help="[asr] prompt (Whisper's initial prompt)")
    parser.add_argument("--text-model", help="a bundled GGUF name: add its end-of-message "
                                             "probability for the heard text")
    parser.add_argument("--text-end", action="store_true",
                        help="add the text-end probe and the verdict with it")
    parser.add_argument("--text-end-threshold", type=float, default=0.9)
    args = parser.parse_args()
    text_end = message_end(args.text_model) if args.text_model else None
    probe = probe_reader() if args.text_end else None
    silences = [int(s) for s in args.silences.split(",")]
    if args.prefixes:
        questions = [prefix for prefix, _ in PAUSE_QUESTIONS]
    elif args.questions_file:
        lines = Path(args.questions_file).read_text(encoding="utf-8").splitlines()
        questions = [q.strip() for q in lines if q.strip() and not q.startswith("#")]
    else:
        questions = args.questions.split("|") if args.questions else list(COMPLETE_QUESTIONS)
    turn = TurnConfig(text_end_threshold=args.text_end_threshold if probe else 0.0)
    model = load_turn_model(turn)
    assert model is not None
    runner = load_runner(AsrConfig(model="base", prompt=args.prompt))
    extra = [f"{args.text_model}: message ends"] if text_end else []
    if probe:
        extra.append(f"text-end probe / ends at with it (>= {args.text_end_threshold})")
    print("| question | " + " | ".join([*(f"{ms} ms: Smart Turn / final mark / ends at"
                                         for ms in silences), *extra]) + " |")
    print("|---|" + "---|" * (len(silences) + len(extra)))
    room = np.zeros(SR // 2, np.int16)
    for k, question in enumerate(questions):
        if args.prefixes:
            paused = paused_question(*PAUSE_QUESTIONS[k], 0.7, args.voice)
            voiced = paused.pcm[: int(paused.pause_start * SR)]
        else:
            speech = synth(question, args.voice, voice=args.voice_name)
            first, last = voiced_bounds(speech)
            voiced = speech[first:last]
        cells = []
        heard = ""
        with_probe = []
        for ms in silences:
            audio = np.concatenate([room, voiced, np.zeros(SR * ms // 1000, np.int16)])
            probability = model.complete_probability(audio)
            decoded = runner.decode(audio)
            heard = runner.accept(decoded)
            after = complete_after_ms(probability, PauseText(heard, decoded.end_probability),
                                      turn, args.pause_ms)
            ends = "limit" if after is None else f"{after:.0f}"
            cells.append(f"{probability:.2f} / {decoded.end_probability:.2f} / {ends}")
            if probe:
                p = probe(heard.strip())
                again = complete_after_ms(probability, PauseText(heard, decoded.end_probability),
                                          turn, args.pause_ms, text_end=p)
                with_probe.append(f"{p:.3f} / {'limit' if again is None else f'{again:.0f}'}")
        if text_end:
            cells.append(f"{text_end(heard.strip()):.3f}")
        if probe:
            cells.append(", ".join(with_probe))
        label = (f"{question} (heard {heard.strip()!r})"
                 if args.prefixes or text_end or probe else question)
        print(f"| {label} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()

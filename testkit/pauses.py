"""Spoken questions with a pause in mid-sentence, for end-of-turn tests and benchmarks.

`paused_question(prefix, rest, pause_s, engine)` synthesizes the whole sentence once (so the
words before the pause keep the prosody of a sentence that goes on, as a hesitating speaker's
do) and opens a silence of `pause_s` at the word boundary after `prefix`. The boundary comes
from the TTS phoneme timings: the phonemes of `prefix` said alone are counted off the
sentence's. 10 ms fades on both sides keep the cut click-free.

`PAUSE_QUESTIONS` pairs a prefix that needs the rest with the rest ("I'd like to" ...
"transfer some money to my sister."); `COMPLETE_QUESTIONS` are whole questions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from testkit.speech import Engine, synth, synth_with_timings, voiced_bounds

SR = 16000
PAUSE_QUESTIONS = (
    ("I'd like to", "transfer some money to my sister."),
    ("Could you tell me", "how much it costs to send a parcel to Spain?"),
    ("What is the", "best way to get to the airport from here?"),
    ("I was wondering if", "you could help me reset my password."),
    ("Can you remind me to", "call the dentist tomorrow morning?"),
    ("My card was", "charged twice for the same order."),
    ("How long does it take to", "get a new passport?"),
    ("I need to", "change the address on my account."),
    ("Is it possible to", "pay the bill in two parts?"),
    ("Tell me about the", "history of the old town hall."),
    ("Why does the", "sky turn red in the evening?"),
    ("I would like to book a table for", "four people on Friday night."),
    ("What time does the", "last train to the city leave?"),
    ("Do you know if the", "museum is open on Mondays?"),
    ("Please send the report to", "my manager before noon."),
    ("Where can I find the", "nearest cash machine?"),
    ("Could you explain how", "interest is calculated on my savings?"),
    ("I lost my", "phone on the bus yesterday evening."),
    ("Which of these", "accounts has the lowest fees?"),
    ("We are planning a trip to", "the mountains next month."),
)
COMPLETE_QUESTIONS = (
    "What is the capital of France?",
    "How many days are in a week?",
    "What color is the sky on a clear day?",
    "Can you recommend a good book?",
    "What is two plus two?",
    "How do I open a savings account?",
    "What is the weather usually like in spring?",
    "Tell me a fun fact about cats.",
    "What is the tallest mountain in the world?",
    "How can I improve my sleep?",
    "What does a bank teller do?",
    "Why do leaves change color in autumn?",
    "What is your name?",
    "How far away is the moon?",
    "What should I cook for dinner tonight?",
    "Who wrote Romeo and Juliet?",
    "What is photosynthesis?",
    "How do I reset my password?",
    "What is the largest ocean?",
    "Can you help me plan a trip?",
)
_FADE = SR // 100  # 10 ms


@dataclass(frozen=True)
class PausedSpeech:
    pcm: np.ndarray  # the sentence with the pause, no lead or tail silence
    pause_start: float  # s, where the words before the pause end
    pause_end: float  # s, where the rest begins
    text: str


def _boundary_ms(prefix: str, sentence: str, engine: Engine, voice: str | None) -> float:
    spoken = [p for p in synth_with_timings(prefix, engine, voice=voice).phonemes
              if p.phoneme != "_"]
    full = synth_with_timings(sentence, engine, voice=voice).phonemes
    words = [p for p in full if p.phoneme != "_"]
    t = words[len(spoken)].start_ms
    for p in full:  # piper marks word gaps with "_": cut in the middle of the gap
        if p.phoneme == "_" and p.start_ms < t <= p.start_ms + p.dur_ms + 1:
            return p.start_ms + p.dur_ms / 2
    return t


def paused_question(
    prefix: str, rest: str, pause_s: float, engine: Engine = "piper", voice: str | None = None
) -> PausedSpeech:
    sentence = f"{prefix} {rest}"
    pcm = synth(sentence, engine, voice=voice)
    cut = int(_boundary_ms(prefix, sentence, engine, voice) * SR / 1000)
    first, last = voiced_bounds(pcm)
    head = pcm[first:cut].astype(np.float64)
    tail = pcm[cut:last].astype(np.float64)
    ramp = np.linspace(1.0, 0.0, _FADE)
    head[-_FADE:] *= ramp
    tail[:_FADE] *= ramp[::-1]
    gap = np.zeros(int(pause_s * SR))
    out = np.concatenate([head, gap, tail]).astype(np.int16)
    return PausedSpeech(out, head.shape[0] / SR, (head.shape[0] + gap.shape[0]) / SR, sentence)

"""The sentence gate: an answer's sentence starts speaking only when what is decoded carries
the voice to its end at the measured rates; a fast LLM is never held."""

from __future__ import annotations

import dataclasses

import pytest

from engines.voicing import SpokenChunks
from rtc_server.pacing import EXPECTED_SENTENCE_CHARS, Pacing, SentenceGate, chunk_growth
from rtc_server.profile import FIXED_PACE

VOICE = dataclasses.replace(FIXED_PACE, speaking_chars_per_s=15.0, tts_s_per_char=0.005,
                            tts_first_chunk_s=0.1, hold_sentences=True)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def pacing(decode: float | None, clock: Clock | None = None) -> Pacing:
    return Pacing(dataclasses.replace(VOICE, decode_chars_per_s=decode), clock or Clock())


def test_a_decode_faster_than_the_voice_holds_nothing() -> None:
    gate = pacing(60.0)
    lag = 0.1 + 0.005 * 40
    assert gate.may_start(int(15.0 * lag) + 1)  # just what covers the synthesis of the next


def test_a_slow_decode_holds_the_sentence_until_its_words_carry_the_voice() -> None:
    """r = 10 chars/s against a voice of 15: the sentence's first third must be written."""
    gate = pacing(10.0)
    needed = EXPECTED_SENTENCE_CHARS * (1 - 10 / 15) + 10 * (0.1 + 0.005 * 40)
    assert not gate.may_start(int(needed) - 1)
    assert gate.may_start(int(needed) + 1)
    assert pacing(5.0).may_start(int(needed) + 1) is False  # slower still: more


def test_the_live_rate_takes_over_and_never_exceeds_the_calibrated_one() -> None:
    clock = Clock()
    gate = pacing(60.0, clock)
    gate.decoded("Sure")  # the first token: its latency is not a rate
    for _ in range(10):
        clock.now += 1.0
        gate.decoded("abcd")  # 4 characters a second, live
    assert gate.rate == 4.0
    assert not gate.may_start(20)
    fast = pacing(None, clock)
    assert fast.rate is None and fast.may_start(1)  # nothing known: no hold


def test_the_gate_joins_a_held_start_with_what_follows_exactly() -> None:
    chunks = SpokenChunks(first_max_chars=12)
    gate = SentenceGate(chunks, pacing(5.0))  # very slow: hold until the sentence ends
    said: list[str] = []
    text = "Sure, the branch opens at nine on Saturday. It closes at noon."
    for word in text.split(" "):
        said += gate.push(chunks.push(word + " "))
    said += gate.flush(chunks.flush())
    assert "".join(said).strip() == text  # nothing lost, nothing added
    assert said[0].strip() == "Sure, the branch opens at nine on Saturday."  # held, then whole

    fast_chunks = SpokenChunks(first_max_chars=12)
    fast = SentenceGate(fast_chunks, pacing(200.0))
    out: list[str] = []
    for word in text.split(" "):
        out += fast.push(fast_chunks.push(word + " "))
    out += fast.flush(fast_chunks.flush())
    assert out[0].strip() == "Sure," and "".join(out).strip() == text  # as cut, at once


def test_the_runway_cuts_mid_sentence_but_waits_at_a_sentence_start() -> None:
    chunks = SpokenChunks(first_max_chars=12)
    gate = SentenceGate(chunks, pacing(5.0))
    said = gate.push(chunks.push("It is open. ")) + gate.push(chunks.push("Tomorrow we open at"))
    assert said == ["It is open. "]
    assert gate.runway() == []  # the next sentence has barely begun: a pause between them
    off = SentenceGate(chunks, pacing(5.0), hold=False)
    assert off.runway() != []  # without holding, cut at once (the fixed profile)


def test_chunk_growth_lets_the_next_chunk_be_synthesized_while_one_plays() -> None:
    """A chunk of c characters plays c / 15 s; at 5 ms a character 80% of that synthesizes
    c * 0.8 / (15 * 0.005) characters, where the LLM writes faster than the voice synthesizes.
    Without a calibration: off (chunks from text alone)."""
    gpu = dataclasses.replace(VOICE, decode_chars_per_s=1000.0)  # writes 5x the synthesis
    assert chunk_growth(gpu) == pytest.approx(0.8 / (15.0 * 0.005))
    slow_voice = dataclasses.replace(gpu, tts_s_per_char=0.02)
    assert chunk_growth(slow_voice) < chunk_growth(gpu)
    # An LLM slower than the voice's synthesis (100 < 200 chars/s): off; untimed: fast.
    assert chunk_growth(dataclasses.replace(gpu, decode_chars_per_s=100.0)) == 0.0
    assert chunk_growth(VOICE) == chunk_growth(gpu)
    assert chunk_growth(FIXED_PACE) == 0.0

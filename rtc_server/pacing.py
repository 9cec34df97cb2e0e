"""When a sentence of the answer may start speaking: not before its decoded words, spoken at
the voice's rate, carry the voice to the sentence's end while the rest is decoded.

Lengths are the chunker's (`chunk_size`: stripped characters, a Chinese character counting 3,
about one short English word), as the calibration's rates are.

The LLM writes at `r` characters a second (measured live on this answer once a few tokens are
in; before that the profile's calibrated estimate, `Pace.decode_chars_per_s`), the voice says
`v` a second (`Pace.speaking_chars_per_s`) and needs `lag` to synthesize the next piece. A
sentence of `E` characters whose first `D` are decoded, started now, never waits mid-sentence
when every character is decoded before the voice gets there: `(k - D) / r + lag <= k / v` for
all `k <= E`, i.e. `D >= E (1 - r / v) + r lag` when the LLM is the slower, `D >= v lag`
otherwise. `E` is unknown while it is written: `EXPECTED_SENTENCE_CHARS`, or the sentence so
far plus a little once it is longer. When the LLM outruns the voice (the profile picks a model
that does) nothing is held: the first chunk goes as soon as it is cut. When it does not,
the sentence's start waits, and the silence falls between sentences, where a listener
expects one, instead of in the middle of one (issue 23: 5.4 s of dead air mid-answer on a
2-core AVX2 VM).
"""

from __future__ import annotations

from collections.abc import Callable

from engines.text.chunker import chunk_size
from engines.voicing import SpokenChunks, ends_sentence
from rtc_server.profile import Pace

# A spoken answer's sentence: the personas ask for short ones (one to three sentences, ~12-20
# words); an answer's sentences in bench/answers.py average 60-90 characters.
EXPECTED_SENTENCE_CHARS = 80
# Once a sentence is longer than expected, at least this much of it is assumed still to come.
MIN_REST_CHARS = 12
# The next piece the voice synthesizes while it speaks: about one clause.
PIECE_CHARS = 40
MIN_LIVE_CHARS = 20  # decoded characters after the first before the live rate is trusted
# The share of a chunk's playing time the next chunk's synthesis may take (the rest absorbs
# the voice's per-call overhead and a busy moment).
SYNTHESIS_SHARE = 0.8


def chunk_growth(pace: Pace) -> float:
    """How many times the chunk before it a later chunk may be (`ChunkerConfig.growth`).

    The voice synthesizes the next chunk while one plays: a chunk of `c` characters plays
    `c / v` seconds, in which `SYNTHESIS_SHARE * c / (v * s)` characters can be synthesized
    at `s` seconds a character. Without it a fast LLM (a GPU's: the whole answer written
    during the first chunk's synthesis) gives a short first chunk and then a whole sentence
    that is not ready when the first chunk ends. Off (0) where the LLM writes slower than the
    voice synthesizes (text then never piles up ahead of the voice, and more, smaller chunks
    only cost: on the emulated slow machine 6/10 answers stalled with it against 3-4/10
    without), and without a calibration (`fixed`), so chunks do not depend on how fast a
    thread ran. An LLM the calibration does not time (the GPU's, a shared server) counts as
    fast, as in `Pacing.may_start`."""
    r = pace.decode_chars_per_s
    if not pace.hold_sentences or pace.tts_s_per_char <= 0 or (
            r is not None and r * pace.tts_s_per_char < 1.0):
        return 0.0
    return SYNTHESIS_SHARE / (pace.speaking_chars_per_s * pace.tts_s_per_char)


class Pacing:
    """One answer's decode rate and the sentence gate (module docstring). Owned by one
    `AgentBehaviour._answer`; `clock` is the session's media clock."""

    def __init__(self, pace: Pace, clock: Callable[[], float]) -> None:
        self._pace = pace
        self._clock = clock
        self._first_at: float | None = None  # when the first text came
        self._chars = 0  # characters decoded after the first delta

    def decoded(self, text: str) -> None:
        """The LLM wrote `text` (a delta), now."""
        now = self._clock()
        if self._first_at is None:
            self._first_at = now
            return
        self._chars += chunk_size(text)

    @property
    def rate(self) -> float | None:
        """Characters the LLM writes per second (None: not known yet). The live rate once
        enough is in, never above the calibrated one: the answer's first tokens decode on
        more threads than the rest (`burst_tokens`), before the voice takes a core."""
        calibrated = self._pace.decode_chars_per_s
        if self._first_at is None or self._chars < MIN_LIVE_CHARS:
            return calibrated
        elapsed = self._clock() - self._first_at
        live = self._chars / elapsed if elapsed > 0 else None
        if live is None:
            return calibrated
        return live if calibrated is None else min(live, calibrated)

    def _lag_s(self) -> float:
        return self._pace.tts_first_chunk_s + self._pace.tts_s_per_char * PIECE_CHARS

    def may_start(self, sentence_chars: int) -> bool:
        """Whether a sentence with `sentence_chars` decoded may start speaking now."""
        r = self.rate
        if r is None:
            return True  # nothing known: as soon as it is cut
        v = self._pace.speaking_chars_per_s
        lag = self._lag_s()
        whole = max(EXPECTED_SENTENCE_CHARS, sentence_chars + MIN_REST_CHARS)
        needed = max(v * lag, whole * (1.0 - r / v) + r * lag) if r < v else v * lag
        return sentence_chars >= needed


class SentenceGate:
    """Chunks of one answer, as the chunker cuts them, to the pieces the voice says now: a
    sentence's start is held until `Pacing.may_start`; once it has started, the rest of it
    goes as it comes, and when the voice is about to run dry mid-sentence what is decoded is
    cut at once (`runway`): a short pause there is shorter than waiting for the sentence."""

    def __init__(self, chunks: SpokenChunks, pacing: Pacing, hold: bool = True) -> None:
        self._chunks = chunks
        self._pacing = pacing
        self._hold = hold
        self._held: list[str] = []
        self._started = False  # the current sentence's first words went to the voice

    def decoded(self, delta: str) -> None:
        """The LLM wrote `delta` now (the live decode rate)."""
        self._pacing.decoded(delta)

    def push(self, cut: list[str]) -> list[str]:
        """The chunker's new chunks -> what to say now."""
        out: list[str] = []
        for chunk in cut:
            if self._started:
                out.append(chunk)
            else:
                self._held.append(chunk)
            if ends_sentence(chunk):
                if self._held:
                    out.append("".join(self._held))
                self._held, self._started = [], False
        if self._held and self._may_start():
            out += self._release()
        return out

    def runway(self) -> list[str]:
        """The voice runs dry soon: what may be said of the text so far."""
        if self._started:
            return self._chunks.cut()
        if self._may_start():
            return self._release()
        return []

    def flush(self, rest: list[str]) -> list[str]:
        """The answer's last chunks: everything held goes too."""
        held, self._held = self._held, []
        return ["".join(held + rest)] if held else rest

    def _decoded(self) -> int:
        return sum(chunk_size(c) for c in self._held) + self._chunks.pending_size

    def _may_start(self) -> bool:
        return not self._hold or self._pacing.may_start(self._decoded())

    def _release(self) -> list[str]:
        text = "".join(self._held + self._chunks.cut(min_chars=0))
        self._held, self._started = [], True
        return [text] if text else []

"""How long this speaker stays silent inside a turn, learnt over the session.

The end-of-turn evidence (`policy.py`) reads the words, and a misheard question defeats it:
"What is the Amazon River End?" or a garbled robotic voice looks unfinished to every text
signal, and the turn then waited for `[turn] max_silence_ms` (1.5 s), the one limit meant for
the longest hesitation any speaker makes. This speaker's own pauses tell how long *they*
hesitate: each silence inside an utterance after which they spoke on, and the silence after an
utterance that this rule ended when they spoke on within it (a cut-off: the rule learns from
its own mistake and the next turns wait longer).

`limit_ms()`: until `TURNS_NEEDED` utterances were heard, the ceiling (`max_silence_ms`, as
before). Then `SCALE` times the longest such silence of the last `MEMORY` utterances plus
`MARGIN_MS`, within [`floor_ms`, ceiling]: a speaker who never hesitated ends a turn whose
words look unfinished after `floor_ms` of silence, one who hesitated 0.9 s waits the ceiling.
The constants are about people's speech, not machines: hesitations inside a sentence vary by
about half again between a speaker's pauses, and ~250 ms covers the endpointer's own smearing
of a silence's edges (its 60 ms speech window, the pause's frame grid).

One instance per session (it holds that speaker's history); `None` floor in the caller = off.
"""

from __future__ import annotations

from collections import deque

from engines.turn.config import TurnConfig

TURNS_NEEDED = 1  # utterances heard before the limit moves off the ceiling
MEMORY = 8  # utterances whose longest silence counts (a speaker's habit drifts)
SCALE = 1.5
MARGIN_MS = 250


class SpeakerPauses:
    """One speaker's silences inside their turns, and the limit they ask for."""

    def __init__(self, floor_ms: int, ceiling_ms: int) -> None:
        if not 0 < floor_ms <= ceiling_ms:
            raise ValueError("the speaker's floor must be within (0, max_silence_ms]")
        self.floor_ms = floor_ms
        self.ceiling_ms = ceiling_ms
        self._longest: deque[float] = deque(maxlen=MEMORY)  # per utterance heard

    def heard(self, longest_silence_ms: float) -> None:
        """An utterance with words ended; the longest silence inside it after which the
        speaker spoke on (0 when they never paused)."""
        self._longest.append(longest_silence_ms)

    def cut_off(self, silence_ms: float) -> bool:
        """An utterance this limit ended was followed by speech after `silence_ms` of
        silence: within the ceiling, that was a pause inside the turn, and the record says so
        at once (on the latest utterance's record: the limit reads their maximum, so which one
        holds it does not matter). Returns whether it was."""
        if silence_ms >= self.ceiling_ms:
            return False  # a new turn, not a pause
        if self._longest:
            self._longest[-1] = max(self._longest[-1], silence_ms)
        else:
            self._longest.append(silence_ms)
        return True

    @property
    def utterances(self) -> int:
        """Utterances on record."""
        return len(self._longest)

    def limit_ms(self) -> float:
        """The silence after which this speaker's turn ends whatever the words."""
        if len(self._longest) < TURNS_NEEDED:
            return float(self.ceiling_ms)
        wanted = SCALE * max(self._longest) + MARGIN_MS
        return float(min(self.ceiling_ms, max(self.floor_ms, wanted)))


def speaker_pauses(turn: TurnConfig) -> SpeakerPauses | None:
    """A new speaker's record, as a session starts one (None: a turn model off, or learning
    off with `speaker_floor_ms = 0`)."""
    if not turn.enabled or not turn.speaker_floor_ms:
        return None
    return SpeakerPauses(turn.speaker_floor_ms, turn.max_silence_ms)


def bounded_wait(after_ms: float | None, speaker: SpeakerPauses | None
                 ) -> tuple[float | None, bool]:
    """The silence that ends a pause's turn: the evidence's verdict `after_ms` (None: never),
    or the speaker's limit where that comes first; and whether it is the speaker's limit."""
    limit = speaker.limit_ms() if speaker is not None else None
    if limit is not None and (after_ms is None or limit < after_ms):
        return limit, True
    return after_ms, False

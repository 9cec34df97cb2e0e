"""A turn's `timings` marks (the server's events channel), per stage, over many answers: what
the benchmarks that collect them per answer tabulate (bench/turn_marks.py).

The marks are milliseconds after the endpoint (`speech_end`): the stages of the answer
(`STAGES`) are positive; `voice_end` and the hearing marks (`HEARING_MARKS`: when the last
pause's evidence came in) are negative. The end of turn is `-voice_end`; each hearing mark is
taken after the end of the voice. A stage whose time grows with load is the bottleneck.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rtc_server.events import HEARING_MARKS
from rtc_server.turn import STAGES as TURN_STAGES

# The answer's stages, after the endpoint (the server's own order, without its two anchors).
STAGES = tuple(s for s in TURN_STAGES if s not in ("voice_end", "speech_end"))
END_OF_TURN = "end of turn (endpoint after the end of the voice), ms"
Marks = Mapping[str, float]


def end_of_turn_ms(marks: Sequence[Marks]) -> list[float]:
    """The end of turn (the endpoint after the end of the voice) of each turn that has it."""
    return [-float(m["voice_end"]) for m in marks if "voice_end" in m]


def stage_values(marks: Sequence[Marks]) -> list[tuple[str, list[float]]]:
    """(metric, values) in table order: the end of turn, each hearing mark that was sent
    (after the end of the voice), then `voice_end` and every stage (empty where none had it)."""
    out = [(END_OF_TURN, end_of_turn_ms(marks))]
    for stage in HEARING_MARKS:  # what the end of turn waited for, after the voice's end
        values = [float(m[stage]) - float(m["voice_end"]) for m in marks
                  if stage in m and "voice_end" in m]
        if values:
            out.append((f"  {stage} (ms after the end of the voice)", values))
    for stage in ("voice_end", *STAGES):
        out.append((f"{stage} (ms after endpoint)",
                    [float(m[stage]) for m in marks if stage in m]))
    return out

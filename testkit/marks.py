"""A turn's `timings` marks (the server's events channel), per stage, over many answers: what
the benchmarks that collect them per answer tabulate (bench/turn_marks.py).

The marks are milliseconds after the endpoint (`speech_end`): the stages of the answer
(`STAGES`) are positive; `voice_end` and the hearing marks (`HEARING_MARKS`: when the last
pause's evidence came in) are negative. The end of turn is `-voice_end`; each hearing mark is
taken after the end of the voice. A stage whose time grows with load is the bottleneck.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from rtc_server.events import HEARING_MARKS
from rtc_server.turn import STAGES as TURN_STAGES

# The answer's stages, after the endpoint (the server's own order, without its two anchors).
STAGES = tuple(s for s in TURN_STAGES if s not in ("voice_end", "speech_end"))
END_OF_TURN = "end of turn (endpoint after the end of the voice), ms"
Marks = Mapping[str, float]
SLOW_END_MS = 300  # an end of turn past this is listed with its evidence (the benchmarks)


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


# One turn's steps, each from the mark before it (ms; `stage_steps`): what the slowest
# answers spend more on than the rest.
STEPS = (
    ("end of turn (after the voice)", "voice_end", None),
    ("pause decode begins (after the voice)", "voice_end", "decode_start"),
    ("pause decode (to its transcript)", "decode_start", "pause_text"),
    ("LLM first token (after the endpoint)", "speech_end", "llm_first_token"),
    ("first chunk (after the first token)", "llm_first_token", "first_chunk"),
    ("speech queue (chunk -> TTS starts)", "first_chunk", "tts_start"),
    ("TTS first audio (after it starts)", "tts_start", "tts_first_audio"),
    ("face first frame (after the audio)", "tts_first_audio", "face_first_frame"),
    ("first audio sent (after the face)", "face_first_frame", "first_audio_sent"),
)


def stage_steps(marks: Marks) -> dict[str, float]:
    """Each of `STEPS` the turn has both marks of: the later mark minus the earlier (the end
    of turn: `-voice_end`; `speech_end`, the endpoint, is 0)."""
    at = {"speech_end": 0.0, **{k: float(v) for k, v in marks.items()}}
    steps: dict[str, float] = {}
    for name, before, after in STEPS:
        if after is None:
            if before in marks:
                steps[name] = -float(marks[before])
        elif before in at and after in at:
            steps[name] = at[after] - at[before]
    return steps


def slowest_steps(answers: Sequence[tuple[float, Marks]], share: float = 0.1
                  ) -> tuple[float, int, list[tuple[str, float, float]]]:
    """The answers (voice-to-voice ms, marks) split at the `1 - share` quantile of their
    voice-to-voice: (that threshold, how many at or over it, [(step, median over those,
    median over the rest)] for the steps both groups have)."""
    if not answers:
        return float("nan"), 0, []
    ordered = sorted(v for v, _ in answers)
    threshold = ordered[min(len(ordered) - 1, int((1.0 - share) * len(ordered)))]
    slow = [stage_steps(m) for v, m in answers if v >= threshold]
    rest = [stage_steps(m) for v, m in answers if v < threshold]
    rows = []
    for name, _, _ in STEPS:
        a = [s[name] for s in slow if name in s]
        b = [s[name] for s in rest if name in s]
        if a and b:
            rows.append((name, statistics.median(a), statistics.median(b)))
    return threshold, len(slow), rows


def end_bound(marks: Marks) -> str:
    """Which hearing mark came last before the endpoint (what the end of turn waited for):
    `limit` where the verdict asked for none (the long limit ended it)."""
    if "early_end" in marks:
        return "early_end"
    waited = {s: marks[s]
              for s in ("turn_model", "pause_text", "turn_again", "text_end", "turn_asked")
              if s in marks}
    if "turn_asked" not in waited:
        return "limit"
    return max(waited, key=lambda s: waited[s])


def hearing_note(marks: Marks, evidence: Mapping[str, float]) -> str:
    """One turn's end of turn, what it waited for last and the evidence its verdict was
    computed on (the `timings` event's `evidence`): which signal held a slow turn."""
    if "voice_end" not in marks:
        return "no end of turn"
    found = " ".join(f"{k} {v:g}" for k, v in evidence.items())
    return (f"end of turn {-float(marks['voice_end']):.0f} ms ({end_bound(marks)}"
            f"{'; ' + found if found else ''})")


def slow_ends(answers: Sequence[Mapping[str, Any]],
              over_ms: float = SLOW_END_MS) -> list[Mapping[str, Any]]:
    """The answers (records with `marks_ms`) whose end of turn was over `over_ms`, the
    slowest first."""
    ends = [(-float(a["marks_ms"]["voice_end"]), i) for i, a in enumerate(answers)
            if "voice_end" in a["marks_ms"]]
    return [answers[i] for end, i in sorted(ends, reverse=True) if end > over_ms]

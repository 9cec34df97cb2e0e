"""The end-of-turn decision at a pause: how much silence the evidence asks for.

`complete_after_ms(probability, pause, config)` is the silence (ms after the end of the voice)
from which this pause counts as the end of the turn, or None when the evidence never says so
(the endpointer's `max_silence_ms` then ends it). The evidence: Smart Turn's probability, the
pause's transcript (`PauseText` from the ASR stream) and the ASR's probability for its final
mark. A transcript that does not read like a finished sentence (`reads_finished`: it ends with
. ? or ! on a word that can end one) never ends the turn early (with `config.text_check`).

Graded, not a cliff: at the pause (`pause_ms` of silence) a confident turn ends at once (Smart
Turn above `threshold`, the final mark's probability at least `sentence_end_threshold`).
Short of them, the silence makes up for the confidence: a final mark `sentence_end_span` below
the threshold (or Smart Turn at 0) asks for `patience_ms` more silence, less short of it
proportionally less, so a finished-looking sentence ends by `pause_ms + patience_ms` whatever
the numbers. The ASR's probability is that of any final mark at that step ("?" 0.60 and "."
0.25 is 0.85: the same evidence that a sentence ends; engines/asr/whisper.py): with it and a
span of 0.15 instead of 0.25 (the single mark's), offline 9/80 false cut-offs against 8/80 and
Whisper-unsure complete questions ending sooner (espeak in noise p50 790 -> 465 ms, piper p95
792 -> 687; bench/RESULTS.md, section turn).

Why graded: with a fixed 0.85 on the final mark a confidence that one machine, voice or noise
puts at 0.84 instead of 0.86 cost 1.3 s (the turn waited for `max_silence_ms`): 15 of
24 turns on a 2-core AVX2 VM, 39 of 80 offline here. Graded, 0.84 costs 40 ms. Why not
softer: Whisper also writes confident-looking full stops after cut-off prefixes ("I need
it.", 0.28-0.91, median 0.6, against a median of 0.9 after complete questions); a slope over
the whole range (0.85 to 0) cut 22 of 80 mid-sentence pauses of 0.5-0.9 s, a span of 0.25
6/80 (on the written mark's probability), with 3/80 complete questions left at the limit
instead of 39 (bench/RESULTS.md, section turn).

Why the text check (bench/RESULTS.md, section turn; 20 questions with a 0.5-0.9 s pause in
mid-sentence, two voices, clean and at 15 dB SNR): on this project's generated speech Smart
Turn v3.2 alone called 80% of those pauses complete at 200 ms ("I'd like to ... transfer some
money"). Whisper's punctuation cut that to 36%: for most cut-off prefixes it writes no final
mark, or one after a word that cannot end a sentence. The rest were sentences Whisper
completed itself ("I need it.", "Tell me about it."), and there its own probability for the
final mark tells: median 0.90-0.95 after complete questions, 0.27-0.88 after such guesses.
"""

from __future__ import annotations

import re

import numpy as np

from engines.asr.base import PauseText
from engines.asr.text import SENTENCE_END
from engines.turn.config import TurnConfig

_TRAILING_OFF = ("...", "…", "..")
# English words that do not end a finished sentence (articles, possessives, conjunctions, the
# infinitive "to"). Prepositions often end questions ("What is it for?") and are not here.
_UNFINISHED_EN = frozenset((
    "a", "an", "the", "my", "your", "his", "her", "our", "their", "its",
    "to", "and", "or", "but", "because", "if", "than", "whether",
))
# Chinese: structural particle, conjunctions and coverbs that need something after them.
_UNFINISHED_ZH = ("的", "和", "跟", "与", "或", "把", "给", "被", "因为", "所以", "但是", "如果")
_WORD = re.compile(r"[A-Za-z']+")

# The text-end probe's reading at or below which the words are taken as unfinished. On its
# training's held-out fifths (three draws): 0.2-0.7% of whole utterances and 74-80% of cut
# ones read <= 0.05; at 0.1, 0.7-1.3% and 77-82% (bench/RESULTS.md, section turn).
TEXT_UNFINISHED = 0.05


def reads_finished(text: str) -> bool:
    """True when `text` ends like a finished sentence ('' does not: the words may have been
    dropped, and for noise the long limit costs nothing, since an empty final is no turn)."""
    text = text.strip()
    if not text.endswith(SENTENCE_END):
        return False
    return words_may_end(text)


def words_may_end(text: str) -> bool:
    """`reads_finished` without the final mark: not trailing off, and the last word can end
    a sentence (the text-end probe may stand in for a mark Whisper did not write)."""
    text = text.strip()
    if not text or text.endswith(_TRAILING_OFF):
        return False
    body = text.rstrip("".join(SENTENCE_END)).strip()
    if body.endswith(_UNFINISHED_ZH):
        return False
    words = _WORD.findall(body)
    return not (words and body[-1].isascii() and words[-1].lower() in _UNFINISHED_EN)


def _shortfall(value: float | None, needed: float, span: float) -> float:
    """How far `value` falls short of `needed`, as a fraction of `span` (0 = enough, 1 = the
    whole span or more)."""
    if value is None or span <= 0.0:
        return 0.0
    return min(1.0, max(0.0, (needed - value) / span))


def complete_after_ms(
    probability: float, pause: PauseText | None, config: TurnConfig, pause_ms: int,
    text_end: float | None = None,
) -> float | None:
    """The silence (ms) from which this pause ends the turn; None: not on this evidence.

    `pause_ms` is the silence at which the pause was reported (`[vad] pause_ms`); `pause` may
    be None only without `config.text_check`.

    `text_end`: the text-end probe's probability that the words are a whole message
    (engines/turn/text_end.py), with `config.text_end_threshold` on. At least the threshold,
    it stands in for Whisper's final mark (short of its threshold, or not written at all);
    where the mark was sure as well, the two readings of the words outweigh an unsure Smart
    Turn. At most `TEXT_UNFINISHED` (sure the words are unfinished), the turn waits the whole
    patience, whatever the mark. Offline (bench/RESULTS.md, section turn): Smart Turn called
    2 of 20 complete questions in a new voice unfinished at 0.01-0.02 (its error, the words
    were whole), and Whisper wrote confident marks after cut-offs the probe read at 0.001-0.02
    ("Could you tell me?", "Could you explain how?")."""
    sure = unsure = False
    if config.text_end_threshold and text_end is not None:
        sure = text_end >= config.text_end_threshold
        unsure = text_end <= TEXT_UNFINISHED
    if config.text_check:
        if pause is None:
            return None
        marked = reads_finished(pause.text)
        if not (marked or (sure and words_may_end(pause.text))):
            return None
        end = pause.end_probability if marked else 0.0
    else:
        end = None
    # Smart Turn's probability must be above the threshold, so its shortfall is never 0
    # at or below it: the strict rule's boundary stays where it was at the pause.
    turn = _shortfall(probability, config.threshold, config.threshold)
    if probability <= config.threshold:
        turn = max(turn, 1e-6)
    end_shortfall = _shortfall(end, config.sentence_end_threshold, config.sentence_end_span)
    if sure:
        if end_shortfall == 0.0:
            turn = 0.0  # the mark and the probe both sure of the words: they outweigh the voice
        end_shortfall = 0.0
    elif unsure:
        end_shortfall = 1.0
    shortfall = max(turn, end_shortfall)
    if shortfall == 0.0:
        return float(pause_ms)
    if config.patience_ms == 0:
        return None
    return pause_ms + shortfall * config.patience_ms


def is_complete(
    probability: float, pause: PauseText | None, config: TurnConfig, pause_ms: int,
    silence_ms: float | None = None,
) -> bool:
    """The verdict after `silence_ms` of silence (default: at the pause itself)."""
    after = complete_after_ms(probability, pause, config, pause_ms)
    return after is not None and (pause_ms if silence_ms is None else silence_ms) >= after


def sure_early(probability: float | None, early: PauseText | None, config: TurnConfig) -> bool:
    """The turn may end at the early pause decode, before the pause (`early_end_confidence`):
    Smart Turn and the ASR's final mark both at least that sure, on the window the pause would
    carry, and the text reads finished. Offline (bench/RESULTS.md, section turn) 0.9 ended
    piper's complete questions 90 ms after the voice instead of 210, but in 15 dB noise split
    6 of 20 (piper) and 3 of 20 (espeak) at a short gap inside them (0 and 1 without), false
    cut-offs 10/80 against 9/80: the risk is a gap of 80-200 ms inside a sentence that looks
    finished."""
    sure = config.early_end_confidence
    if not sure or probability is None or early is None or early.end_probability is None:
        return False
    return (probability >= sure and early.end_probability >= sure
            and reads_finished(early.text))


def text_end_matters(pause: PauseText | None, config: TurnConfig, pause_ms: int,
                     after_ms: float | None) -> bool:
    """Whether to ask the text-end probe about this pause: on, words to read, and a verdict
    (`after_ms`, without the probe) that waits past the pause, so that the probe's answer can
    still move it, either way; a turn that ends at the pause never waits for it."""
    if not config.text_end_threshold or pause is None or not words_may_end(pause.text):
        return False
    return after_ms is None or after_ms > pause_ms


def recheck_at_ms(
    probability: float, after_ms: float | None, config: TurnConfig, pause_ms: int
) -> float | None:
    """The silence (ms) the turn model is asked again with (`recheck_window`), or None.

    Only where its probability was the unsure part of a verdict that waits longer than the
    recheck (`config.recheck_ms` after the pause): the text and the ASR's sentence-end
    probability do not change with more silence, Smart Turn's can (on piper's voice, offline:
    0.37 -> 0.70 and 0.35 -> 0.87 from 200 to 300 ms of silence after two complete
    questions, bench/RESULTS.md section turn)."""
    if not config.recheck_ms or after_ms is None or probability > config.threshold:
        return None
    at = float(pause_ms + config.recheck_ms)
    return at if after_ms > at else None


def recheck_window(window: np.ndarray, silence_ms: float, at_ms: float,
                   sample_rate: int = 16000) -> np.ndarray:
    """The recheck's audio, asked as soon as its verdict is known to be unsure instead of
    when the silence reaches `at_ms`: the turn model's `window` (its last `silence_ms` are
    the silence so far) and the silence still missing up to `at_ms`, a copy of the latest
    silence (at most its second half, clear of the word's tail; repeated where shorter): the
    room as it sounds now, its noise included. So the second probability is in when that
    silence is (on the H200 the recheck asked at 300 ms came back ~90 ms later, at the p95
    of one session's end of turn). Nothing missing: the window itself."""
    missing = int((at_ms - silence_ms) * sample_rate / 1000)
    if missing <= 0:
        return window
    heard = int(silence_ms * sample_rate / 1000) // 2
    source = window[-min(missing, heard):] if heard > 0 else window[:0]
    if source.size == 0:
        return np.concatenate([window, np.zeros(missing, window.dtype)])
    return np.concatenate([window, np.resize(source, missing)])


def rechecked_after_ms(
    probability: float, pause: PauseText | None, config: TurnConfig, pause_ms: int,
    at_ms: float, text_end: float | None = None,
) -> float | None:
    """The recheck's verdict (`complete_after_ms` on its probability), never before the
    silence it was asked with: the window held `at_ms` of silence, some of it made up."""
    after = complete_after_ms(probability, pause, config, pause_ms, text_end)
    return None if after is None else max(after, at_ms)

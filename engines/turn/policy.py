"""The end-of-turn decision at a pause: the turn model's probability, checked by the words.

`is_complete(probability, pause, config)`: complete when Smart Turn's probability is above
`config.threshold` and, with `config.text_check`, the pause's transcript (`PauseText` from the
ASR stream) reads like a finished sentence: it ends with . ? or ! on a word that can end one
(`reads_finished`), and the ASR gave that final mark at least `config.sentence_end_threshold`
of probability (when the engine reports one; FunASR does not). The caller needs the pause
text only when the probability passes (`needs_text`).

Why the text check (bench/RESULTS.md, section turn; 20 questions with a 0.5-0.9 s pause in
mid-sentence, two voices, clean and at 15 dB SNR): on this project's generated speech Smart
Turn v3.2 alone called 80% of those pauses complete at 200 ms ("I'd like to ... transfer some
money"). Whisper's punctuation cut that to 36%: for most cut-off prefixes it writes no final
mark, or one after a word that cannot end a sentence. The rest were sentences Whisper
completed itself ("I need it.", "Tell me about it."), and there its own probability for the
final mark tells: median 0.90-0.95 after complete questions (0.79 for espeak-ng in noise),
0.27-0.88 after such guesses, most below 0.7. With the 0.85 threshold 4% of the pauses were
cut off. The pause decode runs anyway (it is the start-early text and, if nothing follows,
the final), so waiting for it delays the endpoint, not the answer.
"""

from __future__ import annotations

import re

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


def reads_finished(text: str) -> bool:
    """True when `text` ends like a finished sentence ('' does not: the words may have been
    dropped, and for noise the long limit costs nothing, since an empty final is no turn)."""
    text = text.strip()
    if not text:
        return False
    if text.endswith(_TRAILING_OFF) or not text.endswith(SENTENCE_END):
        return False
    body = text.rstrip("".join(SENTENCE_END)).strip()
    if body.endswith(_UNFINISHED_ZH):
        return False
    words = _WORD.findall(body)
    return not (words and body[-1].isascii() and words[-1].lower() in _UNFINISHED_EN)


def needs_text(probability: float, config: TurnConfig) -> bool:
    """Whether `is_complete` needs the pause's transcript for this probability."""
    return config.text_check and probability > config.threshold


def is_complete(probability: float, pause: PauseText | None, config: TurnConfig) -> bool:
    """The verdict for one pause (`pause` may be None when `needs_text` is False)."""
    if probability <= config.threshold:
        return False
    if not config.text_check:
        return True
    if pause is None or not reads_finished(pause.text):
        return False
    return pause.end_probability is None or pause.end_probability >= config.sentence_end_threshold

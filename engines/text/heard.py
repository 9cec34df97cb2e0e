"""What of a spoken chunk was heard: `heard_prefix(text, fraction)`.

When an answer is cut mid-chunk, the history keeps the words the user heard. Playback gives
only the share of the chunk's audio that played, so the text is cut at the same share of its
words, rounded down to whole words: a Chinese character counts as a word (Chinese has no
spaces), Latin and digits run to the next space or character. The result is an exact slice of
`text` (its own spacing kept), so the history and the page read as the answer was written.
"""

from __future__ import annotations

import re

from engines.text.zh_numbers import CJK_IDEOGRAPH

_UNIT = re.compile(rf"[{CJK_IDEOGRAPH}]|[^\s{CJK_IDEOGRAPH}]+")


def word_count(text: str) -> int:
    """Words of `text`, a Chinese character counting as one."""
    return len(_UNIT.findall(text))


def heard_prefix(text: str, fraction: float) -> str:
    """The start of `text` holding `fraction` (0..1) of its words, whole words only."""
    units = list(_UNIT.finditer(text))
    k = int(len(units) * max(0.0, min(1.0, fraction)))
    return text[: units[k - 1].end()] if k else ""

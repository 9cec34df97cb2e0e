"""Simplified Chinese characters: `to_simplified(text)` (OpenCC's Traditional -> Simplified).

Whisper writes Mandarin in Traditional characters about as often as in Simplified ones; the
conversation, its history and the page are in Simplified, so the ASR's Chinese text and the
benchmarks' transcripts pass through here. OpenCC (Apache-2.0) loads lazily, once; without it
(the `asr` extra not installed) text is returned unchanged and a warning is logged once.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

from engines.text.zh_numbers import has_cjk

logger = logging.getLogger(__name__)


@functools.lru_cache(maxsize=1)
def _converter() -> Callable[[str], str] | None:
    try:
        import opencc
    except ImportError:
        logger.warning("opencc is not installed: Chinese text is not converted to Simplified")
        return None
    converter = opencc.OpenCC("t2s")
    return lambda text: str(converter.convert(text))


def to_simplified(text: str) -> str:
    """`text` with Traditional characters in their Simplified forms (others unchanged)."""
    if not has_cjk(text):
        return text
    convert = _converter()
    return convert(text) if convert is not None else text

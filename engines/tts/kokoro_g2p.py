"""Text -> Kokoro-82M v1.0 phonemes, for Mandarin and English voices.

`KokoroG2P(language)` with language "zh", "en-us" or "en-gb"; `g2p(text) -> str` gives the
phoneme string the model reads (only symbols of its vocabulary, punctuation as ASCII marks).

- Mandarin: `misaki.zh.ZHG2P` in its v1.0 ("legacy") mode: jieba words, pypinyin, IPA with
  tone arrows (the phoneme style Kokoro v1.0's Mandarin voices were trained on; misaki's 1.1
  frontend writes the bopomofo-like symbols of Kokoro v1.1-zh, another model). Pure Python,
  Apache-2.0/MIT, no GPL.
- Latin words inside Chinese ("用ATM取钱", "iPhone") are not dropped: they are read as English
  through espeak-ng when the GPL extra is installed, else letter by letter with English letter
  names (built in below), which is right for the usual acronyms (ATM, VIP, App).
- English: espeak-ng's IPA (our ctypes binding, `engines.tts.espeak.ipa`) mapped onto Kokoro's
  English symbols (diphthongs as one symbol: "aɪ" -> "I", "eɪ" -> "A", "oʊ" -> "O", ...), as
  Kokoro's own G2P (misaki) does for words outside its dictionary. espeak-ng is GPL-3.0: the
  `tts-gpl` extra, as piper.
- Whatever has no sound (emoji, symbols, stray marks) is removed; text with nothing left
  gives "" and the engine says nothing for it (logged).
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from collections.abc import Callable

from engines.text.zh_numbers import CJK_IDEOGRAPH, normalize_zh
from engines.tts.errors import InvalidInputError, ModelLoadError

LANGUAGES = ("zh", "en-us", "en-gb")
# Punctuation the model knows (ASCII and curly quotes); the rest is mapped onto it first.
_MARKS = ';:,.!?—…"()“”'
_PUNCT_MAP = str.maketrans({
    "，": ",", "、": ",", "。": ".", "．": ".", "！": "!", "？": "?", "：": ":", "；": ";",
    "（": "(", "）": ")", "《": "“", "》": "”", "「": "“", "」": "”", "『": "“", "』": "”",
    "【": "“", "】": "”", "～": ",", "–": "—", "-": " ", "/": " ", "\n": ". ", "·": " ",
})
# A run of Chinese (ideographs and the punctuation between them) or of Latin words.
_CJK_RUN = re.compile(rf"[{CJK_IDEOGRAPH}{re.escape(_MARKS)}\s]*[{CJK_IDEOGRAPH}][{CJK_IDEOGRAPH}"
                      rf"{re.escape(_MARKS)}\s]*")
_LATIN_RUN = re.compile(r"[A-Za-z][A-Za-z0-9'&+ .]*[A-Za-z0-9]|[A-Za-z]")
_CLAUSE = re.compile(rf"([{re.escape(_MARKS)}]+)")
# English letter names in Kokoro's symbols (US), for Latin text without espeak-ng.
_LETTERS = {
    "a": "ˈA", "b": "bˈi", "c": "sˈi", "d": "dˈi", "e": "ˈi", "f": "ˈɛf", "g": "ʤˈi",
    "h": "ˈAʧ", "i": "ˈI", "j": "ʤˈA", "k": "kˈA", "l": "ˈɛl", "m": "ˈɛm", "n": "ˈɛn",
    "o": "ˈO", "p": "pˈi", "q": "kjˈu", "r": "ˈɑɹ", "s": "ˈɛs", "t": "tˈi", "u": "jˈu",
    "v": "vˈi", "w": "dˈʌbəlju", "x": "ˈɛks", "y": "wˈI", "z": "zˈi",
}
# espeak-ng IPA (with "^" tying the letters of one phoneme) -> Kokoro's English symbols,
# longest first. What they are is a fact of the model's training phonemes (misaki's table).
_ESPEAK_TO_KOKORO = sorted({
    "ʔˌn\u0329": "ʔn", "ʔn\u0329": "ʔn", "a^ɪ": "I", "a^ʊ": "W", "d^ʒ": "ʤ", "e^ɪ": "A",
    "e": "A", "t^ʃ": "ʧ", "ɔ^ɪ": "Y", "ə^l": "ᵊl", "ʲo": "jo", "ʲə": "jə", "ʲ": "",
    "ɚ": "əɹ", "r": "ɹ", "x": "k", "ç": "k", "ɐ": "ə", "ɬ": "l", "\u0303": "",
}.items(), key=lambda kv: -len(kv[0]))


def _espeak_to_kokoro(ipa: str, british: bool) -> str:
    for old, new in _ESPEAK_TO_KOKORO:
        ipa = ipa.replace(old, new)
    ipa = re.sub(r"(\S)\u0329", r"ᵊ\1", ipa).replace("\u0329", "")
    if british:
        ipa = ipa.replace("e^ə", "ɛː").replace("iə", "ɪə").replace("ə^ʊ", "Q")
    else:
        ipa = ipa.replace("o^ʊ", "O").replace("ɜːɹ", "ɜɹ").replace("ɜː", "ɜɹ")
        ipa = ipa.replace("ɪə", "iə").replace("ː", "")
    ipa = ipa.replace("o", "ɔ").replace("ɾ", "T").replace("ʔ", "t")
    return ipa.replace("^", "")


class KokoroG2P:
    """Text -> phonemes for one language (see the module docstring). Thread-safe."""

    def __init__(self, language: str, vocab: dict[str, int], *, english: bool | None = None):
        """`english`: read Latin words through espeak-ng (None: when it is installed)."""
        if language not in LANGUAGES:
            raise InvalidInputError(f"Kokoro G2P language {language!r} not in {LANGUAGES}")
        self.language = language
        self._vocab = vocab
        self._lock = threading.Lock()  # jieba/pypinyin's lazy set-up is not thread-safe
        self._english: Callable[[str], str] | None = None
        british = language == "en-gb"
        if english is None:
            english = language != "zh" or _espeak_available()
        if english:
            from engines.tts.espeak import ipa

            voice = "en" if british else "en-us"
            self._english = lambda text: _espeak_to_kokoro(ipa(text, voice), british)
        elif language != "zh":
            raise ModelLoadError("English Kokoro voices need espeak-ng (extra `tts-gpl`)")
        self._zh: Callable[[str], str] | None = None
        if language == "zh":
            try:
                import jieba
                from misaki.zh import ZHG2P
            except ImportError as exc:  # pragma: no cover - depends on installed extras
                raise ModelLoadError("Mandarin needs misaki[zh]==0.9.4 (extra `tts`)") from exc
            jieba.setLogLevel(logging.WARNING)  # its own handler prints 4 lines at load
            zh = ZHG2P()  # v1.0 phonemes (no `version`): IPA with tone arrows
            self._zh = lambda text: str(zh(text)[0])
            with self._lock:
                self._zh("你好")  # jieba's dictionary loads now (~0.7 s), not in a turn

    def __call__(self, text: str) -> str:
        if self._zh is not None:
            text = normalize_zh(text)  # digits, money and times left by the caller
        text = "".join(ch for ch in text.translate(_PUNCT_MAP) if _sounds(ch))
        if self._zh is not None:
            pieces: list[str] = []
            pos = 0
            for run in _CJK_RUN.finditer(text):
                pieces.append(self._latin(text[pos:run.start()]))
                with self._lock:
                    pieces.append(self._zh(run.group()))
                pos = run.end()
            pieces.append(self._latin(text[pos:]))
            phonemes = " ".join(p for p in pieces if p.strip())
        else:
            phonemes = self._clauses(text)
        return self._known(phonemes)

    def _latin(self, text: str) -> str:
        """Latin words (inside Chinese) with the punctuation around them."""
        out: list[str] = []
        pos = 0
        for run in _LATIN_RUN.finditer(text):
            out.append(_marks(text[pos:run.start()]))
            word = run.group()
            if self._english is not None:
                out.append(self._clauses(word))
            else:
                out.append(" ".join(_LETTERS.get(ch.lower(), "") for ch in word if ch.isalpha()))
            pos = run.end()
        out.append(_marks(text[pos:]))
        return " ".join(p for p in out if p)

    def _clauses(self, text: str) -> str:
        """English text through espeak-ng clause by clause, its punctuation kept."""
        assert self._english is not None
        out: list[str] = []
        for i, part in enumerate(_CLAUSE.split(text)):
            if i % 2:
                out.append(part + " ")
            elif part.strip():
                out.append(self._english(part.strip()))
        return "".join(out).strip()

    def _known(self, phonemes: str) -> str:
        kept = "".join(ch for ch in phonemes if ch in self._vocab)
        if not any(ch.isalpha() for ch in kept):
            return ""  # marks only: nothing to say
        kept = re.sub(r" *([,.!?;:]) *", r"\1 ", kept)  # one space after a mark, none before
        return re.sub(r"\s+", " ", kept).strip(" ")


def _sounds(ch: str) -> bool:
    """Not an emoji, symbol or control character (those have no sound)."""
    return ch.isspace() or unicodedata.category(ch)[0] not in "SC"


def _marks(text: str) -> str:
    return "".join(ch for ch in text if ch in _MARKS)


def _espeak_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("espeakng_loader") is not None

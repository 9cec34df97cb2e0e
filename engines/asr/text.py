"""Transcript text helpers: Whisper restart trimming, piece joining, word and character error
rates (WER for English, CER for Chinese: characters, punctuation and spaces left out)."""

from __future__ import annotations

import re
from collections.abc import Callable

_WORD = re.compile(r"[^a-z0-9']+")
_HYPHENATED = re.compile(r"\w+(?:-\w+)+")
_SENTENCE_END = (".", "?", "!")
SENTENCE_END = (".", "?", "!", "。", "？", "！")  # marks that end a sentence (en, zh)


def _norm_word(word: str) -> str:
    return _WORD.sub("", word.lower())


def trim_restart(text: str) -> str:
    """Cut Whisper's "restart" loop: the transcript repeating itself from its first word.

    With a shortened audio context (docs/hearing.md) Whisper tiny sometimes finishes the utterance
    and then starts it over until the length limit ("Turn on the lights, please. Turn on the
    lights,"). Measured on 64 generated utterances: ~15% of decodes, nearly always right after
    a sentence end and always a verbatim restart. Whisper base does it to one-word answers
    ("No. No.", "Okay. Okay.": 12 of 32 such clips). So cut where the rest is nothing but the
    words before it, repeated: after a sentence end, or (without one) when both the first run
    and the rest have at least 3 words.
    """
    words = text.split()
    norm = [_norm_word(w) for w in words]
    for k in range(1, len(words)):
        sentence_end = words[k - 1].endswith(_SENTENCE_END)
        if not sentence_end and (k < 3 or len(words) - k < 3):
            continue
        if all(norm[i] == norm[i % k] for i in range(k, len(words))):
            return " ".join(words[:k])
    return text


def join_pieces(left: str, right: str) -> str:
    """Join transcript pieces: a space between words, none between CJK characters."""
    left, right = left.strip(), right.strip()
    if not left or not right:
        return left or right
    if left[-1].isascii() or right[0].isascii():
        return f"{left} {right}"
    return left + right


def normalize_words(text: str) -> list[str]:
    """Lower-case words without punctuation (hyphens split words), for scoring."""
    return [w for w in (_norm_word(t) for t in text.replace("-", " ").split()) if w]


def edit_distance(ref: list[str], hyp: list[str]) -> int:
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        diag, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            diag, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diag + (r != h))
    return row[-1]


def corpus_error_rate(
    refs: list[str], hyps: list[str], units: Callable[[str], list[str]]
) -> float:
    """Total edits over total reference units, each text cut into `units` (words, characters,
    syllables)."""
    edits = total = 0
    for ref, hyp in zip(refs, hyps, strict=True):
        r = units(ref)
        edits += edit_distance(r, units(hyp))
        total += len(r)
    return edits / max(total, 1)


def _compounds_as(text: str, other: str) -> str:
    """`text` with each hyphenated compound written closed ("e-mail" -> "email") where `other`
    writes it so, else open ("e mail"): one spelling of a word is not an error (as a scoring
    tool's alternate-spelling table has it)."""
    closed = set(normalize_words(other.replace("-", "")))

    def form(match: re.Match[str]) -> str:
        word = match.group(0)
        joined = word.replace("-", "")
        return joined if _norm_word(joined) in closed else word.replace("-", " ")

    return _HYPHENATED.sub(form, text)


def word_error_rate(refs: list[str], hyps: list[str]) -> float:
    """Corpus WER: total word edits over total reference words (a hyphenated compound matches
    its closed spelling, "e-mail" = "email")."""
    pairs = [(_compounds_as(r, h), _compounds_as(h, r)) for r, h in zip(refs, hyps, strict=True)]
    return corpus_error_rate([r for r, _ in pairs], [h for _, h in pairs], normalize_words)


def normalize_chars(text: str) -> list[str]:
    """The letters and digits of `text` (lower-cased), one per item: Chinese is scored by
    character, as it is written without spaces."""
    return [ch for ch in text.lower() if ch.isalnum()]


def char_error_rate(refs: list[str], hyps: list[str]) -> float:
    """Corpus CER: total character edits over total reference characters."""
    return corpus_error_rate(refs, hyps, normalize_chars)

"""The deployment's own words: its names and topics, read from its facts file.

Two uses. Whisper conditions its decoding on a "previous text" prompt, so names and terms in it
are written as spelled there ("Easy Saver", "Harbor Street") rather than as the nearest common
words (`prompt_from`). And when the ASR is unsure of a question, the agent asks back about the
topic the words sound most like (`guess_topic`: "Did you ask about opening an account?" for
"How bold do I need to be two open a count?").

The words: the facts file's headings and the capitalised phrases of its text (products,
places, names), in order, each once.
"""

from __future__ import annotations

import re

MAX_WORDS = 40
# A capitalised phrase: words starting with a capital (a lower-case "of"/"for"/"and" inside:
# "Bank of England", "Physics for Everyone"); a sentence's first word alone is no name.
_PHRASE = re.compile(r"\b[A-Z][\w'’-]*(?:\s+(?:(?:of|for|and|the|de)\s+)?[A-Z][\w'’-]*)*")
_SENTENCE_START = re.compile(r"(?:^|[.!?:]\s+)$")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_COMMON = frozenset({
    "A", "An", "The", "If", "It", "In", "On", "At", "To", "For", "From", "And", "Or", "But",
    "They", "We", "You", "I", "Our", "Your", "This", "That", "These", "Those", "There", "Is",
    "Are", "Be", "Can", "Do", "When", "What", "Why", "How", "Who", "Where", "With", "By", "As",
    "No", "Yes", "All", "Any", "Each", "Every", "Some", "One", "Please", "Note",
})
# A topic is guessed when its letters stand in the heard words' letters this alike (rapidfuzz's
# partial ratio, 0-100): "phonesupport" in "windoesphonesupportclothes..." 100, "openinganaccount"
# in "howbolddoineedtobetwoopenacount" 77; unrelated questions score 50-60 against a bank's
# topics. Topics of fewer letters than `_MIN_LETTERS` match by chance.
_MIN_SCORE = 75.0
_MIN_LETTERS = 5


def phrases(facts: str) -> tuple[str, ...]:
    """The facts file's headings and capitalised phrases, first seen first, each once."""
    found: dict[str, str] = {}
    for line in _COMMENT.sub("", facts).splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            _add(found, line.lstrip("#"))
            continue
        for match in _PHRASE.finditer(line):
            words = match.group(0).split()
            while words and words[0] in _COMMON:
                words = words[1:]
            whole = len(words) == len(match.group(0).split())  # nothing common was cut
            if len(words) == 1 and whole and _SENTENCE_START.search(line[: match.start()]):
                continue  # "Branches are open ...": capitalised as a sentence's first word
            _add(found, " ".join(words))
    return tuple(found.values())


def _add(found: dict[str, str], phrase: str) -> None:
    phrase = phrase.strip(" .,:;")
    if phrase:
        found.setdefault(phrase.lower(), phrase)


def prompt_from(facts: str, names: tuple[str, ...] = (), max_words: int = MAX_WORDS) -> str:
    """Whisper's initial prompt for a deployment: its names, then the facts file's phrases,
    within `max_words` words (a prompt is prefilled in every decode, and a long one pulls
    Whisper toward reading it back on unclear audio); "" when there is nothing to bias
    toward."""
    picked: list[str] = []
    seen: set[str] = set()
    budget = max_words
    for phrase in (*names, *phrases(facts)):
        words = len(phrase.split())
        if phrase.lower() in seen or words > budget:
            continue
        seen.add(phrase.lower())
        picked.append(phrase)
        budget -= words
    return ", ".join(picked) + "." if picked else ""


def _letters(text: str) -> str:
    return re.sub(r"[^\w]|_|\d", "", text.lower())


def guess_topic(heard: str, topics: tuple[str, ...]) -> str | None:
    """The topic whose letters the heard words sound most like (spelling is what a
    misrecognition keeps: "trance furs", "a count"), or None when none is alike enough."""
    from rapidfuzz import fuzz  # the llm extra's (the answer cache's matcher)

    letters = _letters(heard)
    best, best_score = None, _MIN_SCORE
    for topic in topics:
        candidate = _letters(topic)
        if len(candidate) < _MIN_LETTERS:
            continue
        score = fuzz.partial_ratio(candidate, letters)
        if score >= best_score and (best is None or score > best_score):
            best, best_score = topic, score
    return best

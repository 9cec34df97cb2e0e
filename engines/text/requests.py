"""What a request asks for, where its words alone tell: nothing, or how something is done.

Neither is answered with a tool call, whatever the model writes (engines/tools/calls.py):
- `is_closing`: thanks or goodbye that asks for nothing ("Brilliant, thanks for your help,
  that's everything."; the 1.5B on a GPU looked up the balance for it);
- `is_how_to`: a question about how something is done or where it is found ("How do I freeze
  my card?", "How long does a transfer take?", "Where can I see my statements?"): the 1.5B
  answered such questions with a lookup, or a made-up card number to ask back about
  (bench/RESULTS.md, tools). A request phrased as a question ("Can you send 40 pounds to
  Tom?", "How much money do I have?") is not one.
English and Chinese (a Chinese character is a word here).
"""

from __future__ import annotations

import re

from engines.text.consent import words

# A closing holds one of these ...
CLOSERS = frozenset({"thanks", "thank", "cheers", "bye", "goodbye", "ta"})
CLOSER_PHRASES = ("that's all", "thats all", "that's everything", "that's it", "nothing else",
                  "all done", "谢谢", "感谢", "再见", "拜拜", "就这些", "没有了")
# ... and only words said with one: praise, "for your help", "that's all", "have a good day".
WITH_CLOSING = frozenset({
    "brilliant", "great", "lovely", "perfect", "wonderful", "awesome", "cool", "nice", "super",
    "fantastic", "excellent", "good", "ok", "okay", "alright", "right", "fine", "no", "yes",
    "oh", "well", "so", "very", "much", "many", "a", "lot", "for", "your", "you", "the", "help",
    "all", "that's", "thats", "that", "is", "it", "everything", "and", "i'm", "im", "i", "am",
    "done", "nothing", "else", "have", "day", "see", "later", "now", "then", "today", "again",
    "really", "appreciate", "appreciated", "mm", "uh", "um", "just", "wanted", "to", "say",
    "好", "的", "了", "啊", "吧", "你", "您", "非常", "帮", "助", "忙",
})


def is_closing(text: str) -> bool:
    """Thanks or goodbye, asking for nothing (see the module docstring)."""
    lowered = text.lower()
    if any(ch.isdigit() for ch in text):
        return False
    said = words(lowered)
    closes = any(w in CLOSERS for w in said) or any(p in lowered for p in CLOSER_PHRASES)
    for phrase in CLOSER_PHRASES:
        lowered = lowered.replace(phrase, " ")
    return closes and all(w in CLOSERS or w in WITH_CLOSING for w in words(lowered))


# At a sentence's start: "how do I", "how long does", "what's the best way to", "where can I".
_HOW_TO = re.compile(
    r"(?:^|[.!?,;]\s*|\b(?:so|and|but|hi|hello|please|okay|ok)\s+)"
    r"(?:how\s+(?:do|can|could|would|should|might|will)\s+(?:i|we|one|you|people)\b"
    r"|how\s+long\s+(?:does|do|will|would|is|are|can)\b"
    r"|how\s+(?:does|do)\s+(?:a|an|the|it|this|that)\b"
    r"|what(?:'s|\s+is)\s+the\s+(?:best\s+|quickest\s+|easiest\s+|right\s+)?way\s+to\b"
    r"|what\s+do\s+i\s+(?:need|have)\s+to\s+do\b"
    r"|where\s+(?:can|do|could|would|should)\s+i\s+(?:see|find|get|check|view|look)\b)",
    re.I,
)
_HOW_TO_ZH = ("如何", "怎么才能", "怎样才能", "在哪里可以", "在哪儿可以", "要怎么")


def is_how_to(text: str) -> bool:
    """A question about how something is done or where it is found (module docstring)."""
    return bool(_HOW_TO.search(text.strip())) or any(p in text for p in _HOW_TO_ZH)

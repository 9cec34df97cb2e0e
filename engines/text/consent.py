"""Yes or no to a question the agent asked ("Shall I go ahead?"): only a clear yes is one.

A reply is a yes when it holds a yes word and every other word is one that a yes is said
with ("yes please, go ahead"), a no when it holds a no word ("no", "cancel", "don't"), and
anything else (a new question, "yes but to my other card") is neither: the agent does not act
on it. English and Chinese (a Chinese character is a word here).

`is_closing`: thanks or goodbye that asks for nothing ("Brilliant, thanks for your help,
that's everything."), which no tool call may answer (the 1.5B on a GPU looked up the balance
for it: bench/RESULTS.md, tools).
"""

from __future__ import annotations

import re
from typing import Literal

Consent = Literal["yes", "no", "unclear"]

YES = frozenset({
    "yes", "yeah", "yep", "yup", "sure", "ok", "okay", "confirm", "confirmed", "correct",
    "absolutely", "definitely", "affirmative", "proceed", "是", "好", "对", "确认", "可以", "行",
})
# Said with a yes, asking for nothing else.
WITH_YES = frozenset({
    "please", "go", "ahead", "do", "it", "that", "that's", "thats", "right", "fine", "thank",
    "thanks", "you", "of", "course", "i", "am", "i'm", "sure", "yes", "then", "now",
    "alright", "all", "great", "perfect", "exactly", "mm", "uh", "um", "the", "is", "go-ahead",
    "的", "吧", "啊", "呀", "请", "做", "嗯", "执行", "没", "问题",
})
YES_PHRASES = ("go ahead", "do it", "please do", "go on")
ZH_YES = ("确 认", "可 以", "没 问 题", "是 的", "好 的")  # as `words` spaces them
SHORT_YES = 4  # words
NOT_PLAIN = frozenset({"but", "instead", "other", "another", "different", "change", "only",
                       "except", "rather", "if", "why", "what", "how", "when"})
NO = frozenset({
    "no", "nope", "nah", "don't", "dont", "not", "cancel", "stop", "wait", "never", "abort",
    "不", "别", "取消", "算了", "等等", "不要",
})


def consent(text: str) -> Consent:
    words = re.findall(r"[\u3400-\u9fff]|[^\W\u3400-\u9fff]+(?:'[^\W\u3400-\u9fff]+)*",
                       text.lower())
    if any(w in NO for w in words) or "算了" in text or "取消" in text or "不要" in text:
        return "no"
    lowered = " ".join(words)
    said_yes = any(w in YES for w in words) or any(
        p in lowered for p in (*YES_PHRASES, *ZH_YES))
    for phrase in (*YES_PHRASES, *ZH_YES):
        lowered = lowered.replace(phrase, " ")
    if said_yes and all(w in YES or w in WITH_YES for w in lowered.split()):
        return "yes"
    # "Yes, go fed." (misheard "go ahead"): a short reply that begins with a yes and names
    # nothing else (no figure, no other thing, no change) is a yes.
    if words and words[0] in YES and len(words) <= SHORT_YES and not (
        set(words) & NOT_PLAIN or any(ch.isdigit() for ch in text)
    ):
        return "yes"
    return "unclear"


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
    words = _words(lowered)
    closes = any(w in CLOSERS for w in words) or any(p in lowered for p in CLOSER_PHRASES)
    for phrase in CLOSER_PHRASES:
        lowered = lowered.replace(phrase, " ")
    return closes and all(w in CLOSERS or w in WITH_CLOSING for w in _words(lowered))


def _words(text: str) -> list[str]:
    return re.findall(r"[\u3400-\u9fff]|[^\W\u3400-\u9fff]+(?:'[^\W\u3400-\u9fff]+)*", text)

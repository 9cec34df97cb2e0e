"""Yes or no to a question the agent asked ("Shall I go ahead?"): only a clear yes is one.

A reply is a yes when it holds a yes word and every other word is one that a yes is said
with ("yes please, go ahead"), a no when it holds a no word ("no", "cancel", "don't"), and
anything else (a new question, "yes but to my other card") is neither: the agent does not act
on it. English and Chinese (a Chinese character is a word here).
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


def words(text: str) -> list[str]:
    """`text`'s words: letters with apostrophes inside ("don't"); a Chinese character is one."""
    return re.findall(r"[\u3400-\u9fff]|[^\W\u3400-\u9fff]+(?:'[^\W\u3400-\u9fff]+)*", text)


def consent(text: str) -> Consent:
    said = words(text.lower())
    if any(w in NO for w in said) or "算了" in text or "取消" in text or "不要" in text:
        return "no"
    lowered = " ".join(said)
    said_yes = any(w in YES for w in said) or any(
        p in lowered for p in (*YES_PHRASES, *ZH_YES))
    for phrase in (*YES_PHRASES, *ZH_YES):
        lowered = lowered.replace(phrase, " ")
    if said_yes and all(w in YES or w in WITH_YES for w in lowered.split()):
        return "yes"
    # "Yes, go fed." (misheard "go ahead"): a short reply that begins with a yes and names
    # nothing else (no figure, no other thing, no change) is a yes.
    if said and said[0] in YES and len(said) <= SHORT_YES and not (
        set(said) & NOT_PLAIN or any(ch.isdigit() for ch in text)
    ):
        return "yes"
    return "unclear"

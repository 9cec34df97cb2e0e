"""How `bench/answers.py --language zh` judges the Chinese personas' answers
(`engines.llm.personas_zh`, their example facts `bank.zh.md`, `tutor.zh.md`; the questions are
`bench/answers_questions.toml`'s `zh`).

Categories as in English: general knowledge (companion, no facts), bank questions the facts
answer, bank questions they do not (no invented figure, an honest "没有这方面的信息" and a
next step), tutor (course facts and physics). An answer is accepted only in Chinese and in
Simplified characters (`simplified_only`), whatever else it says. Accept rules take Arabic
digits or Chinese numerals ("5" or "五").
"""

from __future__ import annotations

import re

from engines.text.zh_numbers import has_cjk
from engines.text.zh_script import to_simplified

DONT_KNOW_ZH = (
    r"没有(?:这方面的|相关的?|这个|具体的?)?(?:信息|资料|数据)|不(?:太)?(?:确定|清楚|知道)|无法|不能|"
    r"看不到|查不到|人工|同事|客服|帮助页面|联系|老师|课程页面"
)


def simplified_only(answer: str) -> bool:
    """A Chinese answer with no Traditional character (OpenCC would change none)."""
    return has_cjk(answer) and to_simplified(answer) == answer


def honest(answer: str) -> bool:
    return re.search(DONT_KNOW_ZH, answer) is not None

"""The Chinese question set of `bench/answers.py --language zh`: the Chinese personas
(`engines.llm.personas_zh`) and their example facts (`bank.zh.md`, `tutor.zh.md`).

Categories as in English: general knowledge (companion, no facts), bank questions the facts
answer, bank questions they do not (no invented figure, an honest "没有这方面的信息" and a
next step), tutor (course facts and physics). An answer is accepted only in Chinese and in
Simplified characters (`simplified_only`), whatever else it says. Accept rules take Arabic
digits or Chinese numerals ("5" or "五").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from engines.text.zh_numbers import has_cjk
from engines.text.zh_script import to_simplified

DONT_KNOW_ZH = (
    r"没有(?:这方面的|相关的?|这个|具体的?)?(?:信息|资料|数据)|不(?:太)?(?:确定|清楚|知道)|无法|不能|"
    r"看不到|查不到|人工|同事|客服|帮助页面|联系|老师|课程页面"
)


@dataclass(frozen=True)
class QuestionZh:
    category: str
    persona: str
    turns: tuple[str, ...]
    accept: tuple[str, ...] = ()
    not_covered: bool = False


def z(category: str, persona: str, *turns: str, accept: Sequence[str] = (),
      not_covered: bool = False) -> QuestionZh:
    return QuestionZh(category, persona, tuple(turns), tuple(accept), not_covered)


QUESTIONS_ZH: tuple[QuestionZh, ...] = (
    # General knowledge: the companion, no facts.
    z("general", "companion", "中国的首都是哪里？", accept=["北京"]),
    z("general", "companion", "一年有几个月？", accept=["十二", r"\b12\b", "12个"]),
    z("general", "companion", "太阳系中最大的行星是什么？", accept=["木星"]),
    z("general", "companion", "闰年有多少天？", accept=["366", "三百六十六"]),
    z("general", "companion", "水在标准大气压下多少度沸腾？", accept=["100", "一百"]),
    z("general", "companion", "世界上最高的山峰是哪座？", accept=["珠穆朗玛", "珠峰", "额菲尔士"]),
    z("general", "companion", "蜘蛛有几条腿？", accept=["八", r"8"]),
    z("general", "companion", "《红楼梦》的作者是谁？", accept=["曹雪芹"]),
    z("general", "companion", "世界上最大的海洋是哪个？", accept=["太平洋"]),
    z("general", "companion", "一小时有多少分钟？", accept=["60", "六十"]),
    z("general", "companion", "植物进行光合作用需要吸收什么气体？",
      accept=["二氧化碳", "CO2", "CO₂"]),
    z("general", "companion", "一个星期有几天？", accept=["七", r"7"]),
    # Bank, answered by the facts file.
    z("bank_covered", "bank", "你们周六几点营业？",
      accept=[r"9.{0,6}13", "九点.{0,6}(一点|十三点)"]),
    z("bank_covered", "bank", "你们周日开门吗？", accept=["休息", "不营业", "不开", "关门"]),
    z("bank_covered", "bank", "我的银行卡丢了，我该怎么办？",
      accept=["冻结", "0800 123 4568", "挂失"]),
    z("bank_covered", "bank", "补办的新卡多久能寄到？", accept=[r"\b5\b|5个", "五个"]),
    z("bank_covered", "bank", "你们的客服电话是多少？", accept=["0800 123 4567", "08001234567"]),
    z("bank_covered", "bank", "在国外刷卡要收多少手续费？", accept=[r"2\.75"]),
    z("bank_covered", "bank", "国际转账要多少钱？", accept=[r"5英镑|5 英镑|五英镑|£\s?5"]),
    z("bank_covered", "bank", "便捷储蓄账户的利率是多少？", accept=[r"3\.1"]),
    z("bank_covered", "bank", "在 App 里每天最多能转多少钱？", accept=[r"10,?000|1万|一万"]),
    z("bank_covered", "bank", "开户需要什么证件？", accept=["护照", "驾照"]),
    z("bank_covered", "bank", "日常账户有月费吗？", accept=["没有", "免费", "不收"]),
    z("bank_covered", "bank", "有人打电话问我要密码，是你们吗？",
      accept=["不是", "绝不", "从不", "不会"]),
    # Bank, not in the facts.
    z("bank_not_covered", "bank", "你们现在的房贷利率是多少？", not_covered=True),
    z("bank_not_covered", "bank", "我的账户余额是多少？", not_covered=True),
    z("bank_not_covered", "bank", "车贷每个月要还多少钱？", not_covered=True),
    z("bank_not_covered", "bank", "你们信用卡的年费是多少？", not_covered=True),
    z("bank_not_covered", "bank", "你们在利兹的网点地址是什么？", not_covered=True),
    z("bank_not_covered", "bank", "今天欧元的汇率是多少？", not_covered=True),
    z("bank_not_covered", "bank", "租一个保险箱要多少钱？", not_covered=True),
    z("bank_not_covered", "bank", "买股票的手续费是多少？", not_covered=True),
    # Tutor: course facts and physics.
    z("tutor", "tutor", "每周的直播课是什么时候？", accept=["周二", "星期二", "礼拜二"]),
    z("tutor", "tutor", "第三周学什么？", accept=["牛顿", "运动定律"]),
    z("tutor", "tutor", "期末考试占总成绩的多少？", accept=["60", "六十"]),
    z("tutor", "tutor", "每周测验的截止时间是什么时候？",
      accept=["周日", "星期天", "星期日", "23:59"]),
    z("tutor", "tutor", "牛顿第二定律是什么？", accept=["质量", "加速度", r"F\s*=\s*m\s*a"]),
    z("tutor", "tutor", "力的单位是什么？", accept=["牛顿", r"\bN\b"]),
    z("tutor", "tutor", "这门课的及格线是多少？", accept=["50", "五十"]),
    z("tutor", "tutor", "我可以预约真人老师一对一辅导吗？", accept=["可以", "预约", "课程页面"]),
    z("tutor", "tutor", "这门课一共几周？", accept=["10", "十"]),
    z("tutor", "tutor", "每周测验占总成绩的多少？", accept=["40", "四十"]),
)


def simplified_only(answer: str) -> bool:
    """A Chinese answer with no Traditional character (OpenCC would change none)."""
    return has_cjk(answer) and to_simplified(answer) == answer


def honest(answer: str) -> bool:
    return re.search(DONT_KNOW_ZH, answer) is not None

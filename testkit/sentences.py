"""Sentences for speaking tests and the voice benchmark (`bench/tts.py`): English and Mandarin,
each with numbers, dates, money, times and names, as an answer of the agent would have them.

`spoken_reference(text)` is what a listener should hear, in the form the scoring compares: the
text normalized for speech (`engines.text.normalize`: numbers, dates and money in words, the
Chinese way for Chinese) and, for Chinese, in Simplified characters. A transcript is brought to
the same form before WER (English) or CER (Mandarin) are counted, so "3点半" and "三点半",
"$5" and "five dollars" are the same.
"""

from __future__ import annotations

import re

from engines.text.normalize import normalize
from engines.text.zh_script import to_simplified

EN_SENTENCES = (
    "Good morning, my name is Ava and I will help you today.",
    "Your card will arrive within 5 working days.",
    "The branch is open from 9 a.m. to 5 p.m. on weekdays.",
    "A transfer abroad costs $5 and takes 1 to 3 days.",
    "The meeting with Doctor Smith is on March 3rd, 2025.",
    "Interest on the Easy Saver account is 3.1% a year.",
    "Please call us on 0800 123 4567 if anything looks wrong.",
    "Emma paid 42 pounds for the train to Manchester.",
    "The course runs for 10 weeks and the exam is in June.",
    "We never ask for your PIN or your password by e-mail.",
    "Newton's second law says force equals mass times acceleration.",
    "The daily limit for payments in the app is 10,000 pounds.",
    "Mister Johnson moved to Seattle in 2019 with his two children.",
    "The quiz is due on Sunday at 11:59 p.m.",
    "Light travels about 300,000 kilometers every second.",
    "Your appointment is on the 14th of February at 2:30 p.m.",
    "Oliver saved 250 dollars in 6 months by cooking at home.",
    "The overdraft costs 39.9% a year, so please use it with care.",
    "Sarah and David will visit Paris on July 21st.",
    "The water boils at 100 degrees Celsius at sea level.",
    "Thank you for calling Harbor Street Bank, have a nice day!",
    "Can I help you with anything else today?",
)

ZH_SENTENCES = (
    "您好，我是小艾，很高兴为您服务。",
    "您的新卡会在5个工作日内寄到。",
    "营业厅周一到周五早上9点开门，下午5点关门。",
    "每笔国际转账收费5英镑，需要1到3个工作日。",
    "王老师的物理课在每周二晚上6点开始。",
    "活期储蓄账户的年利率是3.1%。",
    "如果有问题，请拨打客服电话800 123 4567。",
    "李明昨天在北京买了一张到上海的火车票，花了553元。",
    "这门课一共10周，期末考试在6月举行。",
    "我们绝不会通过短信向您索要密码。",
    "牛顿第二定律说，力等于质量乘以加速度。",
    "在手机银行里每天最多可以转账1万元。",
    "张伟2019年搬到了深圳，现在在一家银行工作。",
    "每周的测验必须在星期天晚上11点59分之前提交。",
    "光每秒大约传播30万公里。",
    "您的预约时间是2月14日下午3点半。",
    "小红半年攒了2500元，准备暑假去旅行。",
    "透支的年利率是39.9%，请谨慎使用。",
    "刘芳和陈静打算7月21日去杭州看西湖。",
    "在标准大气压下，水的沸点是100摄氏度。",
    "感谢您致电海港街银行，祝您生活愉快！",
    "请问还有什么可以帮您的吗？",
)

# Mixed Chinese and English, as a bank or tutor answer has it: spoken, not dropped.
ZH_MIXED = (
    "请在App里点击Cards，然后选择冻结卡片。",
    "您可以用ATM免费取现。",
    "这节课我们学习Newton的三大定律。",
)


def spoken_reference(text: str) -> str:
    """`text` in the form the scoring compares (see the module docstring)."""
    return to_simplified(normalize(text))


# 7 or more digits in one string or in groups ("8001234567", "0800 123 4567", "555-123-4567")
_LONG_DIGITS = re.compile(r"\d(?:[ -]?\d){6,}")
_DOTTED_TIME = re.compile(r"\b(\d{1,2})\.(\d{2})\s?([ap])\.?m\b", re.I)


def heard_reference(transcript: str) -> str:
    """A transcript in the form `spoken_reference` gives: also Whisper's way of writing a
    number it heard read digit by digit (a phone number said "八零零 一二三..." comes back as
    "8001234567", or grouped, "0800 123 4567"): 7 or more digits, never a cardinal in these
    sentences, are read digit by digit, not as "八十亿..." or "one hundred and twenty three";
    and a time written with a dot ("11.59pm") as one with a colon."""
    spaced = _LONG_DIGITS.sub(lambda m: " ".join(re.sub(r"\D", "", m.group())),
                              to_simplified(transcript))
    spaced = _DOTTED_TIME.sub(r"\1:\2 \3m", spaced)
    return spoken_reference(spaced)

# Questions a user asks the Chinese agent (bench/voice_to_voice.py --language zh), spoken by a
# Kokoro voice other than the agent's (zm_yunxi).
ZH_QUESTIONS = (
    "中国的首都是哪里？",
    "一年有几个月？",
    "太阳系中最大的行星是什么？",
    "今天天气怎么样？",
    "你能给我讲个笑话吗？",
    "水在多少度沸腾？",
    "世界上最高的山是哪座？",
    "你叫什么名字？",
    "怎么学好中文？",
    "你喜欢什么运动？",
    "一小时有多少分钟？",
    "长城有多长？",
    "熊猫吃什么？",
    "你能推荐一本好书吗？",
    "地球离太阳有多远？",
    "上海有什么好玩的地方？",
    "怎样才能睡得更好？",
    "你会说英语吗？",
    "春节是什么时候？",
    "谢谢你，再见！",
)

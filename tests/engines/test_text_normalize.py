"""Text normalization: table tests (English and Chinese) and hypothesis properties."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engines.text.normalize import normalize
from engines.text.zh_numbers import has_cjk, integer, normalize_zh


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("It costs $12.50 today.", "It costs twelve dollars and fifty cents today."),
        ("Only $1 left.", "Only one dollar left."),
        ("We raised $1.5 million.", "We raised one point five million dollars."),
        (
            "Prices: £3.99, €5, ¥300.",
            "Prices: three pounds and ninety nine pence, five euros, three hundred yen.",
        ),
        ("Growth was 3.5% and 12%.", "Growth was three point five percent and twelve percent."),
        ("Due on 2024-03-15.", "Due on March fifteenth, twenty twenty four."),
        ("Due on 3/15/2024.", "Due on March fifteenth, twenty twenty four."),
        ("On March 3rd, 2021 we met.", "On March third, twenty twenty one we met."),
        ("Born 4 July 1999.", "Born the fourth of July, nineteen ninety nine."),
        ("Call at 9:05 or 14:00.", "Call at nine oh five or fourteen hundred."),
        ("Meet at 3:30 pm.", "Meet at three thirty p m."),
        ("Meet at 10 o'clock or 5pm.", "Meet at ten o'clock or five p m."),
        ("At 5 p.m. We left.", "At five p m. We left."),
        ("At 6 a.m. on Monday.", "At six a m on Monday."),
        ("The 21st time, in 1984.", "The twenty first time, in nineteen eighty four."),
        ("The 1990s were fun.", "The nineteen nineties were fun."),
        (
            "1,234 people and -4 degrees.",
            "one thousand two hundred and thirty four people and minus four degrees.",
        ),
        ("Add 0.5 cups.", "Add zero point five cups."),
        (
            "Your PIN is 0042, account 1234567890.",
            "Your PIN is zero zero four two, account one two three four five six seven eight nine"
            " zero.",
        ),
        (
            "Call 0800 123 4567 or +44 20 7946 0000.",
            "Call zero eight zero zero, one two three, four five six seven or plus four four, "
            "two zero, seven nine four six, zero zero zero zero.",
        ),
        (
            "Or (555) 123-4567, 555-123-4567.",
            "Or five five five, one two three, four five six seven, five five five, one two "
            "three, four five six seven.",
        ),
        (
            "From 0800 to 1200 hours.",
            "From zero eight zero zero to one thousand two hundred hours.",
        ),
        ("It is 5 km away and weighs 1 kg.", "It is five kilometers away and weighs one kilogram."),
        ("Pages 10-20 & more.", "Pages ten to twenty and more."),
        ("Dr. Smith lives near St. Mary.", "Doctor Smith lives near Saint Mary."),
        (
            "Apples, pears, etc. are fine, e.g. this one.",
            "Apples, pears, et cetera are fine, for example this one.",
        ),
        ("See https://example.com/docs today.", "See example dot com slash docs today."),
        (
            "Mail me@test.org or visit google.com.",
            "Mail me at test dot org or visit google dot com.",
        ),
        ("**Sure!** Here:\n- one\n- two", "Sure! Here:\none\ntwo"),
        ("No. 7 is mine.", "number seven is mine."),
        ("Nothing to change here.", "Nothing to change here."),
    ],
)
def test_english_table(text: str, expected: str) -> None:
    assert normalize(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("今天是2024年3月15日。", "今天是二零二四年三月十五日。"),
        ("气温25.5度，增长了50%。", "气温二十五点五度，增长了百分之五十。"),
        ("价格是¥1,200。", "价格是一千二百元。"),
        ("会议在14:30开始，8:00结束。", "会议在十四点三十分开始，八点整结束。"),
        ("有10015人，-3度。", "有一万零一十五人，负三度。"),
        ("一共105个。", "一共一百零五个。"),
    ],
)
def test_chinese_table(text: str, expected: str) -> None:
    assert normalize(text) == expected
    assert normalize_zh(text) == expected


@pytest.mark.parametrize(
    ("n", "words"),
    [
        (0, "零"),
        (10, "十"),
        (12, "十二"),
        (20, "二十"),
        (101, "一百零一"),
        (1010, "一千零一十"),
        (10000, "一万"),
        (10050, "一万零五十"),
        (120000, "十二万"),
        (100000000, "一亿"),
    ],
)
def test_chinese_integers(n: int, words: str) -> None:
    assert integer(n) == words


_ZH_DIGIT = {c: i for i, c in enumerate("零一二三四五六七八九")} | {"两": 2}  # 两个, 两元
_ZH_UNIT = {"十": 10, "百": 100, "千": 1000}
_ZH_BIG = {"万": 10**4, "亿": 10**8, "兆": 10**12}


def parse_zh(words: str) -> int:
    """Independent reader of Chinese numerals (for the round-trip property)."""
    parts: list[tuple[int, int]] = []  # (big unit, value) of finished 万/亿/兆 groups
    section, digit = 0, 0
    for ch in words:
        if ch in _ZH_DIGIT:
            digit = _ZH_DIGIT[ch]
        elif ch in _ZH_UNIT:
            section += (digit or 1) * _ZH_UNIT[ch]
            digit = 0
        else:
            big, value = _ZH_BIG[ch], section + digit
            while parts and parts[-1][0] < big:  # "一万亿": smaller groups scale up too
                value += parts.pop()[1]
            parts.append((big, value * big))
            section = digit = 0
    return sum(v for _, v in parts) + section + digit


@settings(max_examples=500, deadline=None)
@given(st.integers(0, 10**13 - 1))
def test_chinese_integers_round_trip(n: int) -> None:
    assert parse_zh(integer(n)) == n


@st.composite
def numeric_sentence(draw: st.DrawFn) -> str:
    n = draw(st.integers(0, 10**9))
    cents = draw(st.integers(0, 99))
    pct = draw(st.floats(0, 1000, allow_nan=False).map(lambda f: round(f, 2)))
    hh, mm = draw(st.integers(0, 23)), draw(st.integers(0, 59))
    y, mo, d = draw(st.integers(1900, 2099)), draw(st.integers(1, 12)), draw(st.integers(1, 28))
    templates = [
        f"We counted {n:,} items.",
        f"It costs ${n}.{cents:02d} now.",
        f"Up {pct}% today.",
        f"See you at {hh}:{mm:02d}.",
        f"Due {y}-{mo:02d}-{d:02d}.",
        f"It was {n} or {-n}.",
        f"The {d}th of them.",
        f"Back in {y}, it rained.",
        f"{mo}/{d}/{y} was fine.",
    ]
    return draw(st.sampled_from(templates))


@settings(max_examples=400, deadline=None)
@given(numeric_sentence())
def test_english_numbers_become_words(text: str) -> None:
    out = normalize(text)
    assert not re.search(r"\d", out), (text, out)
    assert out.endswith(".")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_any_text_is_handled(text: str) -> None:
    out = normalize(text)
    assert isinstance(out, str)
    assert normalize(out, lang="zh" if has_cjk(out) else "en") == out


@pytest.mark.parametrize("ch", ["中", "㐀", "𠀀", "豈", "丽", "𰀀"])
def test_every_cjk_block_takes_the_chinese_rules(ch: str) -> None:
    """Regression (hypothesis found '*㐀'): CJK Extension A and the supplementary-plane
    ideographs were not recognised as Chinese, so one text took two different paths."""
    assert has_cjk(ch)
    assert normalize(f"*{ch}*") == ch  # markdown goes on either path
    assert normalize(f"{ch}3个") == f"{ch}三个"


@settings(max_examples=300, deadline=None)
@given(st.integers(-(10**9), 10**9), st.sampled_from(["个", "元", "人", "度"]))
def test_chinese_numbers_become_characters(n: int, unit: str) -> None:
    out = normalize(f"一共{n}{unit}。")
    assert not re.search(r"\d", out)
    assert parse_zh(out.removeprefix("一共").removesuffix(f"{unit}。").removeprefix("负")) == abs(n)

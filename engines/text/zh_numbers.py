"""Chinese numerals for a Chinese voice: digits, decimals, percentages, years, money, times.

`normalize_zh(text)` rewrites Arabic numbers inside Chinese text into characters:
"2024年" -> "二零二四年" (years read digit by digit), "3.5" -> "三点五", "50%" -> "百分之五十",
"¥100" / "$5" -> "一百元" / "五美元", "14:30" -> "十四点三十分", "1,234" -> "一千二百三十四",
"2个" / "2小时" -> "两个" / "两小时" (a lone 2 before a measure word), and phone numbers, codes
and other long digit strings digit by digit ("800 123 4567" -> "八零零 一二三 四五六七").
"""

from __future__ import annotations

import re

_DIGITS = "零一二三四五六七八九"
_SMALL = ("", "十", "百", "千")
_LARGE = ("", "万", "亿", "兆")
_CURRENCY = {"¥": "元", "￥": "元", "$": "美元", "€": "欧元", "£": "英镑"}


# Every CJK ideograph block of Unicode 16: Extension A, the unified block, compatibility
# ideographs, and Extensions B-I with the compatibility supplement in the supplementary planes.
CJK_IDEOGRAPH = (
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\U00020000-\U0002ebef\U0002f800-\U0002fa1f\U00030000-\U000323af"
)
_CJK_RE = re.compile(f"[{CJK_IDEOGRAPH}]")


def is_cjk(ch: str) -> bool:
    """True for one CJK ideograph, from any of its Unicode blocks."""
    return _CJK_RE.fullmatch(ch) is not None


def has_cjk(text: str) -> bool:
    """True when `text` contains CJK ideographs (the cue for Chinese rules)."""
    return _CJK_RE.search(text) is not None


def _group(n: int) -> str:
    """0 < n < 10000 -> characters, with 零 for inner gaps ("一千零五")."""
    out, zero = "", False
    for i in range(3, -1, -1):
        d = n // 10**i % 10
        if d == 0:
            zero = bool(out)
            continue
        if zero:
            out += "零"
            zero = False
        out += _DIGITS[d] + _SMALL[i]
    return out


def integer(n: int) -> str:
    """Chinese cardinal of an integer ("十二", "一百零五", "一万二千", "负三")."""
    if n < 0:
        return "负" + integer(-n)
    if n == 0:
        return "零"
    groups: list[int] = []
    while n:
        groups.append(n % 10000)
        n //= 10000
    if len(groups) > len(_LARGE):
        return "".join(
            _DIGITS[int(c)] for c in str(sum(g * 10000**i for i, g in enumerate(groups)))
        )
    out = ""
    for i in range(len(groups) - 1, -1, -1):
        g = groups[i]
        if g == 0:
            continue
        if out and g < 1000:
            out += "零"  # "一万零五十"
        out += _group(g) + _LARGE[i]
    # Spoken Chinese drops the leading 一 of 10..19: "十二", not "一十二".
    return out[1:] if out.startswith("一十") else out


def number(text: str) -> str:
    """Cardinal of "1,234.5"-style text: integer part in words, decimals digit by digit."""
    text = text.replace(",", "")
    whole, _, frac = text.partition(".")
    words = integer(int(whole or "0"))
    if frac:
        words += "点" + "".join(_DIGITS[int(c)] for c in frac)
    return words


_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
# Words that count things (and 点 for the hour): a lone 2 before them is read 两.
_MEASURE = ("个|小时|天|周|星期|年|次|种|张|位|份|件|点|万|千|百|亿|岁|本|条|台|辆|家|名|分钟|倍|"
            "只|双|层|节|门|所|项|笔|元|块|英镑|美元|欧元|公里|米|斤")


def _digits(text: str) -> str:
    return "".join(_DIGITS[int(c)] if c.isdigit() else c for c in text)


_RULES: tuple[tuple[re.Pattern[str], object], ...] = (
    (
        re.compile(r"([¥￥$€£])\s?(" + _NUM + ")"),
        lambda m: number(m.group(2)) + _CURRENCY[m.group(1)],
    ),
    (re.compile(r"(" + _NUM + r")\s?[%％]"), lambda m: "百分之" + number(m.group(1))),
    (re.compile(r"(\d{2,4})(?=\s?年)"), lambda m: "".join(_DIGITS[int(c)] for c in m.group(1))),
    # Phone numbers (groups of digits split by spaces or dashes), codes starting with 0 and
    # digit strings of 11 or more (a mobile number): digit by digit, as read out.
    (re.compile(r"(?<![\d.,:])(?:\d{2,}(?:[ -]\d{2,})+|0\d+|\d{11,})(?![\d.,:])"),
     lambda m: _digits(m.group(0))),
    (re.compile(rf"(?<![\d.,])2(?=\s?(?:{_MEASURE}))"), lambda m: "两"),
    (
        re.compile(r"(?<!\d)(\d{1,2})[:：](\d{2})(?!\d)"),
        lambda m: (
            integer(int(m.group(1)))
            + "点"
            + ("整" if m.group(2) == "00" else integer(int(m.group(2))) + "分")
        ),
    ),
    (
        re.compile(r"(-)?(" + _NUM + ")"),
        lambda m: ("负" if m.group(1) else "") + number(m.group(2)),
    ),
)


def normalize_zh(text: str) -> str:
    """Replace Arabic numbers in Chinese text with Chinese numerals."""
    for pattern, repl in _RULES:
        text = pattern.sub(repl, text)  # type: ignore[call-overload]
    return text

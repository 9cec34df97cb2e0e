"""Text normalization for speech: what the voice should say instead of what the LLM wrote.

`normalize(text, lang="auto")` rewrites, in this order: markdown markup, URLs and e-mail
addresses, money, percentages, dates, times, ordinals, years, numbers with units, digit strings,
plain numbers (with thousands separators, decimals and signs), common abbreviations and symbols.
Text with Chinese characters (or `lang="zh"`) gets Chinese numerals instead
(`engines.text.zh_numbers`). Spelled-out numbers come from `num2words`.

Output is plain text for any TTS voice; the function is pure and cheap (regular expressions),
so it runs per chunk right before synthesis.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from num2words import num2words

from engines.text.zh_numbers import has_cjk, normalize_zh

_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_MONTH_RE = (
    r"(Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
)
_CURRENCIES = {  # symbol -> (singular, plural, cent singular, cent plural)
    "$": ("dollar", "dollars", "cent", "cents"),
    "€": ("euro", "euros", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"),
    "¥": ("yen", "yen", "", ""),
}
_SCALES = {"k": "thousand", "m": "million", "bn": "billion", "b": "billion"}
_UNITS = {  # unit -> (singular, plural); only unambiguous ones, and only after a number
    "km": ("kilometer", "kilometers"),
    "cm": ("centimeter", "centimeters"),
    "mm": ("millimeter", "millimeters"),
    "kg": ("kilogram", "kilograms"),
    "mg": ("milligram", "milligrams"),
    "lb": ("pound", "pounds"),
    "lbs": ("pound", "pounds"),
    "oz": ("ounce", "ounces"),
    "ft": ("foot", "feet"),
    "mph": ("mile per hour", "miles per hour"),
    "km/h": ("kilometer per hour", "kilometers per hour"),
    "kph": ("kilometer per hour", "kilometers per hour"),
    "°C": ("degree Celsius", "degrees Celsius"),
    "°F": ("degree Fahrenheit", "degrees Fahrenheit"),
    "°": ("degree", "degrees"),
    "GB": ("gigabyte", "gigabytes"),
    "MB": ("megabyte", "megabytes"),
    "TB": ("terabyte", "terabytes"),
    "kHz": ("kilohertz", "kilohertz"),
    "Hz": ("hertz", "hertz"),
    "ms": ("millisecond", "milliseconds"),
    "hrs": ("hour", "hours"),
    "hr": ("hour", "hours"),
    "mins": ("minute", "minutes"),
    "min": ("minute", "minutes"),
    "sec": ("second", "seconds"),
    "secs": ("second", "seconds"),
}
# Abbreviations that are safe to expand anywhere (case-sensitive, with their period).
_ABBREVIATIONS = {
    "Mr.": "Mister",
    "Mrs.": "Missus",
    "Ms.": "Miz",
    "Dr.": "Doctor",
    "Prof.": "Professor",
    "Jr.": "Junior",
    "Sr.": "Senior",
    "vs.": "versus",
    "approx.": "approximately",
    "e.g.": "for example",
    "i.e.": "that is",
    "etc.": "et cetera",
    "Inc.": "Incorporated",
    "Ltd.": "Limited",
    "Corp.": "Corporation",
    "Ave.": "Avenue",
    "Rd.": "Road",
    "Mt.": "Mount",
    "Dept.": "Department",
    "Govt.": "Government",
    "a.m.": "a m",
    "p.m.": "p m",
    "A.M.": "a m",
    "P.M.": "p m",
}
_SYMBOLS = {"&": " and ", "@": " at ", "+": " plus ", "=": " equals ", "%": " percent "}

Sub = Callable[[re.Match[str]], str]


def cardinal(value: str | int | float) -> str:
    """Spoken cardinal without num2words' list commas ("one thousand, two" -> "... two")."""
    text = value if isinstance(value, str) else str(value)
    text = text.replace(",", "")
    number: int | float = float(text) if "." in text else int(text)
    return str(num2words(number)).replace(",", "").replace("-", " ")


def _digits(text: str) -> str:
    names = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
    return " ".join(names[int(ch)] for ch in text if ch.isdigit())


def _year(value: int) -> str:
    return str(num2words(value, to="year")).replace("-", " ")


def _ordinal(value: int) -> str:
    return str(num2words(value, to="ordinal")).replace(",", "").replace("-", " ")


def _month(name: str) -> str:
    key = name.rstrip(".")[:3].lower()
    return next(m for m in _MONTHS if m[:3].lower() == key)


def _scale(word: str | None) -> str:
    if not word:
        return ""
    return " " + _SCALES.get(word.lower(), word.lower())


def _money(m: re.Match[str]) -> str:
    symbol, amount, scale = m.group("sym"), m.group("amount").replace(",", ""), m.group("scale")
    one, many, cent, cents = _CURRENCIES[symbol]
    if scale:  # "$1.5 million" -> "one point five million dollars"
        return f"{cardinal(amount)}{_scale(scale)} {many}"
    whole, _, frac = amount.partition(".")
    units = int(whole or "0")
    words = f"{cardinal(units)} {one if units == 1 else many}"
    if frac and cent and int(frac[:2].ljust(2, "0")):
        n = int(frac[:2].ljust(2, "0"))
        words += f" and {cardinal(n)} {cent if n == 1 else cents}"
    return words


def _percent(m: re.Match[str]) -> str:
    return f"{cardinal(m.group(1))} percent"


def _date_iso(m: re.Match[str]) -> str:
    year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return m.group(0)
    return f"{_MONTHS[month - 1]} {_ordinal(day)}, {_year(year)}"


def _date_us(m: re.Match[str]) -> str:
    month, day, year = int(m.group(1)), int(m.group(2)), m.group(3)
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return m.group(0)
    full_year = int(year) + (2000 if len(year) == 2 else 0)
    return f"{_MONTHS[month - 1]} {_ordinal(day)}, {_year(full_year)}"


def _date_month_day(m: re.Match[str]) -> str:
    words = f"{_month(m.group(1))} {_ordinal(int(m.group(2)))}"
    return f"{words}, {_year(int(m.group(3)))}" if m.group(3) else words


def _date_day_month(m: re.Match[str]) -> str:
    words = f"the {_ordinal(int(m.group(1)))} of {_month(m.group(2))}"
    return f"{words}, {_year(int(m.group(3)))}" if m.group(3) else words


def _time(m: re.Match[str]) -> str:
    hour, minute, ampm = int(m.group(1)), int(m.group(2) or 0), m.group(3)
    if hour > 24 or minute > 59:
        return m.group(0)
    if minute == 0 and not ampm:
        words = f"{cardinal(hour)} hundred" if hour > 12 else f"{cardinal(hour)} o'clock"
    elif minute == 0:
        words = cardinal(hour)
    elif minute < 10:
        words = f"{cardinal(hour)} oh {cardinal(minute)}"
    else:
        words = f"{cardinal(hour)} {cardinal(minute)}"
    if ampm:
        words += " a m" if ampm[0].lower() == "a" else " p m"
        # "p.m." may also end the sentence: keep that period when a sentence follows or at the end.
        rest = m.string[m.end() :]
        if ampm.endswith(".") and (not rest.strip() or re.match(r"\s+[A-Z]", rest)):
            words += "."
    return words


def _unit(m: re.Match[str]) -> str:
    number, unit = m.group(1), m.group(2)
    one, many = _UNITS[unit]
    return f"{cardinal(number)} {one if number in ('1', '1.0') else many}"


def _url(m: re.Match[str]) -> str:
    text = re.sub(r"^https?://", "", m.group(0)).rstrip("/")
    for sym, word in (
        ("@", " at "),
        (".", " dot "),
        ("/", " slash "),
        ("-", " dash "),
        ("_", " underscore "),
        (":", " colon "),
    ):
        text = text.replace(sym, word)
    return re.sub(r"\s+", " ", text).strip()


def _phone(m: re.Match[str]) -> str:
    """A phone number digit by digit, its groups apart ("0800 123 4567" -> "zero eight zero
    zero, one two three, four five six seven"), never "one hundred and twenty three"."""
    groups = [g for g in re.split(r"[\s().-]+", m.group(0)) if g]
    said = [("plus " if g.startswith("+") else "") + _digits(g) for g in groups]
    return ", ".join(said)


def _number(m: re.Match[str]) -> str:
    sign, number = m.group(1), m.group(2)
    plain = number.replace(",", "")
    if "." not in plain and (plain.startswith("0") and len(plain) > 1 or len(plain) >= 10):
        return _digits(plain)  # codes, account and phone numbers are read digit by digit
    words = cardinal(plain)
    return f"minus {words}" if sign else words


_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_UNIT_ALT = "|".join(re.escape(u) for u in sorted(_UNITS, key=len, reverse=True))
_ABBR_RE = re.compile(
    r"(?<![\w.])("
    + "|".join(re.escape(a) for a in sorted(_ABBREVIATIONS, key=len, reverse=True))
    + r")(?=\s|$|[,;:!?)])"
)
# Markdown the LLM may emit, in any language: emphasis, headings, inline code, bullets.
_MARKUP: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(\*\*|__|\*|`+)"), ""),
    (re.compile(r"^\s*(?:#{1,6}|[-*•])\s+", re.M), ""),
)
_RULES: tuple[tuple[re.Pattern[str], str | Sub], ...] = (
    (
        re.compile(
            r"https?://[^\s<>\"]+[^\s<>\".,;:!?)]|www\.[^\s<>\"]+[^\s<>\".,;:!?)]"
            r"|\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b"
        ),
        _url,
    ),
    (re.compile(r"\b[a-z0-9-]+\.(?:com|org|net|io|ai|edu|gov|co\.uk)\b", re.I), _url),
    (
        re.compile(
            r"(?P<sym>[$€£¥])\s?(?P<amount>" + _NUM + r")"
            r"(?:\s?(?P<scale>thousand|million|billion|trillion|bn|[kKmMbB])\b)?"
        ),
        _money,
    ),
    (re.compile(r"(" + _NUM + r")\s?%"), _percent),
    # Phone numbers: "+44 20 7946 0000", "0800 123 4567" (a leading 0 or +, then groups),
    # "(555) 123-4567" / "555-123-4567"; before the ranges and cardinals below.
    (
        re.compile(
            r"(?<![\w.,:+/-])(?:\+\d{1,3}(?:[ -]\(?\d{1,5}\)?)+|0\d{1,4}(?:[ -]\d{2,4})+"
            r"|(?:\(\d{3}\)\s?|\d{3}[-.])\d{3}[-.]\d{4})(?!\w|[.,:]\d)"
        ),
        _phone,
    ),
    (re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b"), _date_iso),
    (re.compile(r"\b(\d{1,2})/(\d{1,2})/(\d{4}|\d{2})\b"), _date_us),
    (
        re.compile(r"\b" + _MONTH_RE + r"\s+(\d{1,2})(?:st|nd|rd|th)?\b(?:,?\s+(\d{4})\b)?"),
        _date_month_day,
    ),
    (
        re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+" + _MONTH_RE + r"(?:,?\s+(\d{4})\b)?"),
        _date_day_month,
    ),
    (re.compile(r"\b(\d{1,2}):(\d{2})(?::\d{2})?\s*([aApP]\.?[mM]\.?)?(?![\w:])"), _time),
    (re.compile(r"\b(\d{1,2})()\s*([aApP]\.?[mM]\.?)(?=\W|$)"), _time),
    (re.compile(r"\b(\d+)(?:st|nd|rd|th)\b"), lambda m: _ordinal(int(m.group(1)))),
    (
        re.compile(r"\b(1[1-9]\d0)s\b"),
        lambda m: (
            _year(int(m.group(1)))[:-1] + "ies"
            if _year(int(m.group(1))).endswith("y")
            else _year(int(m.group(1))) + "s"
        ),
    ),
    (
        re.compile(
            r"\b((?:in|since|by|from|until|of|year|during|before|after|In|Since|By|From)"
            r"\s+)(1[1-9]\d\d|20\d\d)\b(?!\s*%)"
        ),
        lambda m: m.group(1) + _year(int(m.group(2))),
    ),
    (re.compile(r"(" + _NUM + r")\s?(" + _UNIT_ALT + r")(?![\w/])"), _unit),
    (re.compile(r"\bNo\.\s?(?=\d)"), "number "),
    (re.compile(r"#(?=\d)"), "number "),
    (re.compile(r"(\d)\s?[-–]\s?(?=\d)"), r"\1 to "),  # ranges "10-20"
    (re.compile(r"(?<![\w.,])(-)?(" + _NUM + r")(?!\w|\.\d)"), _number),
    (_ABBR_RE, lambda m: _ABBREVIATIONS[m.group(1)]),
    (re.compile(r"\bSt\.(?=\s+[A-Z])"), "Saint"),
    (re.compile(r"(?<=\d\s)St\.|\bSt\.(?=\s*$|\s*[,.])"), "Street"),
    (re.compile(r"(?<=\s)[&@+=%](?=\s)"), lambda m: _SYMBOLS[m.group(0)]),
)


def normalize(text: str, lang: str = "auto") -> str:
    """Rewrite `text` into words a TTS voice reads correctly.

    Args:
        text: one chunk of agent text.
        lang: "en", "zh", or "auto" (Chinese rules when the text has Chinese characters).
    """
    for pattern, markup in _MARKUP:
        text = pattern.sub(markup, text)
    if lang == "zh" or (lang == "auto" and has_cjk(text)):
        return normalize_zh(text)
    for pattern, repl in _RULES:
        text = pattern.sub(repl, text)
    # Collapse the spaces substitutions leave, but keep line breaks (they are pauses).
    return re.sub(r"[ \t]{2,}", " ", text).strip(" \t")

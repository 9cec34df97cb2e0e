"""The voice benchmark's scoring: a transcript and its reference in one form."""

from __future__ import annotations

from engines.asr.text import normalize_words
from testkit.sentences import heard_reference, spoken_reference


def test_a_number_heard_digit_by_digit_scores_as_said() -> None:
    said = spoken_reference("请拨打客服电话八零零 一二三 四五六七。")
    heard = heard_reference("请拨打客服电话8001234567。")
    assert heard.replace(" ", "") == said.replace(" ", "")


def test_cardinals_and_traditional_forms_are_read_as_before() -> None:
    assert heard_reference("一共1000元") == spoken_reference("一共一千元")
    assert heard_reference("銀行") == "银行"


def test_a_time_written_with_a_dot_is_the_time_said() -> None:
    assert heard_reference("The quiz is due at 11.59pm.") == spoken_reference(
        "The quiz is due at 11:59 p.m.")
    assert heard_reference("It grew 3.50 percent.") == spoken_reference("It grew 3.50 percent.")


def test_a_phone_number_written_in_groups_is_read_digit_by_digit() -> None:
    """Whisper writes a number said digit by digit in groups too ("0800 123 4567"); read as
    cardinals, "123" became "one hundred and twenty three", three errors for a right hearing."""
    said = normalize_words(spoken_reference("Call us on 0800 123 4567 today."))
    assert normalize_words(heard_reference("Call us on 0800 123 4567 today.")) == said
    assert normalize_words(heard_reference("Call us on 08001234567 today.")) == said
    assert heard_reference("In 2019 with his 2 children") == spoken_reference(
        "In 2019 with his 2 children")  # short numbers stay cardinals

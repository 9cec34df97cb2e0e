"""What never reaches the voice: code, web addresses, markdown and list markers, whatever the
delta boundaries of the stream."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engines.text.spoken import URL_WORDS, SpokenFilter


def spoken(text: str, cuts: list[int] | None = None) -> str:
    f = SpokenFilter()
    points = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts or [])})
    out = "".join(f.push(text[a:b]) for a, b in zip(points, points[1:], strict=False))
    return out + f.flush()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Go to http#s://a.b/c now.", f"Go to {URL_WORDS} now."),  # found by hypothesis
        ("To freeze it:\n1. Open the app.\n2) Tap **Cards**.\n- Then `Freeze card`.",
         "To freeze it:\nOpen the app.\nTap Cards.\nThen Freeze card."),
        ("## Opening hours\nWe open at 9:00.", "Opening hours\nWe open at 9:00."),
        ("Like this:\n```python\nprint('hi')\n```\nThat prints hi.",
         "Like this:\n\nThat prints hi."),
        ("See https://example.com/help?x=1 for more.", f"See {URL_WORDS} for more."),
        ("Or www.example.org today.", f"Or {URL_WORDS} today."),
        ("Great question! 😀 Sure.", "Great question! Sure."),
        ("I have 3 cats, 2 dogs and a wow-factor.", "I have 3 cats, 2 dogs and a wow-factor."),
        ("我们九点开门。", "我们九点开门。"),
    ],
)
def test_unspeakable_parts_are_removed(text: str, expected: str) -> None:
    assert spoken(text) == expected


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([
        "Hello", " there", ".", "\n", "- ", "1. ", "**bold**", "`x`", "```", "code", "http",
        "s://a.b/c", " www.", "site.org", " 42", "% ", "#", "wh", "at", "😀", "_", "\n\n",
    ]), max_size=30),
    st.lists(st.integers(0, 400), max_size=12),
)
def test_the_result_does_not_depend_on_the_delta_boundaries(
    parts: list[str], cuts: list[int]
) -> None:
    text = "".join(parts)
    whole = spoken(text)
    assert spoken(text, cuts) == whole
    assert "`" not in whole and "**" not in whole
    assert not re.search(r"https?://|www\.", whole)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(categories=("Lu", "Ll", "Nd")) | st.sampled_from(" .,!?'"),
               max_size=80))
def test_plain_sentences_pass_unchanged(text: str) -> None:
    text = re.sub(r" {2,}", " ", text)
    assert spoken(text) == text.lstrip(" ")  # (a line's leading spaces are dropped)

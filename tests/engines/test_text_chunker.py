"""Clause chunker: table tests plus hypothesis properties (exact concatenation, limits,
independence from delta boundaries, no split inside numbers, URLs or abbreviations)."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engines.text.chunker import Chunker, ChunkerConfig, chunk_size


def run(
    text: str, sizes: list[int] | None = None, config: ChunkerConfig | None = None
) -> list[str]:
    chunker = Chunker(config)
    out: list[str] = []
    i, k = 0, 0
    while i < len(text):
        step = sizes[k % len(sizes)] if sizes else 1
        out += chunker.push(text[i : i + step])
        i, k = i + step, k + 1
    return out + chunker.flush()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Sure thing, I can help with that. It takes a minute or two, no more.",
            ["Sure thing, ", "I can help with that. ", "It takes a minute or two, no more."],
        ),
        (
            "Dr. Smith paid $3.50, i.e. not much. That is all there is to say about it.",
            ["Dr. Smith paid $3.50, ", "i.e. not much. That is all there is to say about it."],
        ),
        (
            "Go to example.com/a.b now. Then we talk about the rest of it all.",
            ["Go to example.com/a.b now. ", "Then we talk about the rest of it all."],
        ),
        (
            "Hello there! Short. Also short. And this one is a longer sentence.",
            ["Hello there! ", "Short. Also short. And this one is a longer sentence."],
        ),
        (
            "It is 3:30 p.m. Tomorrow is another day for sure, my friend.",
            ["It is 3:30 p.m. ", "Tomorrow is another day for sure, my friend."],
        ),
        (
            "Meet J. Smith at 5 p.m. on the dot, or else we go home alone.",
            ["Meet J. Smith at 5 p.m. on the dot, ", "or else we go home alone."],
        ),
        (
            "你好，我是小明。今天天气很好！我们去公园吧",
            ["你好，", "我是小明。今天天气很好！", "我们去公园吧"],
        ),
        (
            "Here is a list:\n- apples and pears\n- bananas with cream",
            ["Here is a list:\n", "- apples and pears\n- bananas with cream"],
        ),
        ("   ", []),
        ("", []),
    ],
)
def test_table(text: str, expected: list[str]) -> None:
    assert run(text) == expected
    assert run(text, [len(text) or 1]) == expected  # one big delta: same chunks


def test_first_chunk_comes_before_the_stream_ends() -> None:
    chunker = Chunker()
    assert chunker.push("Well now, ") == []  # the boundary needs the next word to be sure
    assert chunker.push("let") == ["Well now, "]


def test_long_text_without_punctuation_is_cut_at_spaces() -> None:
    text = " ".join(["word"] * 100)
    chunks = run(text)
    assert "".join(chunks) == text
    assert chunk_size(chunks[0]) <= ChunkerConfig().first_max_chars
    assert all(chunk_size(c) <= ChunkerConfig().max_chars for c in chunks)
    assert all(c.endswith(" ") for c in chunks[:-1])


def test_bad_config() -> None:
    with pytest.raises(ValueError):
        Chunker(ChunkerConfig(min_chars=50, max_chars=10))


# --- properties ----------------------------------------------------------------------------

WORDS = st.sampled_from(
    [
        "the",
        "a",
        "price",
        "is",
        "3.50",
        "1,000,000",
        "42",
        "-7",
        "12:45",
        "e.g.",
        "Dr.",
        "U.S.",
        "etc.",
        "example.com/x.y",
        "https://a.b/c?d=1",
        "hello",
        "world",
        "okay",
        "2024",
        "3.14159",
        "a.m.",
        "p.m.",
        "J.",
        "你好",
        "天气",
        "很好",
    ]
)
PUNCT = st.sampled_from(["", "", "", ",", ".", "!", "?", ";", ":", "...", "，", "。", '."', "\n"])
SPACE = st.sampled_from([" ", " ", " ", "  ", "\n", ""])
PROTECTED = re.compile(
    r"-?\d(?:,?\d)*(?:\.\d+)?|\d+:\d+|https?://[\w./?=:&-]+|\w+\.com/[\w./-]+"
    r"|\b(?:e\.g|i\.e|U\.S|a\.m|p\.m)\.|Dr\.",
    re.ASCII,
)


@st.composite
def agent_text(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.tuples(WORDS, PUNCT, SPACE), min_size=1, max_size=60))
    return "".join(w + p + s for w, p, s in parts)


@st.composite
def splits(draw: st.DrawFn) -> list[int]:
    return draw(st.lists(st.integers(1, 12), min_size=1, max_size=20))


CONFIGS = st.builds(
    lambda a, b, c, d: ChunkerConfig(a, a + b, c, c + d),
    st.integers(1, 20),
    st.integers(30, 80),
    st.integers(1, 40),
    st.integers(40, 160),
)


@settings(max_examples=300, deadline=None)
@given(agent_text(), splits(), CONFIGS)
def test_chunks_are_exact_and_split_independent(
    text: str, sizes: list[int], cfg: ChunkerConfig
) -> None:
    chunks = run(text, sizes, cfg)
    if text.strip():
        assert "".join(chunks) == text
    else:
        assert chunks == []
    assert all(c.strip() for c in chunks)
    assert chunks == run(text, None, cfg)  # char by char gives the same chunks


@settings(max_examples=300, deadline=None)
@given(agent_text(), splits(), CONFIGS)
def test_limits_hold(text: str, sizes: list[int], cfg: ChunkerConfig) -> None:
    chunks = run(text, sizes, cfg)
    longest_token = max((chunk_size(t) for t in text.split()), default=0)
    for n, chunk in enumerate(chunks):
        lo, hi = (
            (cfg.first_min_chars, cfg.first_max_chars) if n == 0 else (cfg.min_chars, cfg.max_chars)
        )
        if n < len(chunks) - 1:
            assert chunk_size(chunk) >= lo, chunk
        # Over the limit only when no space or boundary was available past the minimum.
        assert chunk_size(chunk) <= hi or chunk_size(chunk) <= lo + 2 * longest_token + 4, chunk


@settings(max_examples=300, deadline=None)
@given(agent_text(), splits())
def test_no_split_inside_numbers_urls_or_abbreviations(text: str, sizes: list[int]) -> None:
    chunks = run(text, sizes)
    cuts, pos = set(), 0
    for chunk in chunks[:-1]:
        pos += len(chunk)
        cuts.add(pos)
    for m in PROTECTED.finditer(text):
        # A cut may follow a protected token's whitespace, never fall inside or right after it.
        assert not any(m.start() < c <= m.end() for c in cuts), (m.group(0), chunks)


def test_cut_gives_the_text_so_far_at_its_last_clause_or_word() -> None:
    chunker = Chunker()
    assert chunker.push("Sure. Improving your sleep, in short, can be achie") == ["Sure. "]
    assert chunker.cut() == ["Improving your sleep, in short, "]  # the clause boundary
    assert chunker.push("ved by keeping a sched") == []
    assert chunker.cut() == ["can be achieved by keeping a "]  # before the word arriving
    assert chunker.cut() == []  # "sched" may still grow
    assert chunker.push("ule. ") == [] and chunker.flush() == ["schedule. "]


def test_cut_keeps_numbers_whole_and_skips_tiny_chunks() -> None:
    chunker = Chunker()
    assert chunker.push("Hi, the fee is 3") == ["Hi, "]
    assert chunker.cut() == ["the fee is "]
    assert chunker.push(".5 pounds") == [] and chunker.cut() == []  # "3.5 " is under 8
    assert chunker.flush() == ["3.5 pounds"]


@pytest.mark.parametrize("sizes", [None, [3], [17]])
def test_max_sentences_ends_the_text_at_that_sentence(sizes: list[int] | None) -> None:
    text = "Sure. Go to the login page.\nClick the link. Then type it again. Done."
    config = ChunkerConfig(max_sentences=3)
    chunks = run(text, sizes, config)
    assert "".join(chunks) == "Sure. Go to the login page.\nClick the link. "
    chunker = Chunker(config)
    assert len(chunker.push(text)) == 3 and chunker.closed  # decided before the text ends
    assert chunker.push("More. ") == [] and chunker.cut() == []
    assert chunker.flush() == [] and not chunker.closed  # reset for reuse
    titled = "Dr. Smith is in. Mr. Jones is out. Both are. Not this."
    assert "".join(run(titled, sizes, config)) == "Dr. Smith is in. Mr. Jones is out. Both are. "


def test_growth_bounds_each_later_chunk_by_the_one_before() -> None:
    """A short first chunk and a long sentence after it: with growth 3 each later chunk is
    cut (at its last clause boundary or space) before it outgrows 3 x the chunk before it,
    never under min_chars; the text still joins up exactly."""
    text = ("The capital of France is Paris, a city on the river Seine, famous for the Eiffel "
            "Tower and its museums. It has about two million people.")
    plain = run(text, None, ChunkerConfig(first_max_chars=12))
    grown = run(text, None, ChunkerConfig(first_max_chars=12, growth=3.0))
    assert "".join(grown) == text
    assert plain[1].endswith("museums. ")  # without growth: the whole sentence at once
    assert grown[0] == plain[0] == "The capital "  # the first chunk is unchanged
    sizes = [chunk_size(c) for c in grown]
    assert all(size <= max(20, 3 * before) for before, size in itertools.pairwise(sizes))
    assert len(grown) > len(plain) and grown[-1] == plain[-1]  # short sentences stay whole


def test_growth_is_off_by_default_and_never_negative() -> None:
    assert ChunkerConfig().growth == 0.0
    with pytest.raises(ValueError):
        Chunker(ChunkerConfig(growth=-1.0))

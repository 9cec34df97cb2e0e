"""docs/configuration.md is what `python -m rtc_server.config_reference` writes now, and every
config field carries the comment that page is made of."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from rtc_server.config import Config
from rtc_server.config_reference import (
    PAGE,
    UndocumentedField,
    render,
    rows,
    stale_fallbacks,
)


@dataclass(frozen=True)
class _Commented:
    plain: int = 1  # beside the field
    # above the field,
    # on two lines
    above: str = "a"
    # a pair: the second shares this comment
    secret: str | None = None
    secret_env: str = "ENV"
    # --- extra ---
    listed: tuple[str, ...] = ("x",)  # in a sub-table


@dataclass(frozen=True)
class _Bare:
    described: int = 1  # a comment beside it does not cover the next field
    bare: int = 2


def test_the_page_is_what_the_generator_writes_now() -> None:
    """Regression: the README's option tables drifted from the config classes (keys added
    without a row, defaults changed in one place only)."""
    assert PAGE.read_text(encoding="utf-8") == render(), (
        "docs/configuration.md is stale: run "
        "`python -m rtc_server.config_reference > docs/configuration.md`")


def test_every_key_of_every_section_has_a_row() -> None:
    page = render()
    config = Config()
    for section in dataclasses.fields(config):
        assert f"## `[{section.name}]`" in page
        for key in dataclasses.fields(getattr(config, section.name)):
            assert f"`{key.name}`" in page, f"{section.name}.{key.name}"


def test_comments_above_beside_and_shared_make_the_rows() -> None:
    found = rows(_Commented)
    assert [r.names for r in found] == [("plain",), ("above",), ("secret", "secret_env"),
                                       ("listed",)]
    assert found[0].text == "beside the field"
    assert found[1].text == "above the field, on two lines"
    assert found[2].defaults == ("unset", '`"ENV"`')
    assert found[2].types == ("str (optional)", "str")
    assert (found[3].group, found[3].defaults, found[3].types) == (
        "extra", ('`["x"]`',), ("list of str",))


def test_a_field_without_a_comment_stops_the_generator() -> None:
    with pytest.raises(UndocumentedField, match=r"_Bare\.bare"):
        rows(_Bare)


def test_no_fallback_text_stands_beside_a_source_comment() -> None:
    """A field that gained a comment in its source must lose its fallback text, so the page
    has one text per key."""
    assert stale_fallbacks() == []

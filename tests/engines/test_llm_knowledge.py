"""The deployment's facts without a model: loading and its errors, where the facts go in the
prompt (cached prefix or per-question retrieval), and that the prompt prefix never changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from engines.llm import ChatMessage, LLMConfig, create_llm
from engines.llm.errors import InvalidInputError, ModelLoadError
from engines.llm.knowledge import INLINE_MAX_CHARS, MAX_FILE_BYTES, Knowledge, KnowledgeError
from engines.llm.personas import KNOWLEDGE_DIR, example_knowledge
from engines.llm.prompt import PromptBuilder


def test_the_example_files_are_small_enough_to_live_in_the_cached_prompt() -> None:
    for name in ("bank", "tutor"):
        path = example_knowledge(name)
        assert path is not None and path.parent == KNOWLEDGE_DIR
        facts = Knowledge.load(path)
        assert facts.inline and len(facts.sections) >= 4
    assert example_knowledge("companion") is None


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "does not exist"),
        (b"", "is empty"),
        (b"  \n\n ", "is empty"),
        (b"\x00\x01\x02binary", "is binary"),
        (b"\xff\xfe caf\xe9", "is not UTF-8"),
        (b"x" * (MAX_FILE_BYTES + 1), "the limit is"),
    ],
)
def test_unusable_files_are_named_in_a_clear_error(
    tmp_path: Path, content: bytes | None, problem: str
) -> None:
    path = tmp_path / "facts.md"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(KnowledgeError, match=problem) as err:
        Knowledge.load(path)
    assert str(path) in str(err.value)
    assert isinstance(err.value, ModelLoadError)  # the server stops at start-up on it


def test_a_bad_knowledge_file_stops_the_engine_before_any_model_loads(tmp_path: Path) -> None:
    with pytest.raises(KnowledgeError, match="does not exist"):
        create_llm(LLMConfig(persona="bank", knowledge=str(tmp_path / "missing.md")))


def test_inline_facts_sit_in_the_system_prompt_and_the_prefix_never_changes() -> None:
    builder = PromptBuilder.for_persona("bank", "Ava")
    assert "0800 123 4568" in builder.system and builder.retriever is None
    assert "- Lost or stolen card: " in builder.system  # one fact per line, labelled
    first = builder.messages([ChatMessage("user", "When are you open?")])
    later = builder.messages([
        ChatMessage("user", "When are you open?"), ChatMessage("assistant", "From nine."),
        ChatMessage("user", "And on Saturday?"),
    ])
    # What the model read for the first turn is exactly the start of the second prompt.
    assert later[: len(first)] == first and first[0].role == "system"
    assert [m.role for m in later] == ["system", "user", "assistant", "user"]
    assert later[-1].content.startswith("And on Saturday?")
    assert builder.reminder is not None and later[-1].content.endswith(builder.reminder)
    # "" means no facts at all: the persona then says it has no such information.
    bare = PromptBuilder.for_persona("bank", "Ava", knowledge="")
    assert "0800" not in bare.system and "no information" in bare.system
    assert bare.reminder is None


def test_comments_in_a_knowledge_file_are_not_facts(tmp_path: Path) -> None:
    path = tmp_path / "facts.md"
    path.write_text("# Shop\n<!-- TODO: ask Sam about Sundays -->\nWe open at 8:00.\n")
    builder = PromptBuilder.for_persona("bank", "Ava", knowledge=str(path))
    assert "8:00" in builder.system and "Sam" not in builder.system


def test_large_files_are_searched_per_question(tmp_path: Path) -> None:
    sections = [f"## Branch {i}\nThe branch in town {i} sells postcards." for i in range(300)]
    sections.insert(137, "## Lost cards\nCall the card line on 0800 999 111 to block a lost card.")
    path = tmp_path / "big.md"
    path.write_text("\n\n".join(sections))
    builder = PromptBuilder.for_persona("bank", "Ava", knowledge=str(path))
    assert len(path.read_text()) > INLINE_MAX_CHARS and builder.retriever is not None
    assert "0800 999 111" not in builder.system  # not in the cached prefix...
    history = [ChatMessage("user", "Hi"), ChatMessage("assistant", "Hello!")]
    msgs = builder.messages([*history, ChatMessage("user", "I lost my card. Who do I call?")])
    # Earlier turns carry no facts: only the newest question pays for its own.
    assert msgs[1] == ChatMessage("user", f"Hi\n{builder.reminder}") and msgs[2] == history[1]
    assert "0800 999 111" in msgs[-1].content  # ...but with the question it answers
    assert "I lost my card. Who do I call?" in msgs[-1].content
    none = builder.messages([ChatMessage("user", "zebra xylophone")])
    assert "FACTS:\n(none)" in none[-1].content


def test_chinese_questions_find_chinese_sections(tmp_path: Path) -> None:
    text = "\n\n".join(
        [f"## 分行{i}\n这家分行在城市{i}，出售明信片和地图。" for i in range(600)]
        + ["## 挂失\n银行卡丢失请拨打挂失电话 95588。"]
    )
    path = tmp_path / "zh.md"
    path.write_text(text)
    builder = PromptBuilder.for_persona("bank", "Ava", knowledge=str(path))
    assert builder.retriever is not None
    msgs = builder.messages([ChatMessage("user", "我的银行卡丢失了，怎么挂失？")])
    assert "95588" in msgs[-1].content


def test_the_last_message_must_be_the_users() -> None:
    builder = PromptBuilder.for_persona("companion")
    with pytest.raises(InvalidInputError):
        builder.messages([ChatMessage("user", "hi"), ChatMessage("assistant", "hello")])
    with pytest.raises(InvalidInputError):
        builder.messages([ChatMessage("user", "   ")])

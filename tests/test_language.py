"""`[conversation] language = "zh"`: one key switches hearing, persona, voice and phrases; the
Chinese personas, facts, backchannels and the exact text of spoken chunks."""

from __future__ import annotations

from pathlib import Path

import pytest

from engines.llm import LLMConfig, build_prompt
from engines.llm.personas import persona, system_prompt
from engines.text.heard import heard_prefix, word_count
from engines.text.zh_numbers import has_cjk
from engines.text.zh_script import to_simplified
from engines.voicing import SpokenChunks
from rtc_server.agent import is_backchannel, is_false_interruption, is_real_interruption
from rtc_server.config import load_config
from rtc_server.errors import ConfigError


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_one_key_switches_the_conversation_to_chinese(tmp_path: Path) -> None:
    config = load_config(_config(tmp_path, '[conversation]\nlanguage = "zh"\n'))
    assert config.asr.language == "zh" and config.llm.language == "zh"
    assert config.tts.engine == "kokoro" and config.tts.voice == "zm_yunxia"
    for text in (config.agent.greeting, config.agent.apology, config.llm.apology,
                 config.llm.holding_phrase, config.llm.agent_name, config.agent.clarify_topic,
                 config.agent.clarify_again):
        assert has_cjk(text) and to_simplified(text) == text, text
    assert "{topic}" in config.agent.clarify_topic
    assert config.agent.unsure_below == 0.0  # Whisper's confidence measured in English only
    english = load_config(None)
    assert english.tts.engine == "auto" and english.asr.language == "en"  # the profile picks
    assert english.agent.unsure_below > 0.0


def test_what_the_file_sets_itself_is_kept(tmp_path: Path) -> None:
    config = load_config(_config(tmp_path, (
        '[conversation]\nlanguage = "zh"\n[agent]\ngreeting = "您好！"\n'
        '[tts]\nengine = "kokoro"\nvoice = "zm_yunxi"\n'
    )))
    assert config.agent.greeting == "您好！" and config.tts.voice == "zm_yunxi"
    english = load_config(_config(tmp_path, '[tts]\nengine = "kokoro"\n'))
    assert english.tts.voice == "af_heart"


def test_a_voice_of_the_wrong_language_or_no_voice_stops_start_up(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not speak"):
        load_config(_config(tmp_path, (
            '[conversation]\nlanguage = "zh"\n[tts]\nengine = "kokoro"\nvoice = "af_heart"\n'
        )))
    with pytest.raises(ConfigError, match="the 54 voices are: af_alloy"):
        load_config(_config(tmp_path, '[tts]\nengine = "kokoro"\nvoice = "zf_nobody"\n'))
    with pytest.raises(ConfigError, match="language"):
        load_config(_config(tmp_path, '[conversation]\nlanguage = "fr"\n'))


@pytest.mark.parametrize("name", ["companion", "bank", "tutor"])
def test_chinese_personas_are_in_simplified_chinese(name: str) -> None:
    prompt = system_prompt(name, "小艾", "- 事实", language="zh")
    assert "小艾" in prompt and "rtc-avatar" in prompt and to_simplified(prompt) == prompt
    assert persona(name, "zh").reminder.startswith("（")
    if name != "companion":
        builder = build_prompt(LLMConfig(persona=name, language="zh"))
        assert "FACTS:" in builder.system and has_cjk(builder.facts)
        assert "<!--" not in builder.system  # the maintainers' notes stay out
        lines = [line for line in builder.system.splitlines() if line.startswith("- ")]
        assert len(lines) >= 10  # one fact a line, each with its heading


def test_chinese_is_chunked_at_its_punctuation_and_kept_exact() -> None:
    answer = "您好！网点周一到周五9:00到17:00营业，周六9:00到13:00营业。还有什么可以帮您？"
    chunks = SpokenChunks().all(answer)
    assert len(chunks) >= 3 and "".join(chunks) == answer
    assert chunks[0] == "您好！"
    mixed = "请在App里点击Cards，然后选择冻结卡片。"
    assert "".join(SpokenChunks().all(mixed)) == mixed


def test_what_was_heard_of_a_chunk_is_an_exact_slice() -> None:
    """Regression: the heard part of a cut chunk was counted in space-separated words, so a
    Chinese chunk (no spaces) was all or nothing, and chunks were joined with spaces."""
    text = "转账通常在两小时内到账。"
    assert word_count(text) == 12
    assert heard_prefix(text, 0.5) == "转账通常在两"
    assert heard_prefix("The answer is forty two. ", 0.5) == "The answer"
    assert heard_prefix(text, 0.0) == "" and heard_prefix(text, 1.0) == text


def test_chinese_backchannels_and_stop_words() -> None:
    for text in ("嗯", "嗯嗯", "好的", "对对", "嗯，对对"):
        assert is_backchannel(text) and not is_real_interruption(text), text
    for text in ("等一下", "不是这个意思", "别说了"):
        assert is_real_interruption(text), text
    assert is_false_interruption("你好", 0.4, 0.7)  # a short sound read as two characters
    assert not is_false_interruption("停", 0.4, 0.7)  # one character that means stop


def test_the_chinese_reminder_names_the_scope_briefly() -> None:
    """The reminder rides with every question: its scope is the first item, as in English
    (the Chinese scopes are listed with "、" and "，", not ",")."""
    from engines.llm.personas import persona

    assert "这家银行有关" in persona("bank", "zh").reminder
    assert "办理流程" not in persona("bank", "zh").reminder
    assert "about the bank," in persona("bank", "en").reminder

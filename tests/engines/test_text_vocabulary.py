"""The deployment's words from its facts file (engines/text/vocabulary.py): its topics and
names for Whisper's prompt and for asking back."""

from __future__ import annotations

from engines.llm.personas import example_knowledge
from engines.text.vocabulary import guess_topic, phrases, prompt_from

FACTS = """# Harbor Street Bank

<!-- A comment with Secret Words is not read. -->

## Branch opening hours
Branches are open Monday to Friday. The Easy Saver account pays 3.1% AER.
Visitors from the Bank of England use the app.
"""


def test_headings_and_names_not_sentence_starts_or_comments() -> None:
    found = phrases(FACTS)
    assert found[:2] == ("Harbor Street Bank", "Branch opening hours")
    assert {"Monday", "Friday", "Easy Saver", "AER", "Bank of England"} <= set(found)
    assert "Branches" not in found and "Visitors" not in found  # a sentence's first word
    assert not any("Secret" in p for p in found)


def test_the_prompt_names_the_agent_first_and_keeps_to_its_budget() -> None:
    prompt = prompt_from(FACTS, ("Ava",), max_words=6)
    assert prompt.startswith("Ava, Harbor Street Bank")
    assert len(prompt.replace(",", " ").split()) <= 6 and prompt.endswith(".")
    assert prompt_from("", ()) == ""


def test_a_topic_is_guessed_only_where_the_words_sound_like_it() -> None:
    path = example_knowledge("bank")
    assert path is not None
    topics = phrases(path.read_text())
    assert guess_topic("Win does phone sup port clothes in the evening?", topics) == (
        "Phone support")
    assert guess_topic("What is the capital of France?", topics) is None
    assert guess_topic("", topics) is None


def test_whisper_s_prompt_is_the_deployment_s_words_only_where_asked_and_english() -> None:
    import dataclasses

    from engines.asr import AsrConfig
    from rtc_server.config import Config
    from rtc_server.engine_set import biased

    config = Config()
    prompt = biased(config, FACTS).asr.prompt
    assert prompt is not None and prompt.startswith("Ava, Harbor Street Bank")
    assert biased(config, "").asr.prompt is None  # no facts: Whisper's own default
    own = dataclasses.replace(config, asr=AsrConfig(prompt="Mine."))
    assert biased(own, FACTS).asr.prompt == "Mine."  # a prompt set is kept
    off = dataclasses.replace(config, asr=AsrConfig(bias=False))
    assert biased(off, FACTS).asr.prompt is None
    chinese = dataclasses.replace(config, asr=AsrConfig(language="zh"))
    assert biased(chinese, FACTS).asr.prompt is None  # keeps the Simplified-script prompt

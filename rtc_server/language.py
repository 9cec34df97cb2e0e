"""The conversation's language: one key, `[conversation] language`, switches every stage.

`localize(config)` returns the config with the language's defaults in every field that is
still at its English default, so a TOML file sets `language = "zh"` and nothing else, and
still may set any of these fields itself:

- hearing: `[asr] language` (Whisper, Simplified output);
- thinking: `[llm] language` (the personas and example knowledge files in Chinese,
  `engines.llm.personas_zh`), the agent's name, holding phrase and apology;
- speaking: `[tts]` Kokoro-82M with its default voice for the language (piper has no Mandarin
  voice: `engine = "piper"` or "auto" becomes "kokoro" for Chinese), the greeting and the
  apology.

The chunker (Chinese punctuation), normalization (Chinese numerals, `engines.text.zh_numbers`)
and the agent's backchannels and stop words follow the text itself and need no switch. A
voice that cannot speak the language stops start-up, named.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engines.tts.kokoro import DEFAULT_VOICES as KOKORO_VOICES
from rtc_server.errors import ConfigError

if TYPE_CHECKING:
    from rtc_server.config import Config

LANGUAGES = ("en", "zh")
_CHINESE = {
    "agent_name": "小艾",
    "greeting": "你好，我是小艾。你想聊些什么？",
    "apology": "抱歉，我这边出了点问题。您能再说一遍吗？",
    "holding_phrase": "嗯，让我想一想。",
    "llm_apology": "抱歉，我现在回答不了。您能再说一遍吗？",
}


@dataclass(frozen=True)
class ConversationConfig:
    # "en" or "zh": the language of the whole conversation (see rtc_server/language.py)
    language: str = "en"

    def __post_init__(self) -> None:
        if self.language not in LANGUAGES:
            raise ValueError(f"language must be one of {LANGUAGES}, got {self.language!r}")


def _default(section: object, name: str) -> object:
    return next(f.default for f in dataclasses.fields(type(section)) if f.name == name)  # type: ignore[arg-type]


def _unset(section: object, name: str) -> bool:
    return bool(getattr(section, name) == _default(section, name))


def _zh(section: object, name: str, key: str) -> str:
    """The field's value, or the Chinese default where it is at its English one."""
    return _CHINESE[key] if _unset(section, name) else str(getattr(section, name))


def localize(config: Config) -> Config:
    """`config` with the conversation language's defaults (see the module docstring)."""
    language = config.conversation.language
    tts = config.tts
    if language == "zh" and tts.engine in ("piper", "auto"):
        tts = dataclasses.replace(tts, engine="kokoro")
    if tts.engine == "kokoro" or tts.voice is not None:  # "auto" may become Kokoro
        voice = tts.voice or KOKORO_VOICES[language]
        if (voice[0] == "z") != (language == "zh"):
            raise ConfigError(
                f"[tts] voice {voice!r} does not speak the conversation's language "
                f"{language!r} (Mandarin voices start with z, English ones with a or b)"
            )
        tts = dataclasses.replace(tts, voice=voice)
    if language == "en":
        return dataclasses.replace(config, tts=tts)
    asr, llm, agent = config.asr, config.llm, config.agent
    if _unset(asr, "language"):
        asr = dataclasses.replace(asr, language="zh")
    llm = dataclasses.replace(
        llm, language="zh",
        agent_name=_zh(llm, "agent_name", "agent_name"),
        holding_phrase=_zh(llm, "holding_phrase", "holding_phrase"),
        apology=_zh(llm, "apology", "llm_apology"),
    )
    agent = dataclasses.replace(
        agent, greeting=_zh(agent, "greeting", "greeting"),
        apology=_zh(agent, "apology", "apology"),
    )
    return dataclasses.replace(config, asr=asr, llm=llm, tts=tts, agent=agent)

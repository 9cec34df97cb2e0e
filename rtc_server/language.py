"""The conversation's language: one key, `[conversation] language`, switches every stage.

`localize(config)` (`rtc_server.config`) returns the config with the language's defaults in
every field that is still at its English default, so a TOML file sets `language = "zh"` and
nothing else, and still may set any of these fields itself:

- hearing: `[asr] language` (Whisper, Simplified output);
- thinking: `[llm] language` (the personas and example knowledge files in Chinese,
  `engines.llm.personas_zh`), the agent's name, holding phrase and apology;
- speaking: `[tts]` Kokoro-82M with its default voice for the language (piper has no Mandarin
  voice: `engine = "piper"` or "auto" becomes "kokoro" for Chinese), the greeting and the
  apology.

The chunker (Chinese punctuation), normalization (Chinese numerals, `engines.text.zh_numbers`)
and the agent's backchannels and stop words follow the text itself and need no switch. A
voice that cannot speak the language stops start-up, named.

Here are the section, the Chinese defaults and the voice's rule; `localize` is with the whole
config in `rtc_server.config`, which imports this module (never the reverse).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from engines.tts.config import TTSConfig
from engines.tts.kokoro import DEFAULT_VOICES as KOKORO_VOICES
from rtc_server.errors import ConfigError

LANGUAGES = ("en", "zh")
_CHINESE = {
    "agent_name": "小艾",
    "greeting": "你好，我是小艾。你想聊些什么？",
    "apology": "抱歉，我这边出了点问题。您能再说一遍吗？",
    "holding_phrase": "嗯，让我想一想。",
    "llm_apology": "抱歉，我现在回答不了。您能再说一遍吗？",
    "clarify_topic": "抱歉，我没听清楚。您是想问{topic}吗？",
    "clarify_again": "抱歉，我没听清楚。您能再说一遍吗？",
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


def unset(section: object, name: str) -> bool:
    """Whether the field is still at its default (the English one)."""
    return bool(getattr(section, name) == _default(section, name))


def chinese(section: object, name: str, key: str) -> str:
    """The field's value, or the Chinese default where it is at its English one."""
    return _CHINESE[key] if unset(section, name) else str(getattr(section, name))


def speaking(tts: TTSConfig, language: str) -> TTSConfig:
    """`[tts]` for the language: Kokoro for Chinese where piper (or "auto") was asked for, and
    Kokoro's default voice for the language; `ConfigError` for a voice that cannot speak it."""
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
    return tts

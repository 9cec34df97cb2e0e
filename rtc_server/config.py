"""Server configuration: one frozen dataclass tree, loaded from an optional TOML file.

Sections: [server], [ice], [relay] (TURN), [media], [cluster], and one per engine kind
([turn] is the end-of-turn model). Every key has a default (the embedded offline setup), so
no file is needed. Example: `config.example.toml`.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from engines.asr.config import AsrConfig
from engines.face.config import FaceConfig
from engines.llm.config import LLMConfig
from engines.text.chunker import FIRST_CHUNK_MAX_CHARS
from engines.tts.config import TTSConfig
from engines.turn.config import TurnConfig
from engines.vad.config import VadConfig
from rtc_server.cluster.config import ClusterConfig
from rtc_server.dataconf import from_dict
from rtc_server.errors import ConfigError
from rtc_server.language import ConversationConfig, chinese, speaking, unset
from rtc_server.rtvi.config import EmbedConfig
from signaling.turn_credentials import RelayConfig

Mode = Literal["agent", "echo"]
ProfileMode = Literal["auto", "quality", "fast", "fixed"]


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8080
    # "agent": the conversation; "echo": transport test mode, each user utterance is played
    # back after they stop (no models loaded).
    mode: Mode = "agent"
    # Concurrent sessions; more offers get 503.
    max_sessions: int = 4
    # Bearer token required on /api/* when set (or from the env var named below).
    auth_token: str | None = None
    auth_token_env: str = "RTC_AVATAR_TOKEN"
    # Request bodies above this get 413 (an SDP offer is a few KiB).
    max_body_bytes: int = 64 * 1024
    # A session that is not connected this long after its answer is closed.
    connect_timeout_s: float = 15.0
    log_level: str = "INFO"

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port {self.port} out of range")
        if self.max_sessions < 1:
            raise ValueError("max_sessions must be at least 1")
        if self.max_body_bytes < 1024:
            raise ValueError("max_body_bytes must be at least 1024")
        if self.connect_timeout_s <= 0:
            raise ValueError("connect_timeout_s must be positive")

    def token(self) -> str | None:
        return self.auth_token or os.environ.get(self.auth_token_env) or None


@dataclass(frozen=True)
class IceServer:
    urls: tuple[str, ...]
    username: str | None = None
    credential: str | None = None

    def __post_init__(self) -> None:
        for url in self.urls:
            if not url.startswith(("stun:", "turn:", "turns:")):
                raise ValueError(f"ICE server url {url!r} must start with stun:, turn: or turns:")

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"urls": list(self.urls)}
        if self.username is not None:
            out["username"] = self.username
        if self.credential is not None:
            out["credential"] = self.credential
        return out


@dataclass(frozen=True)
class IceConfig:
    # STUN/TURN servers for both the server's peer and the page. Default: none (no traffic to
    # any public server); add a TURN server for clients behind NATs.
    servers: tuple[IceServer, ...] = ()
    # Gather only 127.0.0.1 host candidates (tests and local demos; see rtc_server/ice.py).
    loopback_only: bool = False


@dataclass(frozen=True)
class MediaConfig:
    width: int = 512
    height: int = 512
    fps: int = 25
    # Portrait image path; default skimage.data.astronaut().
    portrait: str | None = None
    # Where the portrait's warp runs: "cpu" (OpenCV) or "cuda" / "cuda:N" (torch, one CUDA
    # graph per portrait: engines/face/gpu_warp.py); the paste and the mouth stay on the CPU.
    render_device: str = "cpu"

    def __post_init__(self) -> None:
        if self.render_device != "cpu" and not self.render_device.startswith("cuda"):
            raise ValueError(f'render_device must be "cpu" or "cuda[:N]", got '
                             f'{self.render_device!r}')
        if not (16 <= self.width <= 1920 and 16 <= self.height <= 1920):
            raise ValueError("width and height must be within 16..1920")
        if self.width % 2 or self.height % 2:
            raise ValueError("width and height must be even (yuv420p)")
        if not 1 <= self.fps <= 60:
            raise ValueError("fps must be within 1..60")


@dataclass(frozen=True)
class AgentConfig:
    # Spoken on connect, before the user says anything ("" = no greeting).
    greeting: str = "Hi, I'm Ava. What would you like to talk about?"
    # User speech this long while the agent speaks pauses it (barge-in).
    barge_in_min_ms: int = 150
    # ... if it is also within this many dB of the user's own level (learnt from the turns
    # answered): quieter speech (a television, a room) talks over the answer without stopping
    # it, unless its words ask something (then it stops it once they show it: a partial
    # after false_interruption_max_ms, or its first pause). 0 = any level interrupts at once
    barge_in_level_margin_db: float = 10.0
    # Quieter speech pauses the answer anyway while its words are heard (a question then
    # stops it, anything else resumes it), this many times a session: a user quieter than
    # their first question stops the voice as fast as a loud one, a television under the
    # answer pauses it this often before only its words can. 0 = never (needs
    # resume_false_interruption)
    quiet_pauses: int = 1
    # After a barge-in, an utterance with no words or only backchannel words ("mm-hm",
    # "yeah", a cough) resumes the answer from the word it was cut in; false: every barge-in
    # ends the answer.
    resume_false_interruption: bool = True
    # A barge-in utterance that goes on this long with words is a real interruption; one
    # with no words by twice this (music, a fan) resumes the answer and talks over it.
    false_interruption_max_ms: int = 1200
    # A barge-in shorter than this with at most two words (none of them "stop", "wait", ...)
    # is a false interruption too: Whisper writes coughs and hums as a word or two.
    false_interruption_short_ms: int = 700
    # An interruption with words that looks false ("This.") is judged on all the user says:
    # the answer stays paused this long for more speech, which joins it; 0 = judged at once
    false_interruption_wait_ms: int = 600
    # Start the LLM on the stable partial transcript when the user pauses, before the endpoint.
    start_early: bool = True
    # With start_early: start it sooner, on the early pause decode's text (`[vad]
    # decode_ahead_ms` into a silence), so the answer's first audio can be ready when the turn
    # ends. Where the LLM and TTS have their own hardware (a GPU profile); on a few CPU cores
    # the speculative answer competes with the pause decode and the turn model it waits for.
    start_on_early_decode: bool = False
    # While the user talks, let the LLM evaluate their words so far (partial transcripts), so
    # the end of the turn leaves it only what changed to read (`ChatLLM.warm`): measured on
    # 2 cores, the first token 100 ms sooner, the end of turn 25-45 ms later (it competes
    # with the ASR), voice-to-voice 60-90 ms sooner at p50 (bench/RESULTS.md).
    warm_llm: bool = True
    # The first spoken chunk ends at the first clause boundary, or is cut at a space past
    # this many characters: shorter means earlier first audio, at some cost in prosody.
    first_chunk_max_chars: int = FIRST_CHUNK_MAX_CHARS
    # Later chunks end at sentence ends; when the voice would run dry within this many ms
    # plus the TTS's time for the text waiting (measured: the profile's `Pace`), the next
    # chunk is cut now, at the last clause boundary or word: a short pause instead of dead
    # air. 0 = off.
    runway_ms: int = 300
    # An answer ends after this many sentences (the generation stops there), whatever the
    # model writes: the personas ask for one to three, a small model sometimes reads out a
    # list of eight. 0 = no limit.
    max_sentences: int = 3
    # Longest answer, in tokens (the LLM's own cap also applies).
    max_new_tokens: int = 120
    # Scheduling margin before the first audio frame of an utterance. The tracks read the
    # playout by frame index when they send, on the loop that schedules, so one frame is
    # enough (60 -> 20 took ~60 ms off voice-to-voice, bench/RESULTS.md).
    lead_ms: int = 20
    # Said when a stage fails mid-turn (the LLM's own apology covers LLM failures).
    apology: str = "Sorry, something went wrong on my side. Could you say that again?"
    # Words the ASR is less sure of than this (its mean token probability, `PauseText.
    # confidence`) are not answered: the agent asks back (agent.py); 0 = never. Whisper base
    # on 3 voices x clean/15/5 dB: 0 of 133 utterances heard right below 0.55, 38 of 65 with
    # a word error rate of 0.25 or more (bench/RESULTS.md, hearing)
    unsure_below: float = 0.55
    # Asked back when unsure of the words: about the deployment's topic they sound most like
    # ("{topic}": a heading or name of the facts file), else the second
    clarify_topic: str = "Sorry, I'm not sure I heard you right. Did you ask about {topic}?"
    clarify_again: str = "Sorry, I didn't quite catch that. Could you say it again?"

    def __post_init__(self) -> None:
        if self.barge_in_level_margin_db < 0:
            raise ValueError("barge_in_level_margin_db must be >= 0 (0 = off)")
        if self.quiet_pauses < 0:
            raise ValueError("quiet_pauses must be >= 0 (0 = quiet speech never pauses)")
        if min(self.barge_in_min_ms, self.lead_ms, self.runway_ms, self.max_sentences) < 0 or (
            self.max_new_tokens < 1
        ):
            raise ValueError(
                "barge_in_min_ms, lead_ms, runway_ms and max_sentences must be >= 0, "
                "max_new_tokens >= 1"
            )
        if not 0 <= self.false_interruption_wait_ms <= 5000:
            raise ValueError("false_interruption_wait_ms must be within 0..5000")
        if not 0.0 <= self.unsure_below < 1.0:
            raise ValueError("unsure_below must be within [0, 1)")
        try:
            self.clarify_topic.format(topic="")
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError("clarify_topic may hold only the {topic} placeholder") from exc
        if self.false_interruption_max_ms < self.barge_in_min_ms:
            raise ValueError("false_interruption_max_ms must be >= barge_in_min_ms")
        if self.first_chunk_max_chars < 3:
            raise ValueError("first_chunk_max_chars must be at least 3")


@dataclass(frozen=True)
class ProfileConfig:
    # "auto": measure this machine once (cached) and pick the models and settings that fit
    # the budget below; "quality": the largest bundled models; "fast": the smallest; "fixed":
    # measure nothing, every setting as configured with the built-in defaults (tests,
    # reproducible A/B runs). Explicit model and thread keys override every mode.
    mode: ProfileMode = "auto"
    # The decode of a 2 s question (the pause decode, which the end of a turn waits for)
    # must fit this, beside the video, or the smaller ASR model is used; None: what is left
    # of the pause after the early decode starts ([vad] pause_ms - decode_ahead_ms, 120 ms),
    # so that a confident turn ends at the pause, not when its text comes.
    pause_decode_ms: int | None = None
    # From the endpoint to the answer's first audio: the pause decode, the prefill of the
    # question's last words, the first chunk's tokens and its synthesis.
    first_audio_ms: int = 800
    # The same for a turn the ASR was unsure of, with the second opinion's decode in it
    # ([asr] second_model = "auto"); None: 1.5 x first_audio_ms. Such a turn is otherwise
    # asked back ("did you mean ...?"), which costs the user the whole question again.
    unsure_first_audio_ms: int | None = None
    # The LLM's decode while the voice speaks (beside the TTS and the video) must be this
    # many times the voice's speaking rate, or the answer would run dry mid-sentence.
    margin: float = 1.5

    def __post_init__(self) -> None:
        if self.pause_decode_ms is not None and not 50 <= self.pause_decode_ms <= 5000:
            raise ValueError("pause_decode_ms must be within 50..5000")
        if not 100 <= self.first_audio_ms <= 10_000:
            raise ValueError("first_audio_ms must be within 100..10000")
        if self.unsure_first_audio_ms is not None and not (
                self.first_audio_ms <= self.unsure_first_audio_ms <= 10_000):
            raise ValueError("unsure_first_audio_ms must be within first_audio_ms..10000")
        if not 1.0 <= self.margin <= 10.0:
            raise ValueError("margin must be within 1..10")

    @property
    def unsure_budget_ms(self) -> int:
        """`unsure_first_audio_ms`, or its default: 1.5 x `first_audio_ms`."""
        if self.unsure_first_audio_ms is not None:
            return self.unsure_first_audio_ms
        return round(self.first_audio_ms * 1.5)


@dataclass(frozen=True)
class Config:
    server: ServerConfig = field(default_factory=ServerConfig)
    ice: IceConfig = field(default_factory=IceConfig)
    media: MediaConfig = field(default_factory=MediaConfig)
    vad: VadConfig = field(default_factory=VadConfig)
    asr: AsrConfig = field(default_factory=AsrConfig)
    turn: TurnConfig = field(default_factory=TurnConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    tts: TTSConfig = field(default_factory=TTSConfig)
    face: FaceConfig = field(default_factory=FaceConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    # Time-limited TURN credentials (coturn use-auth-secret) for the page and the server.
    relay: RelayConfig = field(default_factory=RelayConfig)
    # Scale-out: role of this process, the Redis directory (rtc_server/cluster/).
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    # Which models and settings fit this machine (rtc_server/profile.py).
    profile: ProfileConfig = field(default_factory=ProfileConfig)
    # Apps embedding through Pipecat's SDKs: CORS, RTVI limits (rtc_server/rtvi/).
    embed: EmbedConfig = field(default_factory=EmbedConfig)
    # The conversation's language: "zh" switches ASR, persona, voice, phrases (language.py).
    conversation: ConversationConfig = field(default_factory=ConversationConfig)


def localize(config: Config) -> Config:
    """`config` with the conversation language's defaults (see rtc_server/language.py)."""
    language = config.conversation.language
    tts = speaking(config.tts, language)
    if language == "en":
        return dataclasses.replace(config, tts=tts)
    asr, llm, agent = config.asr, config.llm, config.agent
    if unset(asr, "language"):
        asr = dataclasses.replace(asr, language="zh")
    llm = dataclasses.replace(
        llm, language="zh",
        agent_name=chinese(llm, "agent_name", "agent_name"),
        holding_phrase=chinese(llm, "holding_phrase", "holding_phrase"),
        apology=chinese(llm, "apology", "llm_apology"),
    )
    agent = dataclasses.replace(
        agent, greeting=chinese(agent, "greeting", "greeting"),
        apology=chinese(agent, "apology", "apology"),
        clarify_topic=chinese(agent, "clarify_topic", "clarify_topic"),
        clarify_again=chinese(agent, "clarify_again", "clarify_again"),
        # Whisper's confidence was measured on English only: in Chinese no asking back
        # unless the deployment sets a threshold of its own.
        unsure_below=0.0 if unset(agent, "unsure_below") else agent.unsure_below,
    )
    return dataclasses.replace(config, asr=asr, llm=llm, tts=tts, agent=agent)


def load_config(path: str | Path | None = None) -> Config:
    """Defaults, overlaid by the TOML file at `path` if given."""
    if path is None:
        return localize(Config())
    try:
        text = Path(path).read_text()
    except FileNotFoundError as exc:
        raise ConfigError(f"config file not found: {path}") from exc
    return parse_config(text, str(path))


def parse_config(text: str, source: str) -> Config:
    """Defaults, overlaid by the TOML `text` (`source` names it in errors)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: {exc}") from exc
    return localize(from_dict(Config, data))

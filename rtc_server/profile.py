"""The profile: which models and settings fit this machine's latency budget.

`fit(config)` is consulted once, by the composition root (`engine_set.load_engines`). In
`[profile] mode = "auto"` it calibrates the candidates (`rtc_server/calibration.py`) and picks
the first pair, largest LLM first (the answers' quality rides on it), then the larger ASR
model (English: Whisper base, else tiny.en), such that
- the ASR's decode of a 2 s question, beside the video, fits `pause_decode_ms` (by default
  what is left of the pause once the early decode starts, `[vad] pause_ms - decode_ahead_ms`):
  that decode is what the end of a turn waits for;
- the LLM decodes fast enough that an answer never runs dry: its tokens per second, with the
  cores the video and the TTS leave it while the voice speaks, at least `margin` times the
  voice's speaking rate in tokens;
- the voice starts within `first_audio_ms` of the endpoint (the pause decode, the prefill of
  the question's last words, the first chunk's tokens and its synthesis).
If none does, the fastest pair, and the log says so and what to do (the shared LLM server, a
GPU). Also:
- thread counts from the usable cores (affinity and cgroup quota);
- for English, the other Whisper as the second opinion on unsure finals (`[asr]
  second_model = "auto"`; engines/asr/streaming.py) where an unsure turn's first audio, both
  decodes in it, keeps `unsure_first_audio_ms` (1.5 x `first_audio_ms`: without it such a
  turn is asked back, and the user says the whole question again);
- with `[tts] engine = "auto"` (the default), the voice: Kokoro-82M (`af_heart` for English)
  where it costs none of the choices above and keeps every budget with them (its synthesis
  at least `margin` times real time beside the LLM and the video, the first audio within
  `first_audio_ms`), else piper. Kokoro is the more natural and more accurate voice (Whisper
  base reads it back at 2.7% WER against piper's 8-14%, bench/RESULTS.md tts), at ~6x piper's
  compute: on 2 cores beside the LLM it ran dry mid-answer (voice_to_voice, 6 of 10 answers
  stalled), so there it is piper. Chinese is always Kokoro (`rtc_server/language.py`).
`quality` (the largest models) and `fast` (the smallest) skip the choice, explicit keys
(`[llm] model`, `[asr] model`, thread counts, `first_token_deadline_s`) override it, and every
mode but `fixed` still measures what it runs, for the timing constants below. `fixed` measures
nothing and keeps the built-in defaults (tests, reproducible A/B runs).

The result is a plain value, `Fit`: the chosen settings (applied to the engines' configs by
`Fit.apply`) and the rates the conversation paces itself by (`Pace`), handed down to the
agent. One log line says which profile was chosen and why.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

from engines.llm.model_files import BUNDLED
from engines.tts.config import TTSConfig
from engines.tts.kokoro import DEFAULT_VOICES as KOKORO_VOICES
from rtc_server.calibration import Calibration, calibrate
from rtc_server.config import Config

logger = logging.getLogger(__name__)
# Bundled candidates, largest (best answers) first.
LLM_MODELS = ("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b")
ASR_MODELS = ("base", "tiny.en")  # tiny.en: English only
# Tokens a turn still has to prefill after the endpoint: the warm while the user talks reads
# most of the question (7-13 tokens left, bench/RESULTS.md voice_to_voice), and a first
# speakable chunk is ~4 tokens (`first_chunk_max_chars` 12 at ~4.4 characters a token).
PREFILL_TOKENS = 12
FIRST_CHUNK_TOKENS = 4


@dataclass(frozen=True)
class Pace:
    """What the conversation paces itself by, measured here (or the built-in defaults)."""

    speaking_chars_per_s: float  # the voice's speaking rate
    tts_s_per_char: float  # synthesis time per character, live (beside the LLM and video)
    tts_first_chunk_s: float  # synthesis of a first chunk, live
    decode_chars_per_s: float | None  # the LLM's decode while the voice speaks; None: unknown
    first_token_deadline_s: float  # the holding phrase after this without a first token
    # Hold a sentence's start until its words carry the voice (rtc_server/pacing.py); off
    # without a calibration, so chunks do not depend on how fast a thread ran
    hold_sentences: bool = True


# Without a calibration (`fixed`): what the defaults were tuned with on 2 fast cores (piper's
# joe voice speaks ~15 characters a second and takes ~4-6 ms a character to synthesize).
FIXED_PACE = Pace(speaking_chars_per_s=15.0, tts_s_per_char=0.006, tts_first_chunk_s=0.12,
                  decode_chars_per_s=None, first_token_deadline_s=2.0,
                  hold_sentences=False)


@dataclass(frozen=True)
class Fit:
    mode: str
    llm_model: str | None  # None: as configured (the engine's default)
    asr_model: str | None
    llm_threads: tuple[int, int, int] | None  # decode, prompt, burst; None: as configured
    pace: Pace
    reasons: tuple[str, ...]
    calibration: Calibration | None = None
    tts_engine: str | None = None  # the voice chosen for `[tts] engine = "auto"`
    asr_second: str = "none"  # the second opinion for `[asr] second_model = "auto"`

    def apply(self, config: Config) -> Config:
        """`config` with the chosen settings in the engines' sections (explicit keys kept)."""
        llm, asr, tts = config.llm, config.asr, config.tts
        if self.tts_engine is not None and tts.engine == "auto":
            tts = _voice(config, self.tts_engine)
        if self.llm_model is not None and llm.model is None:
            llm = dataclasses.replace(llm, model=self.llm_model)
        if self.llm_threads is not None:
            decode, prompt, burst = self.llm_threads
            llm = dataclasses.replace(
                llm, threads=llm.threads if llm.threads is not None else decode,
                batch_threads=llm.batch_threads if llm.batch_threads is not None else prompt,
                burst_tokens=llm.burst_tokens if llm.burst_tokens is not None else burst,
            )
        if llm.first_token_deadline_s is None:
            llm = dataclasses.replace(llm,
                                      first_token_deadline_s=self.pace.first_token_deadline_s)
        if self.asr_model is not None and asr.model is None:
            asr = dataclasses.replace(asr, model=self.asr_model)
        if asr.second_model == "auto" and self.mode != "fixed":
            asr = dataclasses.replace(asr, second_model=self.asr_second)
        return dataclasses.replace(config, llm=llm, asr=asr, tts=tts)

    def describe(self) -> str:
        return f"profile {self.mode}: " + "; ".join(self.reasons)


def fit(config: Config, *, fresh: bool = False) -> Fit:
    """The profile for `config` on this machine (module docstring); logs its reasons."""
    mode = config.profile.mode
    if mode == "fixed" or config.server.mode != "agent":
        return Fit("fixed", None, None, None, FIXED_PACE, ("as configured, nothing measured",))
    llm_models = _llm_candidates(config)
    asr_models = _asr_candidates(config)
    threads = _threads(config)
    auto_voice = config.tts.engine == "auto"
    if auto_voice:  # measured as piper, with Kokoro beside it where it can speak
        config = dataclasses.replace(config, tts=_voice(config, "piper"))
    voices = (_voice(config, "kokoro"),) if auto_voice and _kokoro_usable(config) else ()
    calibration = calibrate(config, llm_models, asr_models, llm_threads=threads[:2],
                            fresh=fresh, voices=voices)
    chosen = _Chooser(config, calibration, threads)
    llm, asr = chosen.choose(llm_models, asr_models, warn=not calibration.voices)
    speaking = calibration.tts
    for rate in calibration.voices:
        if _Chooser(config, dataclasses.replace(calibration, tts=rate), threads).keeps(llm, asr):
            speaking = rate
            break
    if calibration.voices:  # the voice that speaks gives the reasons and the warnings, once
        chosen = _Chooser(config, dataclasses.replace(calibration, tts=speaking), threads)
        chosen.choose(llm_models, asr_models)  # the same models (`keeps`)
    tts_engine = speaking.engine if auto_voice else None
    if auto_voice:
        chosen.reasons.append(f"voice {tts_engine}" + (
            "" if tts_engine != "piper" or not voices else
            " (Kokoro would cost a smaller model or miss a budget here)"))
    model = config.asr.model or asr
    second = (chosen.second(llm, model, second_asr(model, config.asr.language))
              if config.asr.second_model == "auto" else config.asr.second_model)
    result = Fit(mode, llm, asr, threads, chosen.pace(llm, asr), tuple(chosen.reasons),
                 calibration, tts_engine, second)
    logger.info("%s", result.describe())
    return result


def _voice(config: Config, engine: str) -> TTSConfig:
    """`[tts]` with `engine` (Kokoro with the conversation language's default voice)."""
    tts = config.tts
    if engine == "kokoro":
        voice = tts.voice or KOKORO_VOICES[config.conversation.language]
        return dataclasses.replace(tts, engine="kokoro", voice=voice)
    return dataclasses.replace(tts, engine=engine)


def _kokoro_usable(config: Config) -> bool:
    """Kokoro's files are installed and its G2P for the language too (English: espeak-ng,
    the GPL extra); otherwise it is no candidate (said in the log)."""
    import importlib.util

    from engines.tts.kokoro_files import KokoroFiles

    try:
        KokoroFiles.locate()
    except Exception as exc:  # noqa: BLE001 - a missing extra: not a candidate
        logger.info("voice: Kokoro is not installed (%s); piper", exc)
        return False
    if config.conversation.language == "en" and importlib.util.find_spec(
            "espeakng_loader") is None:
        logger.info("voice: Kokoro's English needs espeak-ng (the GPL extra); piper")
        return False
    return True


def _installed(model: str) -> bool:
    try:
        BUNDLED[model].part_paths()
    except Exception:  # noqa: BLE001 - a missing extra: not a candidate
        return False
    return True


def _llm_candidates(config: Config) -> tuple[str, ...]:
    if config.llm.engine != "llama-cpp":
        return ()
    if config.llm.model is not None:
        return (config.llm.model,)
    installed = tuple(m for m in LLM_MODELS if _installed(m))
    if not installed:
        return ("qwen2.5-coder-1.5b",)  # its load names the missing extra
    if config.profile.mode == "quality":
        return installed[:1]
    if config.profile.mode == "fast":
        return installed[-1:]
    return installed


def second_asr(model: str | None, language: str) -> str:
    """The second opinion for an unsure final (`[asr] second_model = "auto"`): the other
    bundled model, in English (tiny.en hears nothing else); else "none"."""
    if language != "en" or model not in ASR_MODELS:
        return "none"
    return next(m for m in ASR_MODELS if m != model)


def _asr_candidates(config: Config) -> tuple[str, ...]:
    asr = config.asr
    if asr.engine != "faster-whisper":
        return ()
    if asr.model is not None:
        return (asr.model,)
    models = ASR_MODELS if asr.language == "en" else ASR_MODELS[:1]
    if config.profile.mode == "quality":
        return models[:1]
    if config.profile.mode == "fast":
        return models[-1:]
    return models


def _threads(config: Config) -> tuple[int, int, int]:
    """LLM threads from the usable cores: decoding on one thread up to 3 cores (beside the
    video and the TTS two collapsed on 2 cores, bench/RESULTS.md), half of them beyond (at
    most 8: the small models stop scaling there); the prompt's short burst on all of them;
    the first tokens on the prompt's threads when those are more (`burst_tokens`)."""
    from rtc_server.machine import usable_cores

    cores = max(1, int(usable_cores()))
    llm = config.llm
    decode = llm.threads if llm.threads is not None else (1 if cores < 4 else min(8, cores // 2))
    prompt = llm.batch_threads if llm.batch_threads is not None else cores
    burst = llm.burst_tokens if llm.burst_tokens is not None else (
        FIRST_CHUNK_TOKENS if prompt > decode else 0)
    return decode, prompt, burst


class _Chooser:
    """The budget arithmetic of one `fit`, with its reasons for the log."""

    def __init__(self, config: Config, calibration: Calibration,
                 threads: tuple[int, int, int]) -> None:
        self._config = config.profile
        vad = config.vad
        self._pause_budget_ms = (config.profile.pause_decode_ms
                                 if config.profile.pause_decode_ms is not None
                                 else max(vad.pause_ms - vad.decode_ahead_ms, 50))
        self._cal = calibration
        self._threads = threads
        cores = calibration.machine.cores
        video = calibration.video
        self._video_cores = (video.render_s + video.encode_s) * config.media.fps
        tts = calibration.tts
        self._tts_cores = tts.s_per_char * tts.chars_per_s  # synthesis at the speaking rate
        self._cores = cores
        self._free = max(cores - self._video_cores, 0.05)  # beside the video
        self._free_speaking = max(self._free - self._tts_cores, 0.05)  # ... and the voice
        self.reasons = [f"{calibration.machine.describe()}, video {self._video_cores:.2f} "
                        f"cores, voice {self._tts_cores:.2f} cores"]

    def _slowdown(self, threads: int, free: float) -> float:
        return max(1.0, threads / free)

    def _asr_took(self, model: str | None) -> float:
        if model is None:
            return 0.0
        return self._cal.asr_rate(model).decode_s * self._slowdown(1, self._free)

    def _needed_tok_s(self, model: str) -> float:
        rate = self._cal.llm_rate(model)
        return self._cal.tts.chars_per_s / rate.chars_per_token * self._config.margin

    def _live_decode(self, model: str) -> float:
        rate = self._cal.llm_rate(model)
        return rate.decode_tok_s / self._slowdown(self._threads[0], self._free_speaking)

    def _first_audio_s(self, model: str | None, asr: str | None) -> float:
        """The endpoint to the first audio: pause decode, prefill, first chunk, its voice."""
        took = self._asr_took(asr) + self._cal.tts.first_chunk_s * self._slowdown(1, self._free)
        if model is None:
            return took
        rate = self._cal.llm_rate(model)
        prefill = PREFILL_TOKENS / rate.prompt_tok_s * self._slowdown(self._threads[1],
                                                                      self._free)
        first = FIRST_CHUNK_TOKENS / rate.decode_tok_s * self._slowdown(self._threads[0],
                                                                        self._free)
        return took + prefill + first

    def choose(
        self, llms: tuple[str, ...], asrs: tuple[str, ...], warn: bool = True
    ) -> tuple[str | None, str | None]:
        """The largest LLM whose decode outruns the voice (dead air is the one thing a
        conversation cannot hide, and the answers' quality rides on the LLM's size); then the
        larger ASR model whose pause decode fits its budget and, with that LLM, the first
        audio its own; else the smaller. What misses a budget is said, with what to do."""
        pause_budget = self._pause_budget_ms / 1000
        budget = self._config.first_audio_ms / 1000
        model = next((m for m in llms if self._live_decode(m) >= self._needed_tok_s(m)),
                     max(llms, key=self._live_decode, default=None))
        options: tuple[str | None, ...] = asrs or (None,)
        asr = next((a for a in options if self._asr_took(a) <= pause_budget
                    and self._first_audio_s(model, a) <= budget), options[-1])
        advice = ("use the shared LLM server ([llm] engine = \"openai\") or a GPU (README, "
                  "Hardware and latency)")
        problems = []
        if model is not None and self._live_decode(model) < self._needed_tok_s(model):
            problems.append(f"{model} decodes slower than the voice speaks: expect pauses "
                            "between sentences")
        elif model is not None and llms and model != llms[0]:
            problems.append(f"{llms[0]} decodes ~{self._live_decode(llms[0]):.1f} tok/s "
                            f"while speaking, under the {self._needed_tok_s(llms[0]):.1f} "
                            f"needed: {model} instead, which answers less reliably "
                            "(bench/RESULTS.md, answers)")
        tts = self._cal.tts
        voice_rtf = self._tts_cores * self._slowdown(1, self._free_speaking)
        if voice_rtf * self._config.margin > 1.0:
            problems.append(f"the voice ({tts.engine}) synthesizes at {voice_rtf:.2f}x real time "
                            "here, too close to 1: expect pauses between its chunks; a faster "
                            "voice or a GPU for it")
        if self._first_audio_s(model, asr) > budget:
            slowest = ("the voice's first chunk" if tts.first_chunk_s > budget / 2
                       else "the pause decode and the LLM's prefill")
            problems.append(f"the first audio misses its budget ({slowest} the most): "
                            "expect slower answers")
        if problems:
            self.reasons.append(self._said(model, asr, "; ".join(problems) + f"; {advice}"))
            if warn:
                logger.warning("this machine is short of the latency budget: %s",
                               self.reasons[-1])
        else:
            self.reasons.append(self._said(model, asr, "fits"))
        return model, asr

    def second(self, model: str | None, asr: str | None, other: str) -> str:
        """`other` as the second opinion where an unsure turn's first audio, with its decode
        after the first model's (both run before the answer), keeps `unsure_first_audio_ms`;
        else "none". Said in the reasons."""
        if other == "none" or asr is None:
            return "none"
        measured = any(r.model == other for r in self._cal.asr)  # (not with an explicit model)
        first_audio = self._first_audio_s(model, asr) + (self._asr_took(other) if measured
                                                         else 0.0)
        if first_audio > self._config.unsure_budget_ms / 1000:
            self.reasons.append(f"no second opinion: {other}'s decode would take the first "
                                f"audio of an unsure turn to ~{first_audio * 1000:.0f} ms")
            return "none"
        self.reasons.append(f"second opinion {other} on unsure turns (their first audio "
                            f"~{first_audio * 1000:.0f} ms)")
        return other

    def keeps(self, model: str | None, asr: str | None) -> bool:
        """With this calibration's voice, the chosen models keep every budget: the LLM still
        outruns the voice, the voice synthesizes at least `margin` times real time while the
        LLM decodes, and the first audio keeps its budget (so `choose` would pick the same
        models). No log: the question is whether to take this voice."""
        budget = self._config.first_audio_ms / 1000
        voice_rtf = self._tts_cores * self._slowdown(1, self._free_speaking)
        return ((model is None or self._live_decode(model) >= self._needed_tok_s(model))
                and voice_rtf * self._config.margin <= 1.0
                and self._first_audio_s(model, asr) <= budget)

    def _said(self, model: str | None, asr: str | None, verdict: str) -> str:
        parts = [f"{verdict}: llm {model or 'as configured'}, asr {asr or 'as configured'}"]
        if model is not None:
            parts.append(f"decodes ~{self._live_decode(model):.1f} tok/s while speaking "
                         f"(needs {self._needed_tok_s(model):.1f})")
        if asr is not None:
            parts.append(f"pause decode ~{self._asr_took(asr) * 1000:.0f} ms "
                         f"(budget {self._pause_budget_ms})")
        parts.append(f"first audio ~{self._first_audio_s(model, asr) * 1000:.0f} ms after "
                     f"the endpoint (budget {self._config.first_audio_ms})")
        return ", ".join(parts)

    def pace(self, llm: str | None, asr: str | None) -> Pace:
        tts = self._cal.tts
        tts_slow = self._slowdown(1, self._free_speaking)
        decode = None
        deadline = FIXED_PACE.first_token_deadline_s
        if llm is not None:
            rate = self._cal.llm_rate(llm)
            decode = self._live_decode(llm) * rate.chars_per_token
            expected = self._first_audio_s(llm, asr) - self._first_audio_s(None, asr)
            deadline = max(1.5, 3.0 * expected)
        return Pace(speaking_chars_per_s=tts.chars_per_s,
                    tts_s_per_char=tts.s_per_char * tts_slow,
                    tts_first_chunk_s=tts.first_chunk_s * tts_slow,
                    decode_chars_per_s=decode, first_token_deadline_s=deadline)

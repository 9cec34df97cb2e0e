"""What plays when: scheduled audio samples and video frames on the session's MediaClock.

Audio lives at 48 kHz sample indices, video at frame indices, both derived from clock time, so
"play this utterance at T" puts sample n and frame k at T + n/48000 and T + k/fps. Anything
not scheduled is silence / idle frames. `clear_after()` drops everything from "now" on both
timelines in one call (barge-in), and per-tag counters report how much of an utterance was
actually sent (so history can be cut to what the user heard).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from media.audio import OUT_RATE, to_out_rate
from media.clock import MediaClock
from media.errors import InvalidMediaError


@dataclass
class _Segment:
    start: int
    pcm: np.ndarray
    tag: str | None
    on_start: Callable[[], None] | None = None  # called when its first sample is read
    on_end: Callable[[], None] | None = None  # called when its last sample is read

    @property
    def end(self) -> int:
        return self.start + len(self.pcm)


class AudioTimeline:
    """Scheduled mono int16 audio keyed by sample index. Later writes win where they overlap."""

    def __init__(self) -> None:
        self._segments: list[_Segment] = []
        self._played: dict[str, int] = {}

    def write(
        self, pcm: np.ndarray, start: int, tag: str | None = None,
        on_start: Callable[[], None] | None = None, on_end: Callable[[], None] | None = None,
    ) -> None:
        if len(pcm):
            self._segments.append(_Segment(start, pcm, tag, on_start, on_end))

    def read(self, start: int, count: int) -> np.ndarray | None:
        """Samples [start, start+count); None when nothing scheduled overlaps (silence).

        Reads need not be contiguous: a track woken too late skips ahead to the present
        (tracks.MAX_LAG_S). A segment that ended inside the skipped stretch still reports its
        start and end (now): its owner waits for them, and without them a turn whose last
        chunk fell in a stall of the event loop waited forever (32 sessions on the H200
        box: 37 of 96 answers never finished, bench/RESULTS.md section gpu)."""
        end = start + count
        out: np.ndarray | None = None
        for seg in self._segments:
            lo, hi = max(seg.start, start), min(seg.end, end)
            if lo < hi:
                if out is None:
                    out = np.zeros(count, dtype=np.int16)
                out[lo - start : hi - start] = seg.pcm[lo - seg.start : hi - seg.start]
                if seg.tag is not None:
                    self._played[seg.tag] = self._played.get(seg.tag, 0) + (hi - lo)
            if seg.on_start is not None and seg.start < end:  # the first of its samples left
                callback, seg.on_start = seg.on_start, None  # (or its time passed unread)
                callback()
            if seg.on_end is not None and seg.end <= end:
                callback, seg.on_end = seg.on_end, None
                callback()
        self._segments = [s for s in self._segments if s.end > end]
        return out

    def clear_from(self, sample: int) -> None:
        kept = []
        for seg in self._segments:
            if seg.start >= sample:
                continue
            if seg.end > sample:  # cut short: it never reaches its own end
                seg = _Segment(seg.start, seg.pcm[: sample - seg.start], seg.tag, seg.on_start)
            kept.append(seg)
        self._segments = kept

    def end(self) -> int:
        return max((s.end for s in self._segments), default=0)

    def played(self, tag: str) -> int:
        return self._played.get(tag, 0)


class FrameTimeline:
    """Per-video-frame items (RGB frames, or face landmark offsets) keyed by frame index.

    An item missing inside a scheduled run (producer late) repeats the previous one rather
    than flashing back to idle; after the last scheduled item the idle source takes over.
    """

    def __init__(self) -> None:
        self._frames: dict[int, np.ndarray] = {}
        self._last: np.ndarray | None = None

    def write(self, frames: Sequence[np.ndarray] | np.ndarray, start: int) -> None:
        for i, frame in enumerate(frames):
            self._frames[start + i] = frame

    def read(self, index: int) -> np.ndarray | None:
        for old in [k for k in self._frames if k < index]:
            self._last = self._frames.pop(old)
        frame = self._frames.pop(index, None)
        if frame is not None:
            self._last = frame
            return frame
        if self._frames and self._last is not None:
            return self._last  # gap inside a run
        self._last = None
        return None

    def clear_from(self, index: int) -> None:
        for k in [k for k in self._frames if k >= index]:
            del self._frames[k]

    def end(self) -> int:
        return max(self._frames, default=-1) + 1


class Playout:
    """Schedules PCM (any rate) and RGB frames at clock times; read by the outbound tracks."""

    def __init__(self, clock: MediaClock, *, fps: int, width: int, height: int) -> None:
        if fps <= 0 or width <= 0 or height <= 0:
            raise InvalidMediaError("fps, width and height must be positive")
        self.clock = clock
        self.fps = fps
        self.size = (width, height)
        self.audio = AudioTimeline()
        self.video = FrameTimeline()  # explicit RGB frames (markers, pre-rendered video)
        self.pose = FrameTimeline()  # landmark offsets [68, 2], rendered just in time

    def schedule_audio(
        self,
        pcm: np.ndarray,
        sample_rate: int,
        at: float,
        tag: str | None = None,
        on_start: Callable[[float], None] | None = None,
        on_end: Callable[[float], None] | None = None,
    ) -> float:
        """Place PCM so its first sample plays at clock time `at`; returns its end time.

        `on_start(t)` / `on_end(t)` are called with the clock time at which the audio track
        hands the first / last sample to the encoder (never, if it is cleared first): the
        truth about when a voice started and stopped, which the schedule alone cannot tell
        (the track may be late or stopped).
        """
        out = to_out_rate(pcm, sample_rate)
        start = round(at * OUT_RATE)
        self.audio.write(out, start, tag, self._at_now(on_start), self._at_now(on_end))
        return (start + len(out)) / OUT_RATE

    def _at_now(self, callback: Callable[[float], None] | None) -> Callable[[], None] | None:
        return None if callback is None else lambda: callback(self.clock.time())

    def schedule_video(self, frames: Sequence[np.ndarray], at: float) -> float:
        """Place consecutive RGB frames (H, W, 3 uint8) starting at clock time `at`."""
        width, height = self.size
        for frame in frames:
            if frame.shape != (height, width, 3) or frame.dtype != np.uint8:
                raise InvalidMediaError(
                    f"video frame must be uint8 ({height}, {width}, 3), "
                    f"got {frame.dtype} {frame.shape}"
                )
        start = round(at * self.fps)
        self.video.write(frames, start)
        return (start + len(frames)) / self.fps

    def schedule_pose(self, offsets: np.ndarray, at: float) -> float:
        """Place per-frame face landmark offsets [T, 68, 2] starting at clock time `at`.

        The video track renders each frame from its offsets when it is due, so a pose costs
        nothing until played and a barge-in drops unrendered work for free.
        """
        offsets = np.asarray(offsets, dtype=np.float32)
        if offsets.ndim != 3 or offsets.shape[1:] != (68, 2) or not np.all(np.isfinite(offsets)):
            raise InvalidMediaError(f"pose must be finite [T, 68, 2], got {offsets.shape}")
        start = round(at * self.fps)
        self.pose.write(offsets, start)
        return (start + len(offsets)) / self.fps

    def frame_time(self, t: float) -> float:
        """The first video frame instant at or after clock time `t` (to start A/V together)."""
        return math.ceil(t * self.fps - 1e-6) / self.fps

    def clear_after(self, t: float | None = None) -> None:
        """Drop everything scheduled from max(t, now) on both tracks (barge-in)."""
        cut = max(self.clock.time(), t if t is not None else 0.0)
        # The epsilon keeps float noise (1000.2 - 1000.0 = 0.20000000000005) from sparing a sample.
        self.audio.clear_from(math.ceil(cut * OUT_RATE - 1e-6))
        self.video.clear_from(math.ceil(cut * self.fps - 1e-6))
        self.pose.clear_from(math.ceil(cut * self.fps - 1e-6))

    def busy_until(self) -> float:
        """Clock time at which everything scheduled so far has played."""
        return max(
            self.audio.end() / OUT_RATE, self.video.end() / self.fps, self.pose.end() / self.fps
        )

    def played_s(self, tag: str) -> float:
        """Seconds of the audio tagged `tag` handed to the audio track so far."""
        return self.audio.played(tag) / OUT_RATE

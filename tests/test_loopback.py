"""Two real peers in one process over 127.0.0.1: the server and an aiortc test client.

Checks the media the client really receives: video rate, echo audio, one clock for both
tracks, and clean session ends.
"""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest
import soxr
from scipy import signal

from rtc_server.config import MediaConfig
from rtc_server.echo import LEAD_S
from rtc_server.session import Session
from testkit.peer import LoopbackPeer, PcmMicrophone
from testkit.speech import synth
from tests.support.server import SMALL_VIDEO, loopback_config, running_server

pytestmark = pytest.mark.webrtc

# aiortc's receiver holds each frame in its jitter buffer until later packets arrive: audio
# until the 4th following 20 ms frame (JitterBuffer prefetch=4, i.e. 80 ms), video until the
# first packet of the next frame (one frame period). Subtracting these gives arrival times.
AUDIO_RECEIVER_HOLD_S = 4 * 0.020


@pytest.fixture(scope="module")
def question() -> np.ndarray:
    return synth("Hello there, this is a test of the echo mode.", engine="piper")


def windowed_ncc(got: np.ndarray, ref: np.ndarray, lag: int, rate: int = 16000) -> float:
    """Median waveform correlation over 200 ms windows of the reference, each aligned within
    +-60 ms of the global lag: robust to a dropped packet shifting the rest of the echo."""
    win, slack, scores = rate // 5, rate * 60 // 1000, []
    for start in range(0, len(ref) - win, win):
        w = ref[start : start + win]
        if np.sqrt(np.mean(w**2)) < 300:  # skip pauses
            continue
        lo = max(0, lag + start - slack)
        seg = got[lo : lag + start + win + slack]
        if len(seg) < win:
            continue
        xc = signal.correlate(seg, w, mode="valid")
        best = int(np.argmax(xc))
        cand = seg[best : best + win]
        scores.append(float(cand @ w / (np.linalg.norm(cand) * np.linalg.norm(w) + 1e-9)))
    return float(np.median(scores)) if scores else 0.0


def echo_lag(got: np.ndarray, ref: np.ndarray, hop: int = 160) -> int:
    """Where `ref` starts in `got`: the best envelope match, found in 10 ms steps and refined
    in 1 ms steps. Regression: the waveform's cross-correlation peak picked a neighbouring
    pitch period after two Opus codings (Opus does not keep the waveform's phase), and the
    envelopes then disagreed although the echo was faithful."""
    env_ref = envelope(ref, hop)
    centred = env_ref - env_ref.mean()  # zero mean: loudness alone must not pull the match
    coarse = int(np.argmax(signal.correlate(envelope(got, hop), centred, mode="valid"))) * hop

    def score(lag: int) -> float:
        seg = envelope(got[lag : lag + len(ref)], hop)
        n = len(seg)  # the recording may stop a few ms before the echo's silent tail
        return float(np.corrcoef(seg, env_ref[:n])[0, 1]) if n > 0.9 * len(env_ref) else -1.0

    # The unnormalised coarse peak can sit a few steps off: search +-50 ms around it.
    fine = range(max(0, coarse - 5 * hop), coarse + 5 * hop + 1, hop // 10)
    return max(fine, key=score)


def envelope(x: np.ndarray, hop: int = 160) -> np.ndarray:
    n = len(x) // hop
    return np.sqrt((x[: n * hop].astype(float).reshape(n, hop) ** 2).mean(axis=1))


async def test_video_arrives_at_configured_rate() -> None:
    """The frames are stamped 1/fps apart on the media clock (their RTP timestamps), which
    holds on any machine; the arrival rate in wall time does not (19 of 25 fps on a VM three
    times slower than usual, CI), so it is only checked to be flowing."""
    for fps in (25, 15):
        config = loopback_config(MediaConfig(width=320, height=240, fps=fps))
        async with running_server(config) as (_, url):
            peer = LoopbackPeer(url)
            await peer.connect()
            await asyncio.sleep(0.5)  # let the first frames settle
            start_count, start = len(peer.received.video), time.monotonic()
            await asyncio.sleep(3.0)
            rate = (len(peer.received.video) - start_count) / (time.monotonic() - start)
            assert peer.received.video_size == (320, 240)
            steps = np.diff(peer.received.video_pts)
            assert len(steps) > 10 and float(np.median(steps)) == pytest.approx(1 / fps, rel=0.02)
            assert rate > fps / 3  # flowing, however busy the machine
            # idle video is the portrait, not a blank frame
            assert 30 < float(np.mean(peer.received.video[-5:])) < 220
            await peer.close()


async def test_echo_plays_back_what_was_said(question: np.ndarray) -> None:
    pcm = np.concatenate([np.zeros(8000, np.int16), question])
    async with running_server(loopback_config(SMALL_VIDEO)) as (server, url):
        peer = LoopbackPeer(url, microphone=PcmMicrophone(pcm, 16000))
        await peer.connect()
        timings = await peer.wait_event(lambda e: e["type"] == "timings", 15)
        assert timings["marks_ms"]["speech_end"] == 0.0
        # Taken when the audio track sent the first sample: never before the 20 ms frame
        # that holds the scheduled start (the lead after the endpoint).
        assert timings["marks_ms"]["first_audio_sent"] >= (LEAD_S - 0.02) * 1000
        await peer.wait_event(
            lambda e: e["type"] == "state" and e["state"] == "listening" and e["t"] > 1.0, 15
        )
        states = [e["state"] for e in peer.received.events_of("state")]
        assert states == ["listening", "speaking", "listening"]

        got = soxr.resample(peer.received.audio_pcm(), 48000, 16000).astype(float)
        ref = question.astype(float)
        lag = echo_lag(got, ref)
        seg = envelope(got[lag : lag + len(ref)])
        ncc = windowed_ncc(got, ref, lag)
        env_corr = float(np.corrcoef(seg, envelope(ref)[: len(seg)])[0, 1])
        assert ncc > 0.8, f"echo waveform correlation {ncc:.2f}"
        assert env_corr > 0.95, f"echo envelope correlation {env_corr:.3f}"
        # the echo comes after the question ended (not a loop-through)
        assert lag / 16000 > (len(pcm) / 16000) - 0.5
        await peer.close()


async def test_marker_arrives_on_both_tracks_together() -> None:
    """A tone burst and a bright frame scheduled at one clock instant arrive within 40 ms."""
    async with running_server() as (server, url):
        peer = LoopbackPeer(url)
        sid = await peer.connect()
        session = server.registry.get(sid)
        assert isinstance(session, Session)
        await asyncio.sleep(0.8)
        tone = (np.sin(2 * np.pi * 1000 * np.arange(4800) / 48000) * 20000).astype(np.int16)
        white = np.full((512, 512, 3), 255, np.uint8)
        for _ in range(5):
            at = session.clock.time() + 0.3
            session.playout.schedule_audio(tone, 48000, at)
            session.playout.schedule_video([white, white], at)
            await asyncio.sleep(0.8)
        r = peer.received
        audio_arrival, video_arrival = np.array(r.audio_arrival), np.array(r.video_arrival)
        loud = [i for i, a in enumerate(r.audio) if np.abs(a).max() > 5000]
        audio_onsets = [i for j, i in enumerate(loud) if j == 0 or loud[j - 1] != i - 1]
        bright = [i for i, v in enumerate(r.video) if v > 200]
        video_onsets = [i for j, i in enumerate(bright) if j == 0 or bright[j - 1] != i - 1]
        assert len(audio_onsets) == len(video_onsets) == 5
        skews = []
        for a, v in zip(audio_onsets, video_onsets, strict=True):
            within = int(np.argmax(np.abs(r.audio[a]) > 5000)) / 48000
            t_audio = audio_arrival[a] + within - AUDIO_RECEIVER_HOLD_S
            t_video = video_arrival[v] - 1 / 25
            skews.append(t_audio - t_video)
        assert float(np.median(np.abs(skews))) <= 0.040, f"A/V skews (s): {np.round(skews, 3)}"
        await peer.close()


async def test_sessions_are_isolated(question: np.ndarray) -> None:
    """One user's speech is echoed to them only; a silent second session hears nothing."""
    pcm = np.concatenate([np.zeros(8000, np.int16), question])
    async with running_server(loopback_config(SMALL_VIDEO)) as (server, url):
        talker = LoopbackPeer(url, microphone=PcmMicrophone(pcm, 16000))
        silent = LoopbackPeer(url)
        await talker.connect()
        await silent.connect()
        await talker.wait_event(
            lambda e: e["type"] == "state" and e["state"] == "listening" and e["t"] > 1.0, 15
        )
        assert envelope(talker.received.audio_pcm(), 960).max() > 1000
        assert envelope(silent.received.audio_pcm(), 960).max() < 50
        assert not silent.received.events_of("timings")
        await talker.close()
        await silent.close()


async def test_peer_closing_without_delete_ends_session() -> None:
    async with running_server() as (server, url):
        peer = LoopbackPeer(url)
        sid = await peer.connect()
        session = server.registry.get(sid)
        assert isinstance(session, Session)
        await peer.close(delete=False)
        await asyncio.wait_for(session.closed_event.wait(), 10)
        assert len(server.registry) == 0
        assert len(session.tasks) == 0
        await session.close()  # idempotent

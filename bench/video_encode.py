"""A session's per-frame video cost: rendering (the warp map at every pixel or every 2) and
VP8 encoding (aiortc's camera settings or the avatar's, rtc_server/video_encoder.py).

    .venv/bin/python bench/video_encode.py [--frames 200] [--repeats 3] [--bitrates 500,1500]

Renders `--frames` 512x512 frames of the default portrait with lip motion, converts them to
yuv420p as the video track does, then times each encoder's `encode` (one libvpx thread at
512x512, as aiortc picks) at each bitrate, and the renderer's frame with each map step.
Prints a markdown table of p50 ms per frame (median of the repeats) and the bitrate reached.
"""

from __future__ import annotations

import argparse
import fractions
import platform
import sys
import time
from pathlib import Path

import av
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiortc.codecs.vpx import Vp8Encoder  # noqa: E402

from common.face_geometry import PARAMS, params_to_offsets  # noqa: E402
from engines.portrait import detect_portrait_landmarks  # noqa: E402
from media.avatar import AvatarRenderer  # noqa: E402
from media.avatar.mesh import WarpMesh  # noqa: E402
from media.idle import default_portrait  # noqa: E402
from media.tracks import i420  # noqa: E402
from rtc_server.video_encoder import AvatarVp8Encoder  # noqa: E402


def lip_motion(count: int) -> np.ndarray:
    """Offsets [count, 68, 2]: the mouth opening and closing about 3 times a second."""
    params = np.zeros((count, len(PARAMS)), np.float32)
    t = np.arange(count) / 25.0
    params[:, PARAMS.index("open")] = 0.45 * (1 + np.sin(2 * np.pi * 3.1 * t))
    params[:, PARAMS.index("jaw")] = 0.25 * (1 + np.sin(2 * np.pi * 3.1 * t + 0.4))
    return params_to_offsets(params)


def time_render(renderer: AvatarRenderer, offsets: np.ndarray) -> float:
    times = []
    for frame_offsets in offsets:
        start = time.perf_counter()
        renderer.render(frame_offsets)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def time_encode(encoder: Vp8Encoder, frames: list[av.VideoFrame]) -> tuple[float, float]:
    """(p50 s per frame after the key frame, kbit/s reached)."""
    times, size = [], 0
    for i, frame in enumerate(frames):
        start = time.perf_counter()
        payloads, _ = encoder.encode(frame, force_keyframe=i == 0)
        times.append(time.perf_counter() - start)
        size += sum(len(p) for p in payloads)
    return float(np.median(times[1:])), size * 8 / (len(frames) / 25.0) / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bitrates", default="500,1500", help="kbit/s, comma-separated")
    args = parser.parse_args()

    image = default_portrait()
    landmarks = detect_portrait_landmarks(image)
    renderers = {step: AvatarRenderer(image, landmarks) for step in (1, 2)}
    for step, renderer in renderers.items():
        renderer.mesh = WarpMesh(renderer.landmarks, renderer.width, renderer.height, step=step)
    offsets = lip_motion(args.frames)
    frames = []
    for i, frame_offsets in enumerate(offsets):
        frame = av.VideoFrame.from_ndarray(i420(renderers[2].render(frame_offsets)),
                                           format="yuv420p")
        frame.pts, frame.time_base = i * 3600, fractions.Fraction(1, 90000)
        frames.append(frame)

    rows: list[tuple[str, float, float | None]] = []
    for step, renderer in renderers.items():
        runs = [time_render(renderer, offsets) for _ in range(args.repeats)]
        print(f"render, map every {step} px: {[f'{r * 1e3:.2f}' for r in runs]} ms",
              file=sys.stderr)
        rows.append((f"render 512x512, the map every {step} px",
                     float(np.median(runs)) * 1e3, None))
    for kbps in (int(b) for b in args.bitrates.split(",")):
        for name, make in (("aiortc's VP8 (cpu-used -6, denoiser)", Vp8Encoder),
                           ("avatar VP8 (cpu-used -12, no denoiser)", AvatarVp8Encoder)):
            encodes: list[tuple[float, float]] = []
            for _ in range(args.repeats):
                encoder = make()
                encoder.target_bitrate = kbps * 1000
                encodes.append(time_encode(encoder, frames))
            print(f"{name} at {kbps} kbit/s: {[f'{e * 1e3:.2f}' for e, _ in encodes]} ms",
                  file=sys.stderr)
            rows.append((f"{name}, target {kbps} kbit/s",
                         float(np.median([e for e, _ in encodes])) * 1e3,
                         float(np.median([k for _, k in encodes]))))

    print(f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, "
          f"`bench/video_encode.py --frames {args.frames} --repeats {args.repeats} "
          f"--bitrates {args.bitrates}`\n")
    print("| stage | ms per frame, p50 (median of repeats) | kbit/s reached |")
    print("| --- | ---: | ---: |")
    for name, ms, kbit in rows:
        print(f"| {name} | {ms:.2f} | {'' if kbit is None else f'{kbit:.0f}'} |")


if __name__ == "__main__":
    main()

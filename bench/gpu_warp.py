"""The portrait's warp on a GPU (engines/face/gpu_warp.py) against OpenCV's on the CPU: do the
frames agree, and what does a frame cost the worker's CPU?

    python3 bench/gpu_warp.py [--device cuda] [--frames 250] [--threads 2] [--repeats 3]

Renders the default portrait with lip motion and idle head motion both ways. Agreement: over
every frame, the share of the warped region's pixels within 1 and 2 levels, and the largest
difference. Cost: `--threads` threads (the render pool's width) render `--frames` frames each
way; per frame, the wall time (p50 of the repeats) and the CPU time of the whole process
(`time.process_time`, all threads) divided by the frames: what a worker pays for a frame.
Prints a markdown table.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.video_encode import lip_motion  # noqa: E402
from engines.portrait import detect_portrait_landmarks  # noqa: E402
from media.avatar import AvatarRenderer  # noqa: E402
from media.idle import default_portrait  # noqa: E402
from rtc_server.render_device import place_warp  # noqa: E402


def timed(renderer: AvatarRenderer, offsets: np.ndarray, threads: int) -> tuple[float, float]:
    """(wall ms, CPU ms) per frame over `threads` threads rendering every offset."""
    avatars = [renderer.session(25, seed=k) for k in range(threads)]

    def run(k: int) -> None:
        for i, o in enumerate(offsets):
            avatars[k].frame(i, o)

    wall, cpu = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(run, range(threads)))
    frames = threads * len(offsets)
    return ((time.perf_counter() - wall) * 1000 / frames,
            (time.process_time() - cpu) * 1000 / frames)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--frames", type=int, default=250)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    image = default_portrait()
    landmarks = detect_portrait_landmarks(image)
    on_cpu = AvatarRenderer(image, landmarks)
    print(f"building the {args.device} warp (its CUDA graph)...", file=sys.stderr)
    on_gpu = place_warp(AvatarRenderer(image, landmarks), args.device)
    offsets = lip_motion(args.frames)
    x0, y0, x1, y1 = on_cpu.mesh.roi
    a_cpu, b_cpu = on_cpu.session(25, seed=1), on_gpu.session(25, seed=1)
    within1 = within2 = 0.0
    worst = 0
    for i, o in enumerate(offsets):
        a, b = a_cpu.frame(i, o), b_cpu.frame(i, o)
        diff = np.abs(a.astype(np.int16) - b.astype(np.int16)).max(-1)[y0:y1, x0:x1]
        within1 += float((diff <= 1).mean())
        within2 += float((diff <= 2).mean())
        worst = max(worst, int(diff.max()))
    rows = []
    for name, renderer in (("OpenCV, CPU", on_cpu), (f"torch, {args.device}", on_gpu)):
        timed(renderer, offsets[:20], args.threads)  # warm
        runs = [timed(renderer, offsets, args.threads) for _ in range(args.repeats)]
        wall = float(np.median([r[0] for r in runs]))
        cpu = float(np.median([r[1] for r in runs]))
        rows.append(f"| {name} | {wall:.2f} | {cpu:.2f} |")
    print(f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, `python3 bench/gpu_warp.py "
          f"--device {args.device} --frames {args.frames} --threads {args.threads}`\n")
    print(f"Agreement over {len(offsets)} frames (region {x1 - x0}x{y1 - y0}): "
          f"{100 * within1 / len(offsets):.3f}% of its pixels within 1 level, "
          f"{100 * within2 / len(offsets):.3f}% within 2, at most {worst}.\n")
    print(f"| warp ({args.threads} threads, 512x512 frames) | wall ms per frame | "
          "CPU ms per frame (all threads) |")
    print("|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

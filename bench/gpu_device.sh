#!/bin/sh
# On the GPU machine (the device tool), from the root of the carried tree: lay down the staged
# sets (bench/gpu_stage.py: every part checked by sha256 first, exit 2 naming a missing or
# corrupt one), make the random-weight 1.5B once (bench/gpu_llm.py), then run the command.
#   STAGE=../ ROOT=/tmp/rtc sh bench/gpu_device.sh python3 bench/voice_to_voice.py ...
# EXTRAS="redis qwen" also lays down those extras' sets (bench/gpu_stage_<name>.json):
# redis-server on PATH (bench/cluster.py); the real weights' GGUF, converted once here (`--llm-model $ROOT/llm/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf`).
set -eu
STAGE=${STAGE:-..}
ROOT=${ROOT:-/tmp/rtc}
for extra in ${EXTRAS:-}; do  # first: an extra's wheels (qwen's gguf) install with the others
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
print('random weights:', random_model(Path(sys.argv[1]) / 'tokenizer', Path(sys.argv[1])))" "$ROOT"
fi
GGUF="$ROOT/llm/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
if [ -f "$GGUF" ] && [ ! -f "$GGUF.converted" ]; then  # once: the check's imports take ~5-10 s
  python3 -c "import sys; from engines.llm.model_files import resolve_hf_dir; \
print('real weights:', resolve_hf_dir(sys.argv[1]))" "$GGUF" > "$GGUF.part"
  mv "$GGUF.part" "$GGUF.converted" && cat "$GGUF.converted"
fi
exec "$@"

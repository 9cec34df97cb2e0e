#!/bin/sh
# On the GPU machine, under bench/gpu_device.sh (EXTRAS=redis): 32 sessions asking together,
# one bench/cluster.py run per worker count given, in that order (interleave the arms: a
# machine start drifts), each worker pinned to its own core (`--pin-workers`), the peers on
# the cores left. Each run's report and raw results go to $OUT/runK-wN.txt / .json.
#   EXTRAS=redis STAGE=/tmp/stage sh bench/gpu_device.sh sh bench/gpu_workers.sh 11 8 11 8
# LLM_ARGS: the model (default: the random 1.5B with the written answers; the real weights:
#   LLM_ARGS="--llm-model /tmp/rtc/llm/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", EXTRAS="redis qwen").
# SPY=K: py-spy (its wheel installed into /tmp/spy from SPY_WHEEL) samples one worker of run K
#   for 25 s from 3 s after its sessions are up, into $OUT/spyK.txt (raw; bench/spy_threads.py).
set -u
OUT=${OUT:-out}
SPY=${SPY:-0}
SESSIONS=${SESSIONS:-32}
LLM_ARGS=${LLM_ARGS:---llm-model /tmp/rtc/qwen2.5-1.5b-random --forced-answers bench/gpu_answers.json}
mkdir -p "$OUT"
if [ "$SPY" != 0 ] && [ ! -x /tmp/spy/bin/py-spy ]; then
  pip install -q --no-index --no-deps --target /tmp/spy "${SPY_WHEEL:?SPY_WHEEL: py-spy's wheel}"
fi
k=0
for workers in "$@"; do
  k=$((k + 1))
  log="$OUT/run$k-w$workers.txt"
  # shellcheck disable=SC2086  # LLM_ARGS is a list of arguments
  python3 bench/cluster.py --mode agent --llm own --config config/gpu.toml $LLM_ARGS \
    --asr-model base --together --questions 2 --offers 0 --pin-workers --workers "$workers" \
    --sessions "$SESSIONS" --client-processes 8 --redis-server "$(command -v redis-server)" \
    --mps --machine "$(nproc) cores" --json "$OUT/run$k-w$workers.json" > "$log" 2>&1 &
  bench=$!
  if [ "$SPY" = "$k" ]; then
    until grep -q "sessions up" "$log" 2>/dev/null; do
      kill -0 "$bench" 2>/dev/null || break
      sleep 1
    done
    sleep 3
    worker=$(pgrep -f "rtc_server --role worker" | head -1)
    echo "py-spy on worker process $worker" >> "$log"
    /tmp/spy/bin/py-spy record --nonblocking --threads -r 50 -d 25 -f raw \
      -o "$OUT/spy$k.txt" --pid "$worker" >> "$log" 2>&1
  fi
  wait "$bench"
  echo "== run $k: $workers workers, exit $?"
  grep -E "^\||^Asked" "$log" | grep -v "client[0-9]"
done

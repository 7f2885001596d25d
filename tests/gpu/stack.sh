#!/usr/bin/env bash
# tests/gpu/stack.sh: the whole stack on the GPU machine -- tern-scheduler, tern-gateway and one
# tern-worker --engine cuda on a full-size config with dummy weights -- and `tern bench` against
# it (completions, random token prompts, --ignore-eos), one point per concurrency. Needs the
# bundle of tests/gpu/stack_bundle.sh in .gpu/stack (carry [".gpu"]). Results: the bench text
# and JSON per point and the processes' logs under $OUT (or ./gpu-logs), one summary line per
# point on stdout.
#   tests/gpu/stack.sh [CONFIG.json]   env: STREAMS ("1 16 64"), PROMPT (512), OUTPUT (256),
#   REQS_PER_STREAM (2), MAX_SEQS (64), MAX_MODEL_LEN (4096), STEP_TOKENS (8192), POINT_TIMEOUT (150),
#   ENGINE (cuda; fake checks the script without a GPU), SPEC (the worker's --speculative-tokens,
#   0), WORKER_ARGS (more tern-worker flags)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cfg=${1:-$root/tests/configs/qwen3.6-35b-a3b-nvfp4.json}
out=${OUT:-$root/gpu-logs}
s=$root/.gpu/stack
[ -f "$cfg" ] || { echo "stack: no config file $cfg"; exit 2; }
[ -x "$s/bin/tern-worker" ] || { echo "stack: no bundle in $s (run tests/gpu/stack_bundle.sh BUILD_DIR here first)"; exit 2; }
export LD_LIBRARY_PATH=$s/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p "$out"
run=$(mktemp -d /tmp/tern-stack.XXXXXX)
mkdir -p "$run/model"
cp "$cfg" "$run/model/config.json"
gw=ipc://$run/gw.sock wk=ipc://$run/wk.sock port=${PORT:-8123}
pids=()
stop() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done; sleep 1
         for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "$run"; }
trap stop EXIT
"$s/bin/tern-scheduler" --gateway-endpoint "$gw" --worker-endpoint "$wk" \
  --max-step-tokens "${STEP_TOKENS:-8192}" > "$out/stack_scheduler.log" 2>&1 & pids+=($!)
"$s/bin/tern-worker" --engine "${ENGINE:-cuda}" --model "$run/model" --load-format dummy --scheduler-endpoint "$wk" \
  --max-seqs "${MAX_SEQS:-64}" --max-model-len "${MAX_MODEL_LEN:-4096}" \
  --max-step-tokens "${STEP_TOKENS:-8192}" --speculative-tokens "${SPEC:-0}" ${WORKER_ARGS:-} \
  > "$out/stack_worker.log" 2>&1 & pids+=($!)
"$s/bin/tern-gateway" --scheduler-endpoint "$gw" --port "$port" --tokenizer "$s/tok" \
  --served-model-name dummy > "$out/stack_gateway.log" 2>&1 & pids+=($!)
url=http://127.0.0.1:$port
up=0
for i in $(seq 1 240); do
  if "$s/bin/tern" bench --url "$url" --endpoint completions --prompt-len 8 --output-len 2 \
       --requests 1 > /dev/null 2>&1; then up=1; break; fi
  sleep 1
done
[ $up = 1 ] || { echo "stack: the stack did not serve within 240 s"; tail -5 "$out"/stack_*.log; exit 1; }
echo "stack: serving after ${i} s; $(grep -m1 -o 'gpu_memory.*' "$out/stack_worker.log")"
fail=0
for c in ${STREAMS:-1 16 64}; do
  n=$((c * ${REQS_PER_STREAM:-2}))
  timeout "${POINT_TIMEOUT:-150}" "$s/bin/tern" bench --url "$url" --endpoint completions \
    --prompt-len "${PROMPT:-512}" --output-len "${OUTPUT:-256}" --concurrency "$c" --requests "$n" \
    --ignore-eos --json "$out/stack_c$c.json" > "$out/stack_c$c.txt" 2>&1
  rc=$?
  [ $rc = 0 ] || fail=1
  echo "stack: streams=$c requests=$n prompt=${PROMPT:-512} output=${OUTPUT:-256} rc=$rc"
  grep -E '^(completed|failed|output tokens/s|TTFT|TPOT|ITL)' "$out/stack_c$c.txt" | head -8
done
exit $fail

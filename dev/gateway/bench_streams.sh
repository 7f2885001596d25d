#!/usr/bin/env bash
# Scratch bench: N concurrent streamed completions through gateway + scheduler + fake worker.
# Usage: dev/gateway/bench_streams.sh BUILD_DIR [N] [TOKENS] [STEP_US]
set -euo pipefail
B=${1:?build dir}/bin; N=${2:-32}; T=${3:-200}; STEP=${4:-0}
D=$(mktemp -d /tmp/tern-gwbench-XXXXXX); PORT=$((20000 + RANDOM % 20000))
$B/tern-scheduler --gateway-endpoint ipc://$D/gw.sock --worker-endpoint ipc://$D/wk.sock >$D/sched.log 2>&1 & S=$!
$B/tern-worker --scheduler-endpoint ipc://$D/wk.sock --engine fake --fake-vocab 151936 \
  --fake-step-us $STEP --max-model-len 4096 --max-seqs 64 >$D/wk.log 2>&1 & W=$!
$B/tern-gateway --port $PORT --scheduler-endpoint ipc://$D/gw.sock >$D/gw.log 2>&1 & G=$!
trap 'kill $G $W $S 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf localhost:$PORT/health >/dev/null && break; sleep 0.1; done
t0=$(date +%s.%N)
for i in $(seq $N); do
  curl -sN localhost:$PORT/v1/completions \
    -d "{\"prompt\":\"bench $i\",\"max_tokens\":$T,\"stream\":true,\"stream_options\":{\"include_usage\":true}}" \
    >$D/out.$i &
done
wait $(jobs -p | grep -v -e "^$G$" -e "^$W$" -e "^$S$") 2>/dev/null || true
t1=$(date +%s.%N)
done_n=$(grep -l '^data: \[DONE\]' $D/out.* | wc -l)
toks=$(grep -ho '"completion_tokens":[0-9]*' $D/out.* | cut -d: -f2 | paste -sd+ | bc)
echo "streams=$N done=$done_n completion_tokens=$toks wall_s=$(echo "$t1 - $t0" | bc)"
for p in $G $W $S; do echo "pid=$p comm=$(cat /proc/$p/comm) cpu_ticks=$(awk "{print \$14+\$15}" /proc/$p/stat)"; done
curl -s localhost:$PORT/metrics | grep -E '^vllm:(time_to_first_token_seconds|inter_token_latency_seconds|e2e_request_latency_seconds)_(sum|count)'

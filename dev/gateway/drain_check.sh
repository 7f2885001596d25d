#!/usr/bin/env bash
# Scratch: N streams in flight, SIGTERM the gateway, check every stream ends normally and exit 0.
set -uo pipefail
B=${1:?build dir}/bin; N=${2:-32}
D=$(mktemp -d /tmp/tern-gwdrain-XXXXXX); PORT=$((20000 + RANDOM % 20000))
$B/tern-scheduler --gateway-endpoint ipc://$D/gw.sock --worker-endpoint ipc://$D/wk.sock >$D/sched.log 2>&1 & S=$!
$B/tern-worker --scheduler-endpoint ipc://$D/wk.sock --engine fake --fake-vocab 151936 \
  --fake-step-us 2000 --max-model-len 4096 --max-seqs 64 >$D/wk.log 2>&1 & W=$!
$B/tern-gateway --port $PORT --scheduler-endpoint ipc://$D/gw.sock --drain-ms 20000 >$D/gw.log 2>&1 & G=$!
for _ in $(seq 100); do curl -sf localhost:$PORT/health >/dev/null && break; sleep 0.1; done
pids=()
for i in $(seq $N); do
  curl -sN localhost:$PORT/v1/completions -d "{\"prompt\":\"d $i\",\"max_tokens\":150,\"stream\":true}" >$D/out.$i &
  pids+=($!)
done
sleep 0.5; t0=$(date +%s.%N); kill -TERM $G
wait $G; rc=$?; t1=$(date +%s.%N)
wait "${pids[@]}"
ok=$(grep -l '"finish_reason":"length"' $D/out.* | xargs grep -l '^data: \[DONE\]' | wc -l)
echo "streams=$N finished_normally=$ok gateway_exit=$rc drain_s=$(echo "$t1 - $t0" | bc)"
kill $W $S

#!/usr/bin/env bash
# tests/gpu/runsh.sh: ./run.sh as a user with a GPU runs it (issue 20), on the GPU machine with
# the binaries of .gpu/stack (tests/gpu/stack_bundle.sh; carry [".gpu"]) and a full-size config
# with dummy weights. Checks, one line each (exit 1 when one fails):
#   engine   run.sh picks the cuda engine by itself (its "run: engine cuda: ..." line)
#   pool     the worker sizes its KV pool from --gpu-memory-utilization (its gpu_kv_plan line)
#   serve    a completion comes back
#   kill     after kill -9 of the worker, run.sh restarts it and the gateway keeps its pid
#   again    a completion comes back from the restarted worker
#   stop     SIGTERM to run.sh stops all three processes (the Ctrl-C path: run.sh traps INT and
#            TERM alike; a script's background job starts with SIGINT ignored, so TERM here)
#   tests/gpu/runsh.sh [CONFIG.json]   env: UTIL (0.85), PORT (8124), UP_TIMEOUT (300 s),
#   ENGINE (auto) and EXPECT (cuda): ENGINE=cpu EXPECT=cpu MODEL_DIR=models/tiny checks the
#   script without a GPU (no pool line then); MODEL_DIR: a model folder instead of CONFIG with
#   dummy weights. Logs: $OUT/runsh.log (or ./gpu-logs).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cfg=${1:-$root/tests/configs/qwen3.6-35b-a3b-nvfp4.json}
out=${OUT:-$root/gpu-logs}
s=$root/.gpu/stack
[ -x "$s/bin/tern-worker" ] || { echo "runsh: no bundle in $s (run tests/gpu/stack_bundle.sh BUILD_DIR here first)"; exit 2; }
export LD_LIBRARY_PATH=$s/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p "$out"
run=$(mktemp -d /tmp/tern-runsh.XXXXXX)
wargs=()
if [ -n "${MODEL_DIR:-}" ]; then
  model=$(cd "$MODEL_DIR" && pwd)
else
  [ -f "$cfg" ] || { echo "runsh: no config file $cfg"; exit 2; }
  mkdir -p "$run/model"
  cp "$cfg" "$run/model/config.json"
  model=$run/model
  wargs=(--load-format dummy --max-model-len 4096 --speculative-tokens 0)
fi
port=${PORT:-8124} url=http://127.0.0.1:${PORT:-8124} log=$out/runsh.log rt=$run/rt
TERN_RUN_DIR=$rt TERN_BIN_DIR=$s/bin "$root/run.sh" --no-build --engine "${ENGINE:-auto}" \
  --model "$model" --tokenizer "$s/tok" --port "$port" --served-model-name dummy \
  "${wargs[@]}" --gpu-memory-utilization "${UTIL:-0.85}" > "$log" 2>&1 &
rpid=$!
fail=0
check() { # name ok(0|1) detail
  echo "runsh: $1 $([ "$2" = 0 ] && echo ok || echo FAIL) $3"
  [ "$2" = 0 ] || fail=1
}
pid_of() { cat "$rt/$1.pid" 2>/dev/null; }
complete() { # timeout: one completion through tern bench, retried until it comes back
  local t0=$SECONDS
  while ((SECONDS - t0 < $1)); do
    kill -0 "$rpid" 2>/dev/null || return 1
    "$s/bin/tern" bench --url "$url" --endpoint completions --prompt-len 8 --output-len 4 \
      --requests 1 > "$run/bench.txt" 2>&1 && return 0
    sleep 1
  done
  return 1
}
cleanup() { kill -TERM "$rpid" 2>/dev/null; sleep 3; kill -KILL "$rpid" 2>/dev/null
            for n in gateway worker scheduler; do p=$(pid_of $n); [ -n "$p" ] && kill -KILL "$p" 2>/dev/null; done
            rm -rf "$run"; }
trap cleanup EXIT

t0=$SECONDS
complete "${UP_TIMEOUT:-300}"; up=$?
line=$(grep -m1 '^run: engine' "$log")
grep -q "^run: engine ${EXPECT:-cuda}:" "$log"; check engine $? "(${line:-no engine line})"
if [ "${EXPECT:-cuda}" = cuda ]; then
  pool=$(grep -m1 -o 'gpu_kv_plan.*' "$log" | cut -c1-300)
  [ -n "$pool" ]; check pool $? "(${pool:-no gpu_kv_plan line: the pool was not sized from memory})"
fi
check serve $up "(after $((SECONDS - t0)) s)"
gw=$(pid_of gateway) wk=$(pid_of worker)
if [ $up = 0 ] && [ -n "$wk" ]; then
  kill -KILL "$wk"
  t1=$SECONDS
  for _ in $(seq 1 100); do
    nwk=$(pid_of worker)
    [ -n "$nwk" ] && [ "$nwk" != "$wk" ] && break
    sleep 0.2
  done
  [ -n "$nwk" ] && [ "$nwk" != "$wk" ] && [ "$(pid_of gateway)" = "$gw" ] && kill -0 "$gw" 2>/dev/null
  check kill $? "(worker $wk -> ${nwk:-none}, gateway $gw kept)"
  complete "${UP_TIMEOUT:-300}"; check again $? "(after $((SECONDS - t1)) s)"
else
  check kill 1 "(not tried: nothing served)"
fi
pids="$(pid_of gateway) $(pid_of worker) $(pid_of scheduler)"
kill -TERM "$rpid"
for _ in $(seq 1 150); do kill -0 "$rpid" 2>/dev/null || break; sleep 0.2; done
alive=""
for p in $rpid $pids; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
msg="all three and run.sh gone"
[ -z "$alive" ] || msg="still running:$alive"
[ -z "$alive" ]; check stop $? "($msg)"
exit $fail

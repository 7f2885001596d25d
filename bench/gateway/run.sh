#!/bin/sh
# Gateway benchmark: tern-fake-sched (answers at once, 1 token per event) + tern-gateway on a
# free loopback port, then gw_bench in rps and stream modes. Numbers go to docs/PERF.md "Gateway".
# Usage: bench/gateway/run.sh [BUILD_DIR] [SECONDS]
set -eu
B=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."   # the tokenizer default is relative to the repo root
S=${2:-5}
D=$(mktemp -d /tmp/tern-gwbench-XXXXXX)
P=$(/usr/bin/python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
"$B/bin/tern-fake-sched" --endpoint "ipc://$D/gw.sock" >"$D/fs.log" 2>&1 &
FS=$!
"$B/bin/tern-gateway" --port "$P" --scheduler-endpoint "ipc://$D/gw.sock" --max-conns 4096 \
    >"$D/gw.log" 2>&1 &
GW=$!
trap 'kill $GW $FS 2>/dev/null; wait $GW $FS 2>/dev/null; rm -rf "$D"' EXIT
i=0
until curl -sf -o /dev/null "http://127.0.0.1:$P/health"; do
    i=$((i + 1)); [ $i -lt 100 ] || { echo "gateway not healthy"; cat "$D/gw.log"; exit 1; }
    sleep 0.1
done
echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(uname -m) $(nproc) cpus: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
"$B/bin/gw_bench" --port "$P" --mode rps --conns 16 --tokens 8 --seconds "$S"
"$B/bin/gw_bench" --port "$P" --mode stream --conns 64 --tokens 256 --seconds "$S"

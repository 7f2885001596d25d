#!/usr/bin/env bash
# scripts/build.sh DIR [TARGET...]: the Release build that ./run.sh serves from (configure, then
# build the targets, default the four programs). Configuring twice gives the same compile lines,
# so a second run compiles nothing (tests/integration/build checks it). ./test.sh builds
# RelWithDebInfo in its own folder (build-test/), so the two never rebuild each other's objects.
set -euo pipefail
dir=${1:?usage: scripts/build.sh DIR [TARGET...]}
shift
(($#)) || set -- tern tern-scheduler tern-worker tern-gateway
cd "$(dirname "$0")/.."
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$dir" -j"$(nproc)" --target "$@"

#!/usr/bin/env bash
# Installs what is missing, builds (warnings are errors), runs every test with ctest.
# GPU tests carry the label `kernel` and report skipped where there is no GPU.
set -euo pipefail
cd "$(dirname "$0")"
./scripts/setup.sh
BUILD=${TERN_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -DTERN_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
cd "$BUILD"
ctest --output-on-failure -j"$(nproc)" "$@"

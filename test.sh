#!/usr/bin/env bash
# Installs what is missing, builds (warnings are errors), runs every test with ctest, then the
# libFuzzer smoke (scripts/fuzz.sh, 60 s per target) and the sanitizer builds of the unit tests
# (scripts/sanitize.sh: ASan+UBSan, then TSan on the threaded parts).
# GPU tests carry the ctest label `kernel` and report skipped where there is no GPU.
#   ./test.sh                 everything (what CI runs)
#   ./test.sh -R test_gw      only ctest, with these arguments (no fuzz, no sanitizers)
#   TERN_TEST_QUICK=1 ./test.sh   ctest only
set -uo pipefail
cd "$(dirname "$0")"
./scripts/setup.sh || exit 1
BUILD=${TERN_BUILD_DIR:-build-test} # ./run.sh serves from build/ (Release)
JOBS=$(nproc)
t0=$(date +%s)
cmake -S . -B "$BUILD" -DTERN_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
cmake --build "$BUILD" -j"$JOBS" || exit 1
echo "test: build done in $(($(date +%s) - t0)) s"

if (($#)); then
  exec ctest --test-dir "$BUILD" --output-on-failure "$@"
fi

failed=()
stage() { # name command...
  local name=$1 t=$(date +%s)
  shift
  echo "test: ---- $name ----"
  if "$@"; then
    echo "test: $name ok ($(($(date +%s) - t)) s)"
  else
    echo "test: $name FAILED ($(($(date +%s) - t)) s)"
    failed+=("$name")
  fi
}

# Unit tests in parallel; process-spawning tests one at a time, so that their timing margins hold
# on a small machine.
stage "ctest unit" ctest --test-dir "$BUILD" -L unit -j"$JOBS" --output-on-failure
stage "ctest integration+slow+kernel" ctest --test-dir "$BUILD" -LE unit -j1 --output-on-failure

if [ -z "${TERN_TEST_QUICK:-}" ]; then
  stage "fuzz smoke" ./scripts/fuzz.sh
  stage "sanitizers (ASan+UBSan)" ./scripts/sanitize.sh address
  stage "sanitizers (TSan)" ./scripts/sanitize.sh thread
fi

echo "test: total $(($(date +%s) - t0)) s"
if ((${#failed[@]})); then
  echo "test: FAILED stages: ${failed[*]}"
  exit 1
fi
echo "test: all stages passed"

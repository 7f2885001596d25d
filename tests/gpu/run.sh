#!/usr/bin/env bash
# tests/gpu/run.sh: on the GPU machine, build the CUDA kernels + their tests + the benchmark with
# the standalone project in tests/gpu (the top-level configure needs libzmq/libuv, absent there),
# run every kernel test, run them again under compute-sanitizer (memcheck), run the benchmark, and
# print a summary. Logs go to $OUT (or ./gpu-logs).
#   tests/gpu/run.sh [--arch 90] [--no-sanitizer] [--no-bench]
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$root/gpu-logs}
arch=90
sanitize=1
bench=1
while [ $# -gt 0 ]; do
  case $1 in
    --arch) arch=$2; shift ;;
    --no-sanitizer) sanitize=0 ;;
    --no-bench) bench=0 ;;
    *) echo "usage: $0 [--arch N] [--no-sanitizer] [--no-bench]" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$out"
build=${BUILD_DIR:-/tmp/tern-gpu-build}
summary=$out/summary.txt
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv > "$out/nvidia-smi.txt" 2>&1
say "gpu: $(sed -n 2p "$out/nvidia-smi.txt")"
say "nvcc: $(nvcc --version | tail -1)"

t0=$(date +%s)
if ! { cmake -S "$root/tests/gpu" -B "$build" -DCMAKE_CUDA_ARCHITECTURES="$arch" -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
       cmake --build "$build" -j "$(nproc)"; } > "$out/build.log" 2>&1; then
  say "BUILD FAILED (see build.log)"; tail -30 "$out/build.log"; exit 1
fi
say "build: ok in $(( $(date +%s) - t0 )) s (sm_$arch); warnings: $(grep -ci warning "$out/build.log")"

fail=0
for t in "$build"/bin/test_* "$build"/bin/ktest_*; do
  n=$(basename "$t")
  t1=$(date +%s%N)
  (cd "$root" && "$t") > "$out/$n.log" 2>&1
  rc=$?
  dt=$(( ($(date +%s%N) - t1) / 1000000 ))
  case $rc in
    0) st=PASS ;; 77) st=SKIP ;; *) st="FAIL(rc=$rc)"; fail=1 ;;
  esac
  say "test $n: $st (${dt} ms)"
  [ $rc -ne 0 ] && [ $rc -ne 77 ] && grep -E 'mismatch|FAIL|CHECK' "$out/$n.log" | head -20
done

if [ $sanitize = 1 ] && command -v compute-sanitizer > /dev/null; then
  for t in "$build"/bin/ktest_*; do
    n=$(basename "$t")
    (cd "$root" && compute-sanitizer --tool memcheck --error-exitcode 99 "$t") > "$out/san_$n.log" 2>&1
    rc=$?
    errs=$(grep -m1 'ERROR SUMMARY' "$out/san_$n.log" || echo 'no summary')
    [ $rc -eq 0 ] && st=PASS || { st="FAIL(rc=$rc)"; fail=1; }
    say "memcheck $n: $st ($errs)"
  done
  for n in ${RACECHECK:-ktest_gemv ktest_moe}; do
    (cd "$root" && compute-sanitizer --tool racecheck --error-exitcode 99 "$build/bin/$n") > "$out/san_race_$n.log" 2>&1
    rc=$?
    errs=$(grep -m1 'ERROR SUMMARY' "$out/san_race_$n.log" || echo 'no summary')
    [ $rc -eq 0 ] && st=PASS || { st="FAIL(rc=$rc)"; fail=1; }
    say "racecheck $n: $st ($errs)"
  done
  cat "$out"/san_*.log > "$out/sanitizer.log"; rm -f "$out"/san_*.log
elif [ $sanitize = 1 ]; then
  say "memcheck: compute-sanitizer not found"
fi

if [ $bench = 1 ] && [ -x "$build/bin/bench_kernels" ]; then
  "$build/bin/bench_kernels" > "$out/bench.txt" 2>&1
  say "bench: rc=$?"
  cat "$out/bench.txt" | tee -a "$summary"
fi
# keep the per-test logs in one file (the transfer back takes few files)
cat "$out"/test_*.log "$out"/ktest_*.log > "$out/tests.log" 2>/dev/null; rm -f "$out"/test_*.log "$out"/ktest_*.log
say "overall: $([ $fail = 0 ] && echo PASS || echo FAIL)"
exit $fail

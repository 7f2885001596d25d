#!/usr/bin/env bash
# tests/gpu/run.sh: on the GPU machine, build the CUDA kernels + their tests + the benchmark with
# the standalone project in tests/gpu (the top-level configure needs libzmq/libuv, absent there),
# run every kernel test, run them again under compute-sanitizer (memcheck), run the benchmark, and
# print a summary. Then the whole model on the GPU: ktest_gpu_model (the runner vs the CPU pass
# and the transformers fixtures; also under memcheck on two fixtures) and gpu_smoke (full-size
# 35B-A3B with dummy weights, bf16 and NVFP4: resident bytes, KV pool, tokens/s). Logs go to
# $OUT (or ./gpu-logs). The model library needs cJSON + PCRE2, which the GPU machine lacks:
# run tests/gpu/sysroot.sh here first and carry .gpu (git-ignored) with the call.
#   tests/gpu/run.sh [--arch 90] [--no-sanitizer] [--no-bench] [--no-smoke] [--bench-model]
# --bench-model (optional stage, after the smoke runs): gpu_bench on the full-size dummy model,
# prefill + greedy decode vs the roofline, one line per run in the summary and all runs in
# $OUT/bench_model.json. Env: BENCH_CONFIGS (tests/configs names, default the NVFP4 one),
# BENCH_PROMPTS (512,2048,8192), BENCH_BATCHES (1,8), BENCH_GEN (256), BENCH_CHUNK (2048),
# BENCH_TIMEOUT (600 s per config).
# Env: SAN_TESTS="ktest_a ktest_b" (memcheck only those), RACECHECK="" (no racecheck),
# SMOKE_CONFIGS (tests/configs names), SMOKE_TOKENS (256), SMOKE_TIMEOUT (240 s),
# TERN_WERROR=OFF, BUILD_DIR.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$root/gpu-logs}
arch=90
sanitize=1
bench=1
smoke=1
bench_model=0
while [ $# -gt 0 ]; do
  case $1 in
    --arch) arch=$2; shift ;;
    --no-sanitizer) sanitize=0 ;;
    --no-bench) bench=0 ;;
    --no-smoke) smoke=0 ;;
    --bench-model) bench_model=1 ;;
    *) echo "usage: $0 [--arch N] [--no-sanitizer] [--no-bench] [--no-smoke] [--bench-model]" >&2; exit 2 ;;
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
if ! { cmake -S "$root/tests/gpu" -B "$build" -DCMAKE_CUDA_ARCHITECTURES="$arch" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTERN_WERROR="${TERN_WERROR:-ON}" &&
       cmake --build "$build" -j "$(nproc)"; } > "$out/build.log" 2>&1; then
  say "BUILD FAILED (see build.log)"; tail -30 "$out/build.log"; exit 1
fi
say "build: ok in $(( $(date +%s) - t0 )) s (sm_$arch); warnings: $(grep -ci warning "$out/build.log")"

fail=0
for t in "$build"/bin/test_* "$build"/bin/ktest_*; do
  n=$(basename "$t")
  t1=$(date +%s%N)
  (cd "$root" && TERN_SOURCE_DIR="$root" "$t") > "$out/$n.log" 2>&1
  rc=$?
  dt=$(( ($(date +%s%N) - t1) / 1000000 ))
  case $rc in
    0) st=PASS ;; 77) st=SKIP ;; *) st="FAIL(rc=$rc)"; fail=1 ;;
  esac
  say "test $n: $st (${dt} ms)"
  [ $rc -ne 0 ] && [ $rc -ne 77 ] && grep -E 'mismatch|FAIL|CHECK' "$out/$n.log" | head -20
done
if [ -f "$out/ktest_gpu_model.log" ]; then
  grep -E '^fixture=' "$out/ktest_gpu_model.log" > "$out/gpu_model_results.txt"
  say "gpu model checks: $(grep -c ' ok' "$out/gpu_model_results.txt") ok, $(grep -c 'FAIL' "$out/gpu_model_results.txt") FAIL, $(grep -c 'SKIPPED' "$out/gpu_model_results.txt") fixtures skipped"
  grep -E 'FAIL|SKIPPED|greedy|storage_cost|w4a4' "$out/gpu_model_results.txt" | tee -a "$summary"
  # the W4A4 semantics the runner's startup line declares (the CPU reference follows it)
  say "w4a4 startup line: $(grep -m1 -o 'moe_backend=[^ ]* w4a4=.*' "$out/ktest_gpu_model.log")"
fi

if [ $smoke = 1 ] && [ -x "$build/bin/gpu_smoke" ]; then
  for v in ${SMOKE_CONFIGS:-qwen3.6-35b-a3b-nvfp4 qwen3.6-35b-a3b}; do
    t1=$(date +%s)
    (cd "$root" && timeout "${SMOKE_TIMEOUT:-240}" "$build/bin/gpu_smoke" "tests/configs/$v.json" "${SMOKE_TOKENS:-256}") > "$out/smoke_$v.txt" 2>&1
    rc=$?
    [ $rc -eq 0 ] || fail=1
    say "smoke $v: rc=$rc ($(( $(date +%s) - t1 )) s)"
    grep -vE '^ts=.*ev=(gpu_nvfp4|gpu_w4a4)' "$out/smoke_$v.txt" | grep -E 'gpu_backend|gpu_memory|config=|resident|weights=|batch|smoke|error|failed' | tee -a "$summary"
  done
fi

if [ $bench_model = 1 ]; then
  if [ -x "$build/bin/gpu_bench" ]; then
    rm -f "$out/bench_model.jsonl"
    for v in ${BENCH_CONFIGS:-qwen3.6-35b-a3b-nvfp4}; do
      t1=$(date +%s)
      (cd "$root" && timeout "${BENCH_TIMEOUT:-600}" "$build/bin/gpu_bench" "tests/configs/$v.json" \
         --prompt-len "${BENCH_PROMPTS:-512,2048,8192}" --batch "${BENCH_BATCHES:-1,8}" \
         --gen "${BENCH_GEN:-256}" --chunk "${BENCH_CHUNK:-2048}" --json "$out/bench_model.jsonl") \
        > "$out/bench_model_$v.txt" 2>&1
      rc=$?
      [ $rc -eq 0 ] || fail=1
      say "bench-model $v: rc=$rc ($(( $(date +%s) - t1 )) s)"
      grep -E '^(setup|bench|roofline |gpu_bench|note)|error|failed|disagree' "$out/bench_model_$v.txt" | tee -a "$summary"
    done
    { echo "["; [ -f "$out/bench_model.jsonl" ] && paste -sd, "$out/bench_model.jsonl"; echo "]"; } > "$out/bench_model.json"
    rm -f "$out/bench_model.jsonl"
  else
    say "bench-model: gpu_bench not built"; fail=1
  fi
fi

if [ $sanitize = 1 ] && command -v compute-sanitizer > /dev/null; then
  for t in ${SAN_TESTS:-"$build"/bin/ktest_*}; do
    [ -x "$t" ] || t="$build/bin/$t"
    n=$(basename "$t")
    (cd "$root" && TERN_SOURCE_DIR="$root" KTEST_GPU_MODEL_ONLY=hf_b,small_nvfp4 \
       compute-sanitizer --tool memcheck --error-exitcode 99 "$t") > "$out/san_$n.log" 2>&1
    rc=$?
    errs=$(grep -m1 'ERROR SUMMARY' "$out/san_$n.log" || echo 'no summary')
    [ $rc -eq 0 ] && st=PASS || { st="FAIL(rc=$rc)"; fail=1; }
    say "memcheck $n: $st ($errs)"
  done
  for n in ${RACECHECK-ktest_gemv ktest_moe ktest_moe_grouped ktest_gdn_seq ktest_sample}; do
    (cd "$root" && compute-sanitizer --tool racecheck --error-exitcode 99 "$build/bin/$n") > "$out/san_race_$n.log" 2>&1
    rc=$?
    errs=$(grep -m1 'RACECHECK SUMMARY' "$out/san_race_$n.log" || echo 'no summary')
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
  # prefill attention and the grouped expert / FP8 GEMMs (TFLOP/s against the bf16 peak)
  for b in bench_attn bench_gemm; do
    [ -x "$build/bin/$b" ] || continue
    "$build/bin/$b" > "$out/$b.txt" 2>&1
    say "$b: rc=$?"
    cat "$out/$b.txt" | tee -a "$summary"
  done
fi
# keep the per-test logs in one file (the transfer back takes few files)
cat "$out"/test_*.log "$out"/ktest_*.log > "$out/tests.log" 2>/dev/null; rm -f "$out"/test_*.log "$out"/ktest_*.log
say "overall: $([ $fail = 0 ] && echo PASS || echo FAIL)"
exit $fail

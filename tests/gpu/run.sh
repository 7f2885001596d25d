#!/usr/bin/env bash
# tests/gpu/run.sh: on the GPU machine, build the CUDA kernels + their tests + the benchmark with
# the standalone project in tests/gpu (the top-level configure needs libzmq/libuv, absent there),
# run every kernel test, run them again under compute-sanitizer (memcheck), run the benchmark, and
# print a summary. Then the whole model on the GPU: ktest_gpu_model (the runner vs the CPU pass
# and the transformers fixtures; also under memcheck on two fixtures) and gpu_smoke (full-size
# 35B-A3B with dummy weights, bf16 and NVFP4: resident bytes, KV pool, tokens/s). $OUT (or
# ./gpu-logs) receives summary.txt and logs.tgz (every other log), also when a TERM or INT (a
# device call's time limit) stops the run: the summary then says what finished and "stopped". The model library needs cJSON + PCRE2, which the GPU machine lacks:
# run tests/gpu/sysroot.sh here first and carry .gpu (git-ignored) with the call.
#   tests/gpu/run.sh [--quick] [--arch 90a] [--no-sanitizer] [--no-bench] [--no-smoke] [--bench-model]
#                    [--stack]
# --quick: build and run only the kernel tests (tests/kernels, tests/unit/kernels_ref),
# ktest_gpu_model and ktest_gpu_spec: no sanitizers, no benches, no smoke, not the other
# model-level tests of tests/kernels/model (about 2 minutes on an H200 with 16 cores).
# The run ends with a summary of one screen: one line per test program (PASS/FAIL/SKIP, seconds),
# the gpu model checks, one line per sanitizer tool / smoke config / bench, and overall; the
# details stay above it and in $OUT/summary.txt.
# --stack (optional stage, last): tests/gpu/stack.sh, the whole stack with the cuda worker and
# tern bench at 1/16/64 streams (needs the bundle of tests/gpu/stack_bundle.sh in .gpu/stack),
# then tests/gpu/runsh.sh: ./run.sh picks cuda, sizes the pool by --gpu-memory-utilization,
# serves, survives a worker kill.
# --bench-model (optional stage, after the smoke runs): gpu_bench on the full-size dummy model,
# prefill + greedy decode vs the roofline, one line per run in the summary and all runs in
# $OUT/bench_model.json. Env: BENCH_CONFIGS (tests/configs names, default the NVFP4 one),
# BENCH_PROMPTS (512,2048,8192), BENCH_BATCHES (1,8), BENCH_GEN (256), BENCH_CHUNK (2048),
# BENCH_TIMEOUT (600 s per config).
# Env: TEST_JOBS (4: test programs run at once on the GPU; 1 for one by one),
# SAN_TESTS="ktest_a ktest_b" (memcheck only those), RACECHECK="" (no racecheck),
# SAN_TIMEOUT (180 s a sanitizer run; over it counts as a failure; racecheck runs with
# KTEST_SMALL=1, which leaves out the test cases whose size only costs time under it),
# SAN_JOBS (TEST_JOBS: sanitizer runs at once),
# SMOKE_CONFIGS (tests/configs names), SMOKE_TOKENS (256), SMOKE_TIMEOUT (240 s), REPEAT_RUNS
# (3: the batch-64 step's runs that must give one tokens_hash, with the smoke runs; 0 or 1: none),
# TERN_WERROR=OFF, BUILD_DIR.
set -uo pipefail
jobs_max=${TEST_JOBS:-4}
case $jobs_max in ''|*[!0-9]*|0) echo "run.sh: TEST_JOBS must be a positive integer (got '$jobs_max')" >&2; exit 2 ;; esac
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$root/gpu-logs}
arch=90a
sanitize=1
bench=1
smoke=1
bench_model=0
stack=0
quick=0
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1 ;;
    --arch) arch=$2; shift ;;
    --no-sanitizer) sanitize=0 ;;
    --no-bench) bench=0 ;;
    --no-smoke) smoke=0 ;;
    --bench-model) bench_model=1 ;;
    --stack) stack=1 ;;
    *) echo "usage: $0 [--quick] [--arch N] [--no-sanitizer] [--no-bench] [--no-smoke] [--bench-model] [--stack]" >&2; exit 2 ;;
  esac
  shift
done
[ $quick = 1 ] && { sanitize=0; bench=0; smoke=0; }
repeat_runs=${REPEAT_RUNS:-3}
case $repeat_runs in
  '' | *[!0-9]*) echo "run.sh: REPEAT_RUNS must be a count, not '$repeat_runs'" >&2; exit 2 ;;
esac
mkdir -p "$out"
build=${BUILD_DIR:-/tmp/tern-gpu-build}
summary=$out/summary.txt
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }
# the closing summary: one line per result, printed (and appended to summary.txt) at the end
final=()
result() { final+=("$(printf '%-28s %-12s %s' "$1" "$2" "$3")"); }
secs() { awk -v ms="$1" 'BEGIN { printf "%.1f s", ms / 1000 }'; }
t_start=$(date +%s)
# The end of every run, also one stopped by a TERM or INT (a device call's time limit): the
# summary of what finished, then every other file of $out in one logs.tgz (a device call brings
# back few files: summary.txt and logs.tgz are all it needs).
done_all=0
finish() {
  trap - EXIT TERM INT
  if [ $done_all = 0 ]; then
    fail=1
    # sanitizer runs the stop cut short: how many had finished, and passed
    if [ -n "${san_lim:-}" ] && [ "${san_race_done:-0}" = 0 ]; then
      for tool in memcheck racecheck; do
        local ok=0 bad=""
        for f in "$out"/san_${tool}_*.rc; do
          [ -e "$f" ] || continue
          local nm=${f##*/san_${tool}_}
          [ "$(cat "$f")" = 0 ] && ok=$((ok + 1)) || bad="$bad ${nm%.rc}"
        done
        result "$tool" FAIL "$ok passed${bad:+; failed:$bad}; stopped before the rest"
      done
    fi
    result stopped FAIL "a TERM/INT ended the run here"
  fi
  result overall "$([ "${fail:-1}" = 0 ] && echo PASS || echo FAIL)" "$(( $(date +%s) - t_start )) s"
  { echo "==== summary ($([ $quick = 1 ] && echo quick || echo full), $(sed -n 2p "$out/nvidia-smi.txt" 2>/dev/null | cut -d, -f1)) ===="
    printf '%s\n' "${final[@]}"; } | tee -a "$summary"
  (cd "$out" && find . -maxdepth 1 -type f ! -name summary.txt ! -name logs.tgz -printf '%P\n' |
     LC_ALL=C sort > /tmp/tern-runsh-logs.$$ &&
   [ -s /tmp/tern-runsh-logs.$$ ] && tar czf logs.tgz -T /tmp/tern-runsh-logs.$$ &&
   xargs rm -f < /tmp/tern-runsh-logs.$$; rm -f /tmp/tern-runsh-logs.$$)
  exit "${fail:-1}"
}
trap finish EXIT
trap 'exit 1' TERM INT
fail=1

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv > "$out/nvidia-smi.txt" 2>&1
say "gpu: $(sed -n 2p "$out/nvidia-smi.txt")"
gpu_seen=0
nvidia-smi -L > /dev/null 2>&1 && gpu_seen=1
say "nvcc: $(nvcc --version | tail -1)"

t0=$(date +%s)
if ! cmake -S "$root/tests/gpu" -B "$build" -DCMAKE_CUDA_ARCHITECTURES="$arch" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTERN_WERROR="${TERN_WERROR:-ON}" > "$out/build.log" 2>&1; then
  say "CONFIGURE FAILED (see build.log)"; tail -30 "$out/build.log"; done_all=1; result build FAIL "see build.log"; exit 1
fi
# --quick: the test programs of tests/kernels/model other than ktest_gpu_model and
# ktest_gpu_spec are left out
skip=""
if [ $quick = 1 ]; then
  skip=$(grep -o 'tern_add_test([A-Za-z0-9_]*' "$root/tests/kernels/model/CMakeLists.txt" | sed 's/.*(//' | grep -vxE 'ktest_gpu_model|ktest_gpu_spec' | tr '\n' ' ')
  targets=$(cmake --build "$build" --target help 2>/dev/null | sed -n 's/^\.\.\. \(k\{0,1\}test_[A-Za-z0-9_]*\).*/\1/p' | grep -vxF -f <(printf '%s\n' $skip) | tr '\n' ' ')
  build_args=()
  [ -n "$targets" ] && build_args=(--target $targets) # else (another generator's help): all
else
  build_args=()
fi
if ! cmake --build "$build" -j "$(nproc)" "${build_args[@]}" >> "$out/build.log" 2>&1; then
  say "BUILD FAILED (see build.log)"; tail -30 "$out/build.log"; done_all=1; result build FAIL "see build.log"; exit 1
fi
say "build: ok in $(( $(date +%s) - t0 )) s (sm_$arch); warnings: $(grep -ci warning "$out/build.log")"
result build ok "$(( $(date +%s) - t0 )) s"

fail=0
# the test programs, TEST_JOBS (4) at a time on the one GPU (most of their time is the CPU
# references), reported in name order
tests=()
for t in "$build"/bin/test_* "$build"/bin/ktest_*; do
  [ -x "$t" ] || continue
  n=$(basename "$t")
  case " $skip " in *" $n "*) continue ;; esac
  tests+=("$t")
done
run_one() {
  local t=$1 n t1 rc
  n=$(basename "$t")
  t1=$(date +%s%N)
  (cd "$root" && TERN_SOURCE_DIR="$root" "$t") > "$out/$n.log" 2>&1
  rc=$?
  echo "$rc $(( ($(date +%s%N) - t1) / 1000000 ))" > "$out/$n.rc"
}
# spawn MAX CMD...: CMD in the background once fewer than MAX spawned ones run (the caller
# waits for the last ones; running starts at 0)
running=0
spawn() {
  local max=$1
  shift
  if [ "$running" -ge "$max" ]; then
    wait -n
    running=$((running - 1))
  fi
  "$@" &
  running=$((running + 1))
}
for t in "${tests[@]}"; do
  spawn "$jobs_max" run_one "$t"
done
wait
for t in "${tests[@]}"; do
  n=$(basename "$t")
  read -r rc dt < "$out/$n.rc" 2>/dev/null || { rc=1; dt=0; }
  rm -f "$out/$n.rc"
  case $rc in
    0) st=PASS ;;
    # a program skips without a CUDA device: where nvidia-smi sees one, that is a failure
    77) if [ "$gpu_seen" = 1 ]; then st="FAIL(skipped)"; fail=1; else st=SKIP; fi ;;
    *) st="FAIL(rc=$rc)"; fail=1 ;;
  esac
  say "test $n: $st (${dt} ms)"
  result "$n" "$st" "$(secs $dt)"
  [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && grep -E 'mismatch|FAIL|CHECK' "$out/$n.log" | head -20
done
if [ -f "$out/ktest_gpu_model.log" ]; then
  grep -E '^fixture=' "$out/ktest_gpu_model.log" > "$out/gpu_model_results.txt"
  checks="$(grep -c ' ok' "$out/gpu_model_results.txt") ok, $(grep -c 'FAIL' "$out/gpu_model_results.txt") FAIL, $(grep -c 'SKIPPED' "$out/gpu_model_results.txt") fixtures skipped"
  say "gpu model checks: $checks"
  result "gpu model checks" "" "$checks"
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
    result "smoke $v" "$([ $rc = 0 ] && echo PASS || echo "FAIL(rc=$rc)")" "$(( $(date +%s) - t1 )) s"
    grep -vE '^ts=.*ev=(gpu_nvfp4|gpu_w4a4)' "$out/smoke_$v.txt" | grep -E 'gpu_backend|gpu_memory|config=|resident|weights=|batch|smoke|error|failed' | tee -a "$summary"
  done
fi

# With the smoke runs: the batch-64 decode step (NVFP4 dummy model, prompt 1,024) three times,
# the same tokens_hash every run. A race between the blocks of a many-item step changes the hash
# from run to run where the one-item tests and the kernel tests pass (the twenty-fourth session's
# GDN counter did exactly that; docs/PERF.md). REPEAT_RUNS (3); 0 or 1 leaves it out.
if [ $smoke = 1 ] && [ "$repeat_runs" -gt 1 ]; then
  t1=$(date +%s)
  if [ -x "$build/bin/gpu_bench" ]; then
    hashes=()
    for r in $(seq "$repeat_runs"); do
      (cd "$root" && timeout 120 "$build/bin/gpu_bench" tests/configs/qwen3.6-35b-a3b-nvfp4.json \
         --prompt-len 1024 --batch 64 --gen 64 --chunk 2048) > "$out/repeat64_$r.txt" 2>&1
      h=$(grep -m1 '^bench ' "$out/repeat64_$r.txt" | grep -oE 'tokens_hash=[0-9a-f]+' | cut -d= -f2)
      hashes+=("${h:-none}")
    done
    n_diff=$(printf '%s\n' "${hashes[@]}" | sort -u | wc -l)
    if [ "$n_diff" -eq 1 ] && [ "${hashes[0]}" != none ]; then st=PASS; else st=FAIL; fail=1; fi
    say "repeat batch64: $st (tokens_hash ${hashes[*]})"
    result "repeat batch64" "$st" "$(( $(date +%s) - t1 )) s, ${#hashes[@]} runs, ${n_diff} hash(es)"
  else
    say "repeat batch64: gpu_bench not built"; fail=1
    result "repeat batch64" FAIL "gpu_bench not built"
  fi
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
      result "bench-model $v" "$([ $rc = 0 ] && echo PASS || echo "FAIL(rc=$rc)")" "$(( $(date +%s) - t1 )) s"
      grep -E '^(setup|bench|roofline |gpu_bench|note)|error|failed|disagree' "$out/bench_model_$v.txt" | tee -a "$summary"
    done
    { echo "["; [ -f "$out/bench_model.jsonl" ] && paste -sd, "$out/bench_model.jsonl"; echo "]"; } > "$out/bench_model.json"
    rm -f "$out/bench_model.jsonl"
  else
    say "bench-model: gpu_bench not built"; fail=1
    result bench-model FAIL "gpu_bench not built"
  fi
fi

if [ $sanitize = 1 ] && command -v compute-sanitizer > /dev/null; then
  san_ok=0; san_bad=""; race_ok=0; race_bad=""
  san_lim=${SAN_TIMEOUT:-180} # seconds a sanitizer run may take (rc 124: over it, a failure)
  # one sanitizer run: TOOL NAME PROGRAM [ENV=V..]; its log and exit status in $out
  san_one() {
    local tool=$1 n=$2 t=$3
    shift 3
    (cd "$root" && env TERN_SOURCE_DIR="$root" "$@" timeout "$san_lim" compute-sanitizer \
       --tool "$tool" --error-exitcode 99 "$t") > "$out/san_${tool}_$n.log" 2>&1
    echo $? > "$out/san_${tool}_$n.rc"
  }
  # SAN_JOBS (TEST_JOBS) runs at once, as the test programs (the sanitizers' time is mostly
  # the host's), then the results in name order
  san_jobs=${SAN_JOBS:-$jobs_max}
  san_names=()
  running=0
  for t in ${SAN_TESTS:-"$build"/bin/ktest_*}; do
    [ -x "$t" ] || t="$build/bin/$t"
    n=$(basename "$t")
    san_names+=("$n")
    spawn "$san_jobs" san_one memcheck "$n" "$t" KTEST_GPU_MODEL_ONLY=hf_b,small_nvfp4
  done
  race_names=(${RACECHECK-ktest_gemv ktest_moe ktest_moe_grouped ktest_gdn_seq ktest_sample})
  for n in "${race_names[@]}"; do
    spawn "$san_jobs" san_one racecheck "$n" "$build/bin/$n" KTEST_SMALL=1
  done
  wait
  for n in "${san_names[@]}"; do
    read -r rc < "$out/san_memcheck_$n.rc" 2>/dev/null || rc=1
    errs=$(grep -m1 'ERROR SUMMARY' "$out/san_memcheck_$n.log" || echo 'no summary')
    [ "$rc" -eq 0 ] && st=PASS || { st="FAIL(rc=$rc)"; fail=1; }
    say "memcheck $n: $st ($errs)"
    [ "$rc" -eq 0 ] && san_ok=$((san_ok + 1)) || san_bad="$san_bad $n"
  done
  san_mem_done=1
  for n in "${race_names[@]}"; do
    read -r rc < "$out/san_racecheck_$n.rc" 2>/dev/null || rc=1
    errs=$(grep -m1 'RACECHECK SUMMARY' "$out/san_racecheck_$n.log" || echo 'no summary')
    [ "$rc" -eq 0 ] && st=PASS || { st="FAIL(rc=$rc)"; fail=1; }
    say "racecheck $n: $st ($errs)"
    [ "$rc" -eq 0 ] && race_ok=$((race_ok + 1)) || race_bad="$race_bad $n"
  done
  san_race_done=1
  cat "$out"/san_*.log > "$out/sanitizer.log"; rm -f "$out"/san_*.log "$out"/san_*.rc
  result memcheck "$([ -z "$san_bad" ] && echo PASS || echo FAIL)" "$san_ok passed${san_bad:+; failed:$san_bad}"
  result racecheck "$([ -z "$race_bad" ] && echo PASS || echo FAIL)" "$race_ok passed${race_bad:+; failed:$race_bad}"
elif [ $sanitize = 1 ]; then
  say "memcheck: compute-sanitizer not found"
  result memcheck SKIP "compute-sanitizer not found"
fi

if [ $bench = 1 ] && [ -x "$build/bin/bench_kernels" ]; then
  "$build/bin/bench_kernels" > "$out/bench.txt" 2>&1
  rc=$?
  say "bench: rc=$rc"
  result bench_kernels "$([ $rc = 0 ] && echo ran || echo "rc=$rc")" "table in bench.txt"
  cat "$out/bench.txt" | tee -a "$summary"
  # prefill attention and the grouped expert / FP8 GEMMs (TFLOP/s against the bf16 peak)
  for b in bench_attn bench_gemm; do
    [ -x "$build/bin/$b" ] || continue
    "$build/bin/$b" > "$out/$b.txt" 2>&1
    rc=$?
    say "$b: rc=$rc"
    result "$b" "$([ $rc = 0 ] && echo ran || echo "rc=$rc")" "table in $b.txt"
    cat "$out/$b.txt" | tee -a "$summary"
  done
fi
if [ $stack = 1 ]; then
  t1=$(date +%s)
  OUT="$out" "$root/tests/gpu/stack.sh" > "$out/stack.txt" 2>&1
  rc=$?
  [ $rc -eq 0 ] || fail=1
  say "stack: rc=$rc ($(( $(date +%s) - t1 )) s)"
  grep -E '^stack:|^(completed|failed|output tokens/s|TTFT|TPOT)' "$out/stack.txt" | tee -a "$summary"
  result stack "$([ $rc -eq 0 ] && echo PASS || echo "FAIL(rc=$rc)")" "$(( $(date +%s) - t1 )) s"
  t1=$(date +%s)
  OUT="$out" "$root/tests/gpu/runsh.sh" > "$out/runsh.txt" 2>&1
  rc=$?
  [ $rc -eq 0 ] || fail=1
  say "runsh: rc=$rc ($(( $(date +%s) - t1 )) s)"
  tee -a "$summary" < "$out/runsh.txt"
  result run.sh "$([ $rc -eq 0 ] && echo PASS || echo "FAIL(rc=$rc)")" "$(( $(date +%s) - t1 )) s"
fi
done_all=1
exit $fail

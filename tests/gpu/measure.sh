#!/usr/bin/env bash
# tests/gpu/measure.sh: one device call (at most 10 minutes) that confirms and measures what the
# CPU side could not: build + `tests/gpu/run.sh --quick`, then the benches that set the runner's
# dispatch defaults and the A/B runs of the opt-in paths, each step under its own time limit, one
# summary line per step at the end. Run it in the repository root on the GPU machine; $OUT (or
# ./gpu-logs) receives measure.txt (the summary) and logs.tgz (everything else).
#   tests/gpu/measure.sh [STAGE...]   stages (default: all but profile, in this order):
#     tests    tests/gpu/run.sh --quick (build, kernel tests, ktest_gpu_model)
#     tiles    bench_linear experts (expert tile modes incl. experts_tiles) and quick (dense_tiles)
#     decode   gpu_bench, prompt 128, batch 8, 16, 64
#     decode_ab  the same with --dense-tiles -1 (the NVFP4 dense tiles off)
#     decode1q gpu_bench, batch 1, prompt 2,048, 64 tokens: one run (a short call's check; the
#              FP8 and BF16 configs load for more than 60 s: its limit is 150 s)
#     formats1 gpu_bench, batch 1, prompt 2,048, 64 tokens, for the FP8, BF16 and NVFP4 configs
#              (issue 17's three floors; 120 s each, most of it the dummy model's load)
#     decode1  gpu_bench, batch 1, prompts 512, 2,048, 8,192, 64 tokens (issue 17): default and
#              --pdl -1 (the graphs' programmatic edges made full ones); FUSEOFF=1 adds --fuse -1
#              (the few-row launches one by one)
#     prefill  gpu_bench, batch 1, prompts 512, 2,048, 8,192: default, --gdn-chunk -1 (the GDN
#              recurrence token-serial: tokens may differ, fp32 rounding of another order),
#              --grouped-pipe64 1 (the 64-row expert tiles at 2 x 2 warps: the same tokens_hash)
#     attn     bench_attn: prefill attention per path (cores, mma, flash, wgmma) in TFLOP/s, decode
#     wgattn   gpu_bench prefill TTFT at 2,048 and 8,192 (one step each), the wgmma attention
#              (default) against --wgmma-attn -1 (the FLASH kernel), twice
#     wgab     the wgmma prefill attention's variants (FWG_NOEND builds): bench_attn
#              prefill rows twice, the SASS's warpgroup instructions (WGAB_NCU=1: Nsight Compute)
#     attnab   the FLASH prefill attention's block shape (warps x keys a tile): 8 x 64 (default),
#              4 x 32, 8 x 32 (a build each), bench_attn's flash rows
#     gqaab    the GQA decode attention on e4m3 K/V at 8 warps with the V codes paired before
#              their conversion (the default) against 4 warps (-DGQA_E4M3_WARPS=4) and against
#              4 warps converting before pairing (-DGQA_V_PAIR=0 too): `bench_attn decode` from
#              a build of each ($BUILD_DIR-gqa4, $BUILD_DIR-gqaold)
#     long     gpu_bench, batch 1, prompts 2,048 and 131,072 on one model (max_model_len for
#              the long one): TTFT and decode at a 128K context (issue 16)
#     gdn      bench_kernels gdn: token-serial vs chunked GDN recurrence by item rows (threshold)
#     pool     gpu_bench with the GDN states in the K/V pool (--state-in-pool 1, the worker's
#              --gdn-state pool) against slots: batch 1 at 2,048 and batch 64 at 128; the
#              tokens_hash of each pair must match (the layout moves no arithmetic)
#     stack    tests/gpu/stack.sh at 64 streams (needs .gpu/stack, tests/gpu/stack_bundle.sh)
#     specgate tests/gpu/stack.sh at 1 stream, prompt 512, 1,024 tokens, speculation off (SPEC=0)
#              and at K = 3 with the gate (dummy weights: acceptance near 0, so the gate should
#              close; issue 16 asks the decode rate within 5% of K = 0); the worker's spec_stats
#     pipes    bench_kernels rows (one-token bf16 / fp8 GEMVs and experts on the model's
#              shapes), then Nsight Compute of one launch each (caches flushed): the fp8 stream
#              kernel (12,288 x 2,048; its 16-warp form, 2,048 x 4,096), the fp8 experts'
#              gate/up and down on the CUDA cores, the
#              bf16 row kernel (12,288 x 2,048): issue, stalls and the share of each pipe
#              (where the fp8 kernels' time goes: e4m3 conversions or the loads), their SASS
#              opcode counts
#     fp8ab    one token's FP8 experts, the down stage's slots form at 16 lanes a row (default,
#              one wave of blocks) against 32 (-DMOE_DOWN_FP8_LPR=0, $BUILD_DIR-lpr0):
#              gpu_bench FP8 batch 1 at 2,048, twice each
#     fp8wave  the FP8 stream launches with K split over fewer warps where that puts the grid
#              in one wave (the default since the twenty-second session) against the two-wave
#              form (-DNVS_FP8_WAVE=0, $BUILD_DIR-wave0): bench_kernels rows (fp8 rows) from
#              both, gpu_bench FP8 batch 1 and batch 8 at 2,048, twice each
#     l2hot    bench_kernels l2: one token's GEMV on the model's shapes with its weight cold and
#              hot in L2 (what an L2-resident weight would save; twenty-second session)
#     fp8wide  FP8 PLAIN launches of at most a block an SM in the 16-warp form (the
#              default) against the 8-warp form (-DNVS_FP8_WIDE=0, $BUILD_DIR-wide0):
#              bench_kernels rows (fp8 rows) from both, gpu_bench FP8 batch 1 and 8 at 2,048,
#              twice each
#     profile  tests/gpu/profile.sh of a batch-64 decode step and a 2,048-token prefill
#     nvs      bench_kernels nvfp4 (the model's nvfp4 shapes against the copy bandwidth), the
#              stream kernel's SASS opcodes by count, ncu sections of one of its launches
#     profile1 tests/gpu/profile.sh of batch-1 decode steps at a 2,048-token context (issue 17)
#     trace1   the kernels' timeline of gpu_bench's batch-1 decode steps at 2,048 (libktrace.so,
#              a CUPTI injection: graph launches as they run, not one kernel at a time as ncu):
#              per kernel its share of the step's critical path (tests/gpu/ktrace.py)
#     trace4, trace8  the same for batch 4 and 8 at 2,048 (the few-row paths a verify window and
#              a few streams take)
#     trace64  the same for batch 64 at a 128-token prompt (issue 16's many-stream step)
#     smoke    gpu_smoke on CONFIG: batch-1 decode with MTP upkeep, verify steps of k = 1..4 rows
#              against a plain step, spec windows (issue 16's verify-cost floor)
#     rowsab   the one-token bf16 row kernel, the slot-parallel expert down stage and one token's
#              FP8 experts on the cores against the kernels before them (a second build):
#              gpu_bench batch 1 at 2,048, BF16, FP8 and NVFP4 configs; bench_kernels rows
#     routerab the one-token router (weights loaded before the PDL wait) against the kernel
#              before it (-DMOE_ROUTER1=0 build): gpu_bench batch 1 at 2,048, BF16, FP8, NVFP4
#     gdnab    the GDN conv and recurrence reading their states before the PDL wait against
#              after it (-DGDN_PRE_WAIT=0 build), the same three runs
#     sessab   the eighteenth session's batch-1 changes together against a build with all of
#              them off, the same three runs
#     sessab64 sessab's two builds at batch 8 (prompt 2,048) and 64 (prompt 1,024) on CONFIG
#     shab     the folded shared expert's gate/up before the routed experts' PDL wait against
#              a build whose gate/up launches wait first (-DMOE_SH_EARLY=0): the same three runs
#     shab64   shab's two builds at batch 8 (prompt 2,048) and 64 (prompt 1,024) on CONFIG
#     convab   the GDN conv inside the recurrence's launch for one-row passes against the two
#              launches (-DGDN_CONV_FUSED=0 build): the same three runs
#     sess19ab both of the nineteenth session's changes against a build with both off
#     sess24ab64 the twenty-fourth session's change (the norms' early trigger) off against on at
#              batch 8 and 64 on CONFIG
#     sass     the SASS of the step's stream, router, norm and GDN kernels into logs.tgz
#     lmab     the bf16 lm_head's split GEMM from 2 rows (default) against from 4 (-DLM_ROWS_BF16=4):
#              gpu_bench NVFP4 and BF16 at batch 2, twice
#     slotwave the nvfp4 SLOT launch of 2-8 tokens at split 1 (-DNVS_SLOT_WAVE_NVFP4=1) against
#              the default split: gpu_bench NVFP4 at batch 4 and 8, twice
#     routerrb the 2-8-token router at 4 rows a block with its warp routing by redux.sync (the
#              default since the twenty-seventh session) against one row a block
#              (-DMOE_ROUTER_RB=1, $BUILD_DIR-rb1): gpu_bench NVFP4 at batch 2, 4, 8 and FP8 /
#              BF16 at 4 (the same tokens_hash: the same bits), gpu_smoke's verify steps three
#              times each, the 4-row timeline from both
#     gqapre   the GQA decode attention's first K/V stages before its PDL wait (the default
#              since the twenty-seventh session) against the wait first (-DGQA_PRE_WAIT=0,
#              $BUILD_DIR-gqawait): bench_attn decode, gpu_bench batch 1 at 2,048 in three
#              formats and NVFP4 at batch 8, twice each (the same tokens_hash)
#     sess25ab the twenty-fifth session's few-row changes against a build with them off
#              (SESS25_OFF): gpu_bench at batch 1, 2, 4, 8, NVFP4, FP8 and BF16
#     normab   the norms letting the next kernel be placed before their PDL wait against waiting
#              first (-DNORM_PDL_EARLY=0 build): gpu_bench batch 1 at 2,048, three formats, twice
#     prompts3 gpu_bench batch 1 at prompts 512 and 8,192, BF16, FP8, NVFP4 (the default build)
#     gdntiles the batch-1 GDN recurrence in 4 and 2 value-column tiles a head against 1 (builds
#              with -DGDN_ONE_ROW_TILES=4 / 2), the same three runs each
#     fp8moe   the FP8 routed experts on the stream kernel (the default) against the CUDA-core
#              kernels (a second build, -DMOE_STREAM_FP8_AUTO=0): bench_kernels' moe rows,
#              gpu_bench FP8 at batch 1, 8
#     nvsminb  the NVFP4 stream kernel at 3 blocks per SM (the default, NVS_MIN_BLOCKS) against 2
#              (a second build with -DNVS_MIN_BLOCKS=2 in $BUILD_DIR-minb2): bench_kernels nvfp4
#              and gpu_bench batch 1 at 2,048 from each build (the same tokens_hash)
# Env: BUILD_DIR ($PWD/build-gpudev), CONFIG (tests/configs/qwen3.6-35b-a3b-nvfp4.json),
# TERN_WERROR (OFF), MEASURE_BUDGET (540: no stage starts after budget - 60 s; a TERM or INT
# still writes the summary of the stages before). The default stages take about 8 minutes on an H200; split them over two
# calls (e.g. `tests tiles decode`, then `prefill stack profile`) when the first call must leave
# room.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$root/gpu-logs}
b=${BUILD_DIR:-$root/build-gpudev}
cfg=${CONFIG:-$root/tests/configs/qwen3.6-35b-a3b-nvfp4.json}
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(tests tiles decode prefill stack)
logs=$(mktemp -d /tmp/tern-measure.XXXXXX)
mkdir -p "$out"
t_start=$(date +%s)
lines=()
note() { lines+=("$(printf '%-16s %s' "$1" "$2")"); echo "measure: $1 $2"; }
# note every line of stdin under PREFIX (fed by redirection, not a pipe: lines must persist)
note_lines() { local l; while IFS= read -r l; do note "$1" "$l"; done; }
elapsed() { echo "$(( $(date +%s) - t_start )) s"; }
# the code measured (kernels, services, common, model), whatever git says there (the GPU
# machine's copy may carry a stale .git):
# run the same line in a checkout to match a commit
tree_sum() { (cd "$root" && find kernels services common model -type f | LC_ALL=C sort |
  xargs cat | sha1sum | cut -c1-12); }

# ab_build NAME FLAGS: $b and a second gpu_bench build with FLAGS for the CUDA and the C sources
# (the runner's switches live in its C files) in $b-NAME (kept: a later stage with the same NAME
# reuses it); 1 when a build failed (noted)
ab_build() {
  build_benches || { note "$1" "build failed"; return 1; }
  [ -x "$b-$1/bin/gpu_bench" ] && return 0
  cmake -S "$root/tests/gpu" -B "$b-$1" -DCMAKE_CUDA_ARCHITECTURES=90a "-DCMAKE_CUDA_FLAGS=$2" \
    "-DCMAKE_C_FLAGS=$2" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTERN_WERROR="${TERN_WERROR:-OFF}" \
    > "$logs/cfg_$1.log" 2>&1 &&
    cmake --build "$b-$1" -j"$(nproc)" --target gpu_bench > "$logs/build_$1.log" 2>&1 ||
    { note "$1" "A/B build failed"; return 1; }
}

# the eighteenth session's batch-1 changes off (sessab, sessab64)
SESS_OFF="-DMOE_ROUTER1=0 -DGDN_PRE_WAIT=0 -DGDN_ONE_ROW_TILES=4 -DMERGE_PF=0 -DEMBED_RMSNORM_FUSED=0"

# the twenty-fifth session's few-row changes off (sess25ab)
SESS25_OFF="-DNVS_EXPERT_WAVE=0 -DNVS_MAX_DYN_SMEM=40960 -DLINEAR_SPLIT_ONE_PASS=0 -DLM_ROWS_BF16=4"
# ab_formats STAGE FLAGS: gpu_bench batch 1 at 2,048 on the BF16, FP8 and NVFP4 configs from a
# second build with FLAGS ("before") and from $b ("after"); 1 when a build failed (noted)
ab_formats() {
  local st=$1 b2=$b-$1 f v bb cf
  ab_build "$st" "$2" || return 1
  for f in bf16 fp8 nvfp4; do
    cf=$root/tests/configs/qwen3.6-35b-a3b$([ $f = bf16 ] || echo "-$f").json
    for v in before after; do
      bb=$b
      [ $v = before ] && bb=$b2
      bench_b "$st" "$f $v" "$bb" "$cf" 1 "$logs/${st}_${f}_$v.txt"
    done
  done
}

# ab_batches STAGE NAME FLAGS: the A/B build NAME (ab_build, reused when there) against $b at
# batch 8 (prompt 2,048) and batch 64 (prompt 1,024) on CONFIG; 1 when a build failed (noted)
ab_batches() {
  local st=$1 b2=$b-$2 v bb
  ab_build "$2" "$3" || return 1
  for pt in "8 2048" "64 1024"; do
    set -- $pt
    for v in before after; do
      bb=$b
      [ $v = before ] && bb=$b2
      timeout 90 "$bb/bin/gpu_bench" "$cfg" --prompt-len $2 --batch $1 --gen 64 --chunk 2048 \
        > "$logs/${st}_$1_$v.txt" 2>&1
      note "$st" "batch $1 prompt $2 $v rc=$? ($(elapsed))"
      note_lines "  $st" < <(grep '^bench ' "$logs/${st}_$1_$v.txt" | grep -oE '(decode_tok_s_stream|decode_tok_s_total|itl_p50_ms|fraction|tokens_hash)=[^ ]*' | paste -sd' ')
    done
  done
}

# trace_ab STAGE BATCH LABEL BUILD: the timeline of BUILD's gpu_bench decode steps at BATCH
# (prompt 2,048) through $b's libktrace.so, its top kernels into the summary; 1 without libktrace
trace_ab() {
  cmake --build "$b" --target ktrace >> "$logs/build.log" 2>&1 ||
    { note "$1" "no libktrace (CUPTI not found by CMake)"; return 1; }
  local f=$logs/$1_trace$2_$3
  CUDA_INJECTION64_PATH="$b/lib/libktrace.so" KTRACE_OUT="$f.csv" \
    timeout 150 "$4/bin/gpu_bench" "$cfg" --prompt-len 2048 --batch "$2" --gen 32 --chunk 2048 \
    > "$f.txt" 2>&1
  note "$1" "trace$2 $3 rc=$? ($(elapsed))"
  note_lines "  $1 $3" < <(python3 "$root/tests/gpu/ktrace.py" "$f.csv" --top 14 2>&1)
  gzip -f "$f.csv"
}

# model_tests STAGE LABEL BUILD: ktest_gpu_model and ktest_gpu_spec of BUILD (the whole tiny
# model on the GPU against the transformers fixtures and the CPU engine, the verify windows)
model_tests() {
  local t
  cmake --build "$3" -j"$(nproc)" --target ktest_gpu_model ktest_gpu_spec > "$logs/build_$1_model.log" 2>&1 ||
    { note "$1" "$2 model tests build failed"; return 1; }
  for t in ktest_gpu_model ktest_gpu_spec; do
    (cd "$root" && TERN_SOURCE_DIR="$root" timeout 200 "$3/bin/$t") > "$logs/$1_$t.txt" 2>&1
    note "$1" "$2 $t rc=$? $(grep -cE '^fixture=.* ok' "$logs/$1_$t.txt") fixture checks ok, $(grep -cE '^fixture=.*FAIL' "$logs/$1_$t.txt") FAIL ($(elapsed))"
  done
}

build_benches() {
  [ -x "$b/bin/gpu_bench" ] && [ -x "$b/bin/bench_linear" ] && [ -x "$b/bin/bench_kernels" ] &&
    return 0
  cmake -S "$root/tests/gpu" -B "$b" -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTERN_WERROR="${TERN_WERROR:-OFF}" > "$logs/cfg.log" 2>&1 &&
    cmake --build "$b" -j"$(nproc)" --target gpu_bench bench_linear bench_kernels \
      > "$logs/build.log" 2>&1
}

# one gpu_bench run: NAME LIMIT ARGS...; its "bench" lines, trimmed, into the summary
bench() {
  local n=$1 lim=$2
  shift 2
  timeout "$lim" "$b/bin/gpu_bench" "$cfg" "$@" --json "$logs/bench.jsonl" > "$logs/$n.txt" 2>&1
  local rc=$?
  note "$n" "rc=$rc ($(elapsed))"
  note_lines "  $n" < <(grep '^bench ' "$logs/$n.txt" | sed -E 's/^bench //; s/ (config|experts|chunk|graphs|mean_ctx|bytes_per_step|experts_touched|copy_gbs|roofline_steps_s|itl_p90_ms|finite)=[^ ]*//g')
}

# one gpu_bench run at a 2,048-token prompt: STAGE LABEL BUILD CONFIG BATCH LOG; its rc and key
# figures into the summary
bench_b() {
  timeout 90 "$3/bin/gpu_bench" "$4" --prompt-len 2048 --batch "$5" --gen 64 --chunk 2048 > "$6" 2>&1
  note "$1" "$2 rc=$? ($(elapsed))"
  note_lines "  $1" < <(grep '^bench ' "$6" | grep -oE '(decode_tok_s_stream|decode_tok_s_total|itl_p50_ms|fraction|graph_kernels|tokens_hash)=[^ ]*' | paste -sd' ')
}

# FP8 gpu_bench from $b ("on") and from the A/B build $b-NAME: STAGE NAME REPS "BATCHES"
fp8_ab() {
  local rep v bb bt
  for rep in $(seq "$3"); do
    for v in "$2" on; do
      bb=$b; [ "$v" = on ] || bb=$b-$v
      for bt in $4; do
        bench_b "$1" "fp8 $v batch=$bt" "$bb" "$root/tests/configs/qwen3.6-35b-a3b-fp8.json" "$bt" \
          "$logs/$1_${v}_${bt}_$rep.txt"
      done
    done
  done
}

# an FP8 A/B: bench_kernels rows (the lines matching PATTERN) from $b and from the A/B build
# $b-NAME with FLAGS, then fp8_ab at batch 1 and 8, twice: STAGE NAME FLAGS PATTERN
fp8_rows_ab() {
  local st=$1 nm=$2 v bb
  build_benches || { note "$st" "build failed"; return 1; }
  ab_build "$nm" "$3" || return 1
  cmake --build "$b-$nm" -j"$(nproc)" --target bench_kernels > "$logs/build_${nm}_bk.log" 2>&1 ||
    { note "$st" "bench_kernels build failed ($nm)"; return 1; }
  for v in on "$nm"; do
    bb=$b; [ "$v" = on ] || bb=$b-$v
    timeout 90 "$bb/bin/bench_kernels" rows > "$logs/${st}_rows_$v.txt" 2>&1
    note "$st" "rows $v rc=$? ($(elapsed))"
    note_lines "  $v" < <(grep -E "$4" "$logs/${st}_rows_$v.txt" | sed -E 's/ +/ /g')
  done
  fp8_ab "$st" "$nm" 2 "1 8"
}

# the summary and the logs; also when the call's time limit stops the run (TERM/INT: the stage
# that was running is named, what finished before it is kept)
finish() {
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader \
    > "$logs/gpu.txt" 2> /dev/null || echo "no GPU" > "$logs/gpu.txt"
  { echo "==== measure ($(cat "$logs/gpu.txt"), commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null), tree $(tree_sum), $(date -u +%FT%TZ), $(elapsed)) ===="
    printf '%s\n' "${lines[@]}"; } | tee "$out/measure.txt"
  tar czf "$out/logs.tgz" -C "$logs" . 2>/dev/null
  rm -rf "$logs"
}
trap 'note "${cur:-?}" "stopped by a signal ($(elapsed))"; finish; exit 124' TERM INT
budget=${MEASURE_BUDGET:-540}
for s in "${stages[@]}"; do
  cur=$s
  # a stage is not started past the budget less a minute (a device call stops at 600 s)
  if (( $(date +%s) - t_start > budget - 60 )); then
    note "$s" "skipped: $(elapsed) of the ${budget} s budget used"
    continue
  fi
  case $s in
    tests)
      OUT=$logs/run BUILD_DIR=$b TERN_WERROR=${TERN_WERROR:-OFF} timeout 300 \
        "$root/tests/gpu/run.sh" --quick > "$logs/run.txt" 2>&1
      rc=$?
      # the summary's program lines (the log above it names some programs twice)
      sed -n '/^==== summary/,$p' "$logs/run.txt" | grep -v '^overall' > "$logs/run_summary.txt"
      note tests "rc=$rc ($(elapsed)): $(grep -c ' PASS ' "$logs/run_summary.txt") programs PASS, $(grep -cE ' (FAIL|SKIP) ' "$logs/run_summary.txt") FAIL or SKIP"
      note_lines "  tests" < <(grep -E ' (FAIL|SKIP) |gpu model checks' "$logs/run.txt")
      ;;
    tiles)
      build_benches || { note tiles "build failed (see logs)"; continue; }
      timeout 180 "$b/bin/bench_linear" experts > "$logs/bench_linear_experts.txt" 2>&1
      note tiles "experts rc=$? ($(elapsed))"
      note_lines "  tiles" < <(grep -E '^threshold|^experts_tiles' "$logs/bench_linear_experts.txt" |
        sed -E 's/shape=E256xK8xI512xH2048 //')
      timeout 90 "$b/bin/bench_linear" quick > "$logs/bench_linear_quick.txt" 2>&1
      note tiles "quick rc=$? ($(elapsed))"
      note_lines "  tiles" < <(grep -E '^threshold (dense|dense_tiles) fmt=nvfp4|^dense(_tiles)? fmt=nvfp4 .* n=(8|16|24|32|64|128) ' \
        "$logs/bench_linear_quick.txt")
      ;;
    decode)
      build_benches || { note decode "build failed"; continue; }
      bench decode 90 --prompt-len 128 --batch 8,16,64 --gen 64 --chunk 2048
      ;;
    decode_ab)
      build_benches || { note decode_ab "build failed"; continue; }
      bench decode_dtoff 90 --prompt-len 128 --batch 8,16,64 --gen 64 --chunk 2048 --dense-tiles -1
      ;;
    pool)
      build_benches || { note pool "build failed"; continue; }
      bench pool_slots 90 --prompt-len 2048 --batch 1 --gen 64 --chunk 2048 --state-in-pool 0
      bench pool_pool 90 --prompt-len 2048 --batch 1 --gen 64 --chunk 2048 --state-in-pool 1
      bench pool64_slots 90 --prompt-len 128 --batch 64 --gen 64 --chunk 2048 --state-in-pool 0
      bench pool64_pool 90 --prompt-len 128 --batch 64 --gen 64 --chunk 2048 --state-in-pool 1
      ;;
    decode1q)
      build_benches || { note decode1q "build failed"; continue; }
      bench decode1q 150 --prompt-len 2048 --batch 1 --gen 64 --chunk 2048
      ;;
    formats1)
      build_benches || { note formats1 "build failed"; continue; }
      cfg0=$cfg
      for f in fp8 bf16 nvfp4; do
        cfg=$root/tests/configs/qwen3.6-35b-a3b$([ $f = bf16 ] || echo "-$f").json
        bench "formats1_$f" 120 --prompt-len 2048 --batch 1 --gen 64 --chunk 2048
      done
      cfg=$cfg0
      ;;
    decode1)
      build_benches || { note decode1 "build failed"; continue; }
      bench decode1 90 --prompt-len 512,2048,8192 --batch 1 --gen 64 --chunk 2048
      bench decode1_pdloff 90 --prompt-len 512,2048,8192 --batch 1 --gen 64 --chunk 2048 --pdl -1
      [ -n "${FUSEOFF:-}" ] &&
        bench decode1_fuseoff 90 --prompt-len 512,2048,8192 --batch 1 --gen 64 --chunk 2048 --fuse -1
      ;;
    prefill)
      build_benches || { note prefill "build failed"; continue; }
      bench prefill 90 --prompt-len 512,2048,8192 --batch 1 --gen 32 --chunk 2048
      bench prefill_gcoff 90 --prompt-len 512,2048,8192 --batch 1 --gen 32 --chunk 2048 --gdn-chunk -1
      bench prefill_p64x2 90 --prompt-len 512,2048,8192 --batch 1 --gen 32 --chunk 2048 --grouped-pipe64 1
      ;;
    attn)
      # bench_attn: the prefill attention paths (cores, mma, flash) in TFLOP/s, decode in GB/s
      build_benches && { [ -x "$b/bin/bench_attn" ] || cmake --build "$b" -j"$(nproc)" \
          --target bench_attn > "$logs/build_attn.log" 2>&1; } || { note attn "build failed"; continue; }
      timeout 120 "$b/bin/bench_attn" > "$logs/bench_attn.txt" 2>&1
      note attn "rc=$? ($(elapsed))"
      note_lines "  attn" < <(grep -E '^copy|^attn_prefill|^attn_decode|^attn_split' "$logs/bench_attn.txt" | sed -E 's/  +/ /g')
      ;;
    wgattn)
      # prefill through the wgmma attention (the default where it runs) against the mma.sync
      # FLASH kernel (--wgmma-attn -1), same build: TTFT of 2,048- and 8,192-token prompts in
      # one step each, NVFP4 (CONFIG), twice each
      build_benches || { note wgattn "build failed"; continue; }
      for rep in 1 2; do
        bench wgattn_on$rep 120 --prompt-len 2048,8192 --batch 1 --gen 8 --chunk 8192
        bench wgattn_off$rep 120 --prompt-len 2048,8192 --batch 1 --gen 8 --chunk 8192 --wgmma-attn -1
      done
      ;;
    wgab)
      # the wgmma prefill attention's variants: bench_attn prefill (8,192 rows at 0 and the last
      # 2,048 of 131,072, FLASH and WGMMA, bf16 and fp8) from builds with a barrier at each
      # step's end (-DFWG_NOEND=0) or only at its start (1, the default); the SASS's warpgroup
      # instructions counted, and with WGAB_NCU=1 Nsight Compute of one bf16 WGMMA launch
      wgv=("e1:-DFWG_NOEND=0" "e0:-DFWG_NOEND=1")
      for v in "${wgv[@]}"; do
        n=${v%%:*} f=${v#*:} bb=$b-wg$n
        [ -x "$bb/bin/bench_attn" ] || { cmake -S "$root/tests/gpu" -B "$bb" -DCMAKE_CUDA_ARCHITECTURES=90a \
            "-DCMAKE_CUDA_FLAGS=$f" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTERN_WERROR=OFF > "$logs/cfg_wg$n.log" 2>&1 &&
          cmake --build "$bb" -j"$(nproc)" --target bench_attn > "$logs/build_wg$n.log" 2>&1; } ||
          { note wgab "$n build failed"; continue; }
        for rep in 1 2; do
          timeout 60 "$bb/bin/bench_attn" prefill > "$logs/wg_$n.txt" 2>&1
          note wgab "$n rc=$? ($(elapsed))"
          note_lines "  wg$n" < <(grep -E '^attn_prefill' "$logs/wg_$n.txt" | sed -E 's/  +/ /g')
        done
        if [ "${WGAB_NCU:-0}" = 1 ]; then
          timeout 100 ncu --clock-control none --kernel-name-base demangled \
            -k 'regex:unsigned short, \(bool\)1>' -c 1 \
            --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
            "$bb/bin/bench_attn" prefill > "$logs/wg_ncu_$n.txt" 2>&1
          note wgab "$n ncu rc=$?"
          note_lines "  wg$n" < <(grep -E 'Duration|Compute \(SM\) Throughput|Memory Throughput|Eligible Warps|No Eligible|Warp Cycles Per Issued|Achieved Occ' "$logs/wg_ncu_$n.txt" | sed -E 's/  +/ /g' | head -30)
        fi
        obj=$(find "$bb" -name 'attn_prefill.cu.o' | head -1)
        [ -n "$obj" ] && note_lines "  wg$n" < <(cuobjdump -sass -fun '_Z25attn_prefill_flash_kernelILi256ELi8ELi64ELb0EtLb1EEvPfS0_iPKfS2_PKT3_S5_PKiiPK16attn_prefill_seqS8_iiiff' "$obj" 2>&1 |
          grep -oE 'WARPGROUP\.[A-Z]+[^ ;]*|HGMMA\.[^ ]*|BAR\.SYNC[^ ;]*' | sort | uniq -c | sed -E 's/  +/ /g' | paste -sd' ')
      done
      ;;
    attnab)
      # the FLASH prefill attention's block shape: warps x keys a tile (FNW, FBN) as built by
      # default (8 x 64) against 4 x 32 (96 KiB: two blocks an SM) and 8 x 32, bench_attn's
      # flash rows from a build of each ($BUILD_DIR-faNW_BN)
      build_benches && { [ -x "$b/bin/bench_attn" ] || cmake --build "$b" -j"$(nproc)" \
          --target bench_attn > "$logs/build_attn.log" 2>&1; } || { note attnab "build failed"; continue; }
      for v in 8_64 4_32 8_32; do
        bb=$b
        if [ $v != 8_64 ]; then
          bb=$b-fa$v
          [ -x "$bb/bin/bench_attn" ] || { cmake -S "$root/tests/gpu" -B "$bb" -DCMAKE_CUDA_ARCHITECTURES=90a \
            -DCMAKE_CUDA_FLAGS="-DFNW=${v%_*} -DFBN=${v#*_}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
            > "$logs/cfg_fa$v.log" 2>&1 && cmake --build "$bb" -j"$(nproc)" --target bench_attn \
            > "$logs/build_fa$v.log" 2>&1; } || { note attnab "fa$v build failed"; continue; }
        fi
        timeout 60 "$bb/bin/bench_attn" > "$logs/attn_fa$v.txt" 2>&1
        note attnab "FNW_FBN=$v rc=$? ($(elapsed))"
        note_lines "  fa$v" < <(grep -E '^attn_prefill bf16 flash' "$logs/attn_fa$v.txt" | sed -E 's/  +/ /g')
      done
      ;;
    gqaab)
      build_benches && { [ -x "$b/bin/bench_attn" ] || cmake --build "$b" -j"$(nproc)" \
          --target bench_attn > "$logs/build_attn.log" 2>&1; } || { note gqaab "build failed"; continue; }
      for v in new gqa4 gqaold; do
        bb=$b
        case $v in
          gqa4) fl="-DGQA_E4M3_WARPS=4" ;;
          gqaold) fl="-DGQA_E4M3_WARPS=4 -DGQA_V_PAIR=0" ;;
          *) fl="" ;;
        esac
        if [ $v != new ]; then
          bb=$b-$v
          [ -x "$bb/bin/bench_attn" ] || { cmake -S "$root/tests/gpu" -B "$bb" -DCMAKE_CUDA_ARCHITECTURES=90a \
            "-DCMAKE_CUDA_FLAGS=$fl" -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$logs/cfg_$v.log" 2>&1 &&
            cmake --build "$bb" -j"$(nproc)" --target bench_attn > "$logs/build_$v.log" 2>&1; } ||
            { note gqaab "$v build failed"; continue; }
        fi
        timeout 90 "$bb/bin/bench_attn" decode > "$logs/attn_$v.txt" 2>&1
        note gqaab "$v rc=$? ($(elapsed))"
        note_lines "  $v" < <(grep -E '^copy|^attn_decode .* gqa' "$logs/attn_$v.txt" | sed -E 's/  +/ /g')
      done
      ;;
    long)
      # issue 16's long prompt: 131,072 tokens at batch 1 (TTFT, then decode at that context)
      # at the engine's 8,192-token step, and 2,048 on the same model (max_model_len sized for the long one: decode at 2,048
      # should not depend on it)
      build_benches || { note long "build failed"; continue; }
      bench long 200 --prompt-len 2048,131072 --batch 1 --gen 32 --chunk 8192
      # the same with fp8 K/V (half the bytes a decode step's attention reads at 131,072)
      bench long_fp8 200 --prompt-len 2048,131072 --batch 1 --gen 32 --chunk 8192 \
        --kv-cache-dtype fp8
      ;;
    gdn)
      build_benches || { note gdn "build failed"; continue; }
      timeout 90 "$b/bin/bench_kernels" gdn > "$logs/bench_gdn.txt" 2>&1
      note gdn "rc=$? ($(elapsed))"
      note_lines "  gdn" < <(grep -E '^copy|^gdn_chunk|^threshold' "$logs/bench_gdn.txt")
      ;;
    stack)
      OUT=$logs STREAMS=64 POINT_TIMEOUT=100 timeout 150 "$root/tests/gpu/stack.sh" "$cfg" \
        > "$logs/stack.txt" 2>&1
      note stack "rc=$? ($(elapsed))"
      note_lines "  stack" < <(grep -E 'output tokens/s|TPOT|TTFT|completed|failed' "$logs/stack.txt")
      ;;
    specgate)
      for k in 0 3; do
        mkdir -p "$logs/spec$k"
        OUT=$logs/spec$k SPEC=$k STREAMS=1 REQS_PER_STREAM=3 PROMPT=512 OUTPUT=1024 \
          POINT_TIMEOUT=100 timeout 200 "$root/tests/gpu/stack.sh" "$cfg" > "$logs/spec$k.txt" 2>&1
        note specgate "K=$k rc=$? ($(elapsed))"
        note_lines "  K=$k" < <(grep -E 'output tokens/s|TPOT|completed|failed' "$logs/spec$k.txt")
        note_lines "  K=$k" < <(grep -h 'spec_stats' "$logs/spec$k/stack_worker.log" | tail -n 2 |
          grep -oE '(gate|gated_tokens|probes|round_ms|plain_step_ms|accept[a-z_]*|drafts?[a-z_]*)=[^ ]*' | paste -sd' ')
      done
      ;;
    profile)
      build_benches || { note profile "build failed"; continue; }
      OUT=$logs timeout 200 "$root/tests/gpu/profile.sh" "$b" decode 6 -- "$cfg" --prompt-len 128 \
        --batch 64 --gen 4 --chunk 2048 > /dev/null 2>&1
      note profile "decode64 rc=$? ($(elapsed))"
      note_lines "  profile" < <(head -12 "$logs/profile_decode.txt" 2>/dev/null)
      OUT=$logs timeout 200 "$root/tests/gpu/profile.sh" "$b" prefill 1 -- "$cfg" --prompt-len 2048 \
        --batch 1 --gen 4 --chunk 2048 > /dev/null 2>&1
      note profile "prefill2048 rc=$? ($(elapsed))"
      note_lines "  profile" < <(head -12 "$logs/profile_prefill.txt" 2>/dev/null)
      rm -f "$logs"/profile_*.csv
      ;;
    nvsminb)
      build_benches || { note nvsminb "build failed"; continue; }
      b2=$b-minb2
      if [ ! -x "$b2/bin/gpu_bench" ] || [ ! -x "$b2/bin/bench_kernels" ]; then
        cmake -S "$root/tests/gpu" -B "$b2" -DCMAKE_CUDA_ARCHITECTURES=90a \
          -DCMAKE_CUDA_FLAGS=-DNVS_MIN_BLOCKS=2 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
          -DTERN_WERROR="${TERN_WERROR:-OFF}" > "$logs/cfg_minb2.log" 2>&1 &&
          cmake --build "$b2" -j"$(nproc)" --target gpu_bench bench_kernels \
            > "$logs/build_minb2.log" 2>&1 || { note nvsminb "minb2 build failed"; continue; }
      fi
      for v in 3 2; do
        bb=$b
        [ $v = 2 ] && bb=$b2
        timeout 90 "$bb/bin/bench_kernels" nvfp4 > "$logs/nvs_minb$v.txt" 2>&1
        note nvsminb "minb=$v bench rc=$? ($(elapsed))"
        note_lines "  minb$v" < <(grep -E '^gemv nvfp4 stream|^moe' "$logs/nvs_minb$v.txt")
        timeout 90 "$bb/bin/gpu_bench" "$cfg" --prompt-len 2048 --batch 1 --gen 64 --chunk 2048 \
          > "$logs/decode1_minb$v.txt" 2>&1
        note nvsminb "minb=$v decode1 rc=$? ($(elapsed))"
        note_lines "  minb$v" < <(grep '^bench ' "$logs/decode1_minb$v.txt" | grep -oE '(decode_tok_s_stream|itl_p50_ms|fraction|tokens_hash)=[^ ]*' | paste -sd' ')
      done
      ;;
    rowsab)
      # the row kernel (one-token bf16 GEMVs, internal/wrows.cuh), the slot-parallel expert down
      # stage and one token's FP8 experts on it (moe_expert.cu) against the kernels before them
      # (a build with -DGEMV_BF16_ROWS_AUTO=0 -DMOE_SLOTS_MAX_TOK=0 -DMOE_STREAM_FP8_MIN_TOK=1):
      # gpu_bench batch 1 at 2,048 on the BF16, FP8 and NVFP4 (its lm_head is bf16) configs;
      # bench_kernels' one-token rows for bf16 and fp8
      ab_formats "$s" "-DGEMV_BF16_ROWS_AUTO=0 -DMOE_SLOTS_MAX_TOK=0 -DMOE_STREAM_FP8_MIN_TOK=1" ||
        continue
      timeout 120 "$b/bin/bench_kernels" rows > "$logs/${s}_kernels.txt" 2>&1
      note "$s" "bench_kernels rc=$? ($(elapsed))"
      note_lines "  $s" < <(grep -E '^copy|^moe|^gemv (bf16|fp8) +(cores|stream|rows) .*tok= 1 ' "$logs/${s}_kernels.txt" | cut -c1-150)
      ;;
    sessab)
      # the eighteenth session's batch-1 changes together (the router's early loads, the GDN
      # states before the wait, one GDN block a head for one-row passes, the merge's early partial
      # rows, the embedding with the first norm) against a build with all of them off
      ab_formats "$s" "$SESS_OFF" || continue
      ;;
    sessab64)
      # the same two builds as sessab (its A/B build reused when it is there) at batch 8 (prompt
      # 2,048) and batch 64 (prompt 1,024) on CONFIG: the session's changes where the batch-1
      # rules do not apply (the merge's early loads, the GDN states before the wait do)
      ab_batches "$s" sessab "$SESS_OFF" || continue
      ;;
    shab)
      # the folded shared expert's gate/up before the routed experts' PDL wait (moe_expert_sh_cuda,
      # the runner's fold_early) against a build whose gate/up launches wait first
      # (-DMOE_SH_EARLY=0): gpu_bench batch 1 at 2,048, BF16, FP8, NVFP4 (the same tokens_hash)
      ab_formats "$s" "-DMOE_SH_EARLY=0" || continue
      ;;
    shab64)
      # shab's two builds at batch 8 and 64 on CONFIG (the fold covers up to 23 rows)
      ab_batches "$s" shab "-DMOE_SH_EARLY=0" || continue
      ;;
    convab)
      # the GDN conv inside the recurrence's launch for one-row passes (gdn_seq_conv_step_cuda,
      # the runner's gdn_conv_fused) against the two launches (-DGDN_CONV_FUSED=0): gpu_bench
      # batch 1 at 2,048, BF16, FP8, NVFP4 (the same tokens_hash)
      ab_formats "$s" "-DGDN_CONV_FUSED=0" || continue
      ;;
    sess24ab64)
      # the twenty-fourth session's change (the norms' early trigger) off against on at batch 8
      # (prompt 2,048) and 64 (prompt 1,024) on CONFIG
      ab_batches "$s" sess24 "-DNORM_PDL_EARLY=0" || continue
      ;;
    sass)
      # the SASS of the decode step's stream, router and norm kernels (cuobjdump, from
      # bench_kernels) into logs.tgz (sass_step.txt), and each nvs_kernel form's instruction count
      build_benches || { note "$s" "build failed"; continue; }
      command -v cuobjdump > /dev/null || { note "$s" "no cuobjdump"; continue; }
      cuobjdump -sass "$b/bin/bench_kernels" 2>&1 | awk '
        /Function :/ { f = /nvs_kernel|moe_router_kernel|fused_add_rmsnorm|gdn_seq_step/ }
        f' > "$logs/sass_step.txt"
      note_lines "  sass" < <(awk '
        /Function :/ { if (f) printf "%6d %s\n", n, name; f = /nvs_kernel/; name = $3; n = 0; next }
        f && /^ +\/\*[0-9a-f]+\*\// { n++ }
        END { if (f) printf "%6d %s\n", n, name }' "$logs/sass_step.txt")
      ;;
    lmab)
      # the bf16 lm_head's split GEMM from 2 rows (the default) against from 4 (-DLM_ROWS_BF16=4):
      # gpu_bench at batch 2 (NVFP4, BF16), twice
      ab_build lmab "-DLM_ROWS_BF16=4" || continue
      for rep in 1 2; do
        for f in nvfp4 bf16; do
          cf=$root/tests/configs/qwen3.6-35b-a3b$([ $f = bf16 ] || echo "-$f").json
          for v in before after; do
            bb=$b; [ $v = before ] && bb=$b-lmab
            bench_b lmab "$f batch 2 $v" "$bb" "$cf" 2 "$logs/lmab_${f}_${v}_$rep.txt"
          done
        done
      done
      ;;
    slotwave)
      # the nvfp4 SLOT launch of 2-8 tokens at split 1 (one wave, -DNVS_SLOT_WAVE_NVFP4=1)
      # against nvs_pick_wk's split (the default): gpu_bench NVFP4 at batch 4 and 8, twice
      ab_build slotwave "-DNVS_SLOT_WAVE_NVFP4=1" || continue
      for rep in 1 2; do
        for bt in 4 8; do
          for v in default wave1; do
            bb=$b; [ $v = wave1 ] && bb=$b-slotwave
            bench_b slotwave "nvfp4 batch $bt $v" "$bb" "$cfg" "$bt" "$logs/slotwave_${bt}_${v}_$rep.txt"
          done
        done
      done
      ;;
    sess25ab)
      # the twenty-fifth session's few-row changes (the experts' launches of 2-8 tokens in one
      # wave, 68 KB of staged activations, the lm_head's split GEMM in one pass and from 2 rows)
      # against a build with all of them off: gpu_bench at batch 1, 2, 4 and 8 (prompt 2,048)
      # on the NVFP4, FP8 and BF16 configs, "before" then "after"
      ab_build sess25ab "$SESS25_OFF" || continue
      for fb in "nvfp4 1" "nvfp4 2" "nvfp4 4" "nvfp4 8" "fp8 1" "fp8 2" "fp8 4" "fp8 8" \
        "bf16 1" "bf16 2" "bf16 4" "bf16 8"; do
        set -- $fb
        cf=$root/tests/configs/qwen3.6-35b-a3b$([ $1 = bf16 ] || echo "-$1").json
        for v in before after; do
          bb=$b; [ $v = before ] && bb=$b-sess25ab
          bench_b sess25ab "$1 batch $2 $v" "$bb" "$cf" "$2" "$logs/sess25ab_$1_$2_$v.txt"
        done
      done
      ;;
    normab)
      # the decode step's norms letting the next kernel be placed before their wait
      # (kcuda_pdl_enter_early, fused_add_rmsnorm.cu) against waiting first (-DNORM_PDL_EARLY=0):
      # gpu_bench batch 1 at 2,048, BF16, FP8, NVFP4, twice from each build (the same tokens_hash)
      ab_formats "$s" "-DNORM_PDL_EARLY=0" && ab_formats "$s" "-DNORM_PDL_EARLY=0" || continue
      ;;
    sess19ab)
      # the nineteenth session's two changes together against a build with both off
      ab_formats "$s" "-DGDN_CONV_FUSED=0 -DMOE_SH_EARLY=0" || continue
      ;;
    prompts3)
      # gpu_bench batch 1 at prompts 512 and 8,192 for the BF16, FP8 and NVFP4 configs (issue
      # 17: "the same at prompts 512 and 8,192")
      build_benches || { note "$s" "build failed"; continue; }
      for f in bf16 fp8 nvfp4; do
        cf=$root/tests/configs/qwen3.6-35b-a3b$([ $f = bf16 ] || echo "-$f").json
        for pl in 512 8192; do
          timeout 90 "$b/bin/gpu_bench" "$cf" --prompt-len $pl --batch 1 --gen 64 --chunk 2048 \
            > "$logs/${s}_${f}_$pl.txt" 2>&1
          note "$s" "$f prompt=$pl rc=$? ($(elapsed))"
          note_lines "  $s" < <(grep '^bench ' "$logs/${s}_${f}_$pl.txt" | grep -oE '(decode_tok_s_stream|itl_p50_ms|fraction|graph_kernels|tokens_hash)=[^ ]*' | paste -sd' ')
        done
      done
      ;;
    gdntiles)
      # the GDN recurrence of a batch-1 step in 4 and 2 value-column tiles a head (builds with
      # -DGDN_ONE_ROW_TILES=4 / 2, "before") against 1 (the default, "after"): gpu_bench as gdnab
      ab_formats "${s}4" "-DGDN_ONE_ROW_TILES=4" || continue
      ab_formats "${s}2" "-DGDN_ONE_ROW_TILES=2" || continue
      ;;
    gdnab)
      # the GDN conv and recurrence reading their states before the PDL wait (gdn_seq.cu)
      # against after it (-DGDN_PRE_WAIT=0 build): gpu_bench batch 1 at 2,048, three formats
      ab_formats "$s" "-DGDN_PRE_WAIT=0" || continue
      ;;
    gqapre)
      # the GQA decode attention's first K/V stages before the PDL wait (the default: pre)
      # against a build waiting first (-DGQA_PRE_WAIT=0: wait); the same tokens_hash expected
      ab_build gqawait "-DGQA_PRE_WAIT=0" || continue
      { [ -x "$b/bin/bench_attn" ] || cmake --build "$b" -j"$(nproc)" --target bench_attn \
          > "$logs/build_attn.log" 2>&1; } &&
        cmake --build "$b-gqawait" -j"$(nproc)" --target bench_attn > "$logs/build_gqawait2.log" 2>&1 ||
        { note gqapre "bench_attn build failed"; continue; }
      for v in pre wait; do
        bb=$b; [ $v = wait ] && bb=$b-gqawait
        timeout 90 "$bb/bin/bench_attn" decode > "$logs/gqapre_attn_$v.txt" 2>&1
        note gqapre "bench_attn decode $v rc=$? ($(elapsed))"
        note_lines "  $v" < <(grep -E '^copy|^attn_decode .* gqa' "$logs/gqapre_attn_$v.txt" | sed -E 's/  +/ /g')
      done
      for rep in 1 2; do
        for fb in "nvfp4 1" "fp8 1" "bf16 1" "nvfp4 8"; do
          set -- $fb
          cf=$root/tests/configs/qwen3.6-35b-a3b$([ $1 = bf16 ] || echo "-$1").json
          for v in pre wait; do
            bb=$b; [ $v = wait ] && bb=$b-gqawait
            bench_b gqapre "$1 batch $2 $v" "$bb" "$cf" "$2" "$logs/gqapre_$1_$2_${v}_$rep.txt"
          done
        done
      done
      ;;
    routerrb)
      # the 2-8-token router at MOE_ROUTER_RB = 4 rows a block (the default: rb4; x read once
      # for 4 router rows, 65 + 1 blocks at the counter instead of 257, each token routed by
      # route_token_rx) against one row a block (rb1: -DMOE_ROUTER_RB=1): the A/B runs (the
      # same tokens_hash expected), the verify steps three times each, the 4-row timelines
      ab_build rb1 "-DMOE_ROUTER_RB=1" || continue
      b2=$b-rb1
      build_benches && { [ -x "$b/bin/gpu_smoke" ] || cmake --build "$b" -j"$(nproc)" \
          --target gpu_smoke > "$logs/build_smoke.log" 2>&1; } &&
        cmake --build "$b2" -j"$(nproc)" --target gpu_smoke > "$logs/build_rb1_smoke.log" 2>&1 ||
        { note routerrb "smoke build failed"; continue; }
      for fb in "nvfp4 2" "nvfp4 4" "nvfp4 8" "fp8 4" "bf16 4"; do
        set -- $fb
        cf=$root/tests/configs/qwen3.6-35b-a3b$([ $1 = bf16 ] || echo "-$1").json
        for v in rb1 rb4; do
          bb=$b; [ $v = rb1 ] && bb=$b2
          bench_b routerrb "$1 batch $2 $v" "$bb" "$cf" "$2" "$logs/routerrb_$1_$2_$v.txt"
        done
      done
      for rep in 1 2 3; do
        for v in rb1 rb4; do
          bb=$b; [ $v = rb1 ] && bb=$b2
          (cd "$root" && timeout 200 "$bb/bin/gpu_smoke" "$cfg" 64 4096 4) > "$logs/routerrb_smoke_${v}_$rep.txt" 2>&1
          note routerrb "smoke $v rc=$? ($(elapsed))"
          note_lines "  routerrb" < <(grep -E '^batch1 (plain|verify)' "$logs/routerrb_smoke_${v}_$rep.txt")
        done
      done
      trace_ab routerrb 4 rb1 "$b2" && trace_ab routerrb 4 rb4 "$b"
      ;;
    routerab)
      # the one-token router with its weights loaded before the PDL wait (moe_router1_kernel,
      # moe_route.cu) against the kernel before (a build with -DMOE_ROUTER1=0): gpu_bench batch 1
      # at 2,048, BF16, FP8 and NVFP4 (the same tokens_hash: the same bits)
      ab_formats "$s" "-DMOE_ROUTER1=0" || continue
      ;;
    fp8moe)
      # the FP8 routed experts on the stream kernel (the default build) vs the CUDA-core expert
      # kernels (a build with -DMOE_STREAM_FP8_AUTO=0): bench_kernels' moe rows, then gpu_bench
      # on the FP8 config at batch 1 and 8 (the tokens may differ: fp16 activations on the stream)
      ab_build fp8moe "-DMOE_STREAM_FP8_AUTO=0" || continue
      b2=$b-fp8moe
      timeout 120 "$b/bin/bench_kernels" nvfp4 > "$logs/fp8moe_bench.txt" 2>&1
      note fp8moe "bench rc=$? ($(elapsed))"
      note_lines "  fp8moe" < <(grep -E '^moe_expert' "$logs/fp8moe_bench.txt")
      f8=$root/tests/configs/qwen3.6-35b-a3b-fp8.json
      for v in cores stream; do
        bb=$b
        [ $v = cores ] && bb=$b2
        for bt in 1 8; do
          bench_b fp8moe "$v batch=$bt" "$bb" "$f8" $bt "$logs/fp8moe_${v}_$bt.txt"
        done
      done
      ;;
    nvs)
      build_benches || { note nvs "build failed"; continue; }
      timeout 90 "$b/bin/bench_kernels" nvfp4 > "$logs/nvs.txt" 2>&1
      note nvs "bench rc=$? ($(elapsed))"
      note_lines "  nvs" < <(grep -E '^copy|^gemv nvfp4 stream|^moe|^argmax' "$logs/nvs.txt")
      # the register stream kernel's instructions (PLAIN, 16-byte loads): opcodes by count over
      # the whole kernel, what issue-bound time is spent on
      if command -v cuobjdump > /dev/null; then
        cuobjdump -sass "$b/bin/bench_kernels" > "$logs/sass.txt" 2>&1
        note nvs "sass of nvs_kernel<0, true, false, false>:"
        note_lines "  sass" < <(awk '
          /Function : _Z10nvs_kernelILi0ELb1ELb0ELb0EE/ { f = 1; next }
          /Function :/ { f = 0 }
          f && /^ +\/\*[0-9a-f]+\*\// {
            sub(/^ +\/\*[0-9a-f]+\*\/ +/, ""); op = $1
            if (op ~ /^@/) op = $2
            sub(/[ ;].*/, "", op); n[op]++; tot++
          }
          END { printf "%6d TOTAL\n", tot; for (o in n) printf "%6d %s\n", n[o], o }
        ' "$logs/sass.txt" | sort -k1,1nr | head -25 | paste -sd' ' | fold -w 150)
        # every stream kernel form: its instructions in total (the loop bodies count once)
        note_lines "  sass" < <(awk '
          /Function :/ { if (f) printf "%6d %s\n", n, name; f = /nvs_kernel/; name = $3; n = 0; next }
          f && /^ +\/\*[0-9a-f]+\*\// { n++ }
          END { if (f) printf "%6d %s\n", n, name }' "$logs/sass.txt")
      fi
      # one launch of the first shape (12288 x 2048, 1 token), caches flushed: where the time goes
      timeout 100 ncu --clock-control none --cache-control all -k regex:nvs_kernel -s 8 -c 1 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
        --section Occupancy --section LaunchStats --section SchedulerStats \
        --section InstructionStats \
        --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio \
        "$b/bin/bench_kernels" nvfp4 > "$logs/nvs_ncu.txt" 2>&1
      note nvs "ncu rc=$? ($(elapsed))"
      note_lines "  ncu" < <(grep -E 'nvs_kernel<|DRAM Throughput|Memory Throughput|^ +Duration|Achieved Occupancy|Registers Per Thread|Theoretical Occupancy|Waves Per SM|L2 Hit Rate|Mem Busy|Max Bandwidth|Issued Warp Per|No Eligible|Active Warps Per|Eligible Warps|Warp Cycles Per Issued|Dynamic Shared|Block Limit|Executed Instructions  ' "$logs/nvs_ncu.txt" | head -40)
      # the routed experts' two launches (SLOT gate_up of 8 slots, COMBINE down), L2 kept
      timeout 100 ncu --clock-control none --cache-control none --kernel-name-base demangled \
        -k 'regex:nvs_kernel<\(int\)[12],' -s 20 -c 2 \
        --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
        --section InstructionStats \
        --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio \
        "$b/bin/bench_kernels" nvfp4 > "$logs/nvs_ncu_moe.txt" 2>&1
      note nvs "ncu moe rc=$? ($(elapsed))"
      note_lines "  ncu_moe" < <(grep -E 'nvs_kernel<|DRAM Throughput|^ +Duration|Registers Per Thread|Achieved Occupancy|Waves Per SM|Issued Warp Per|Warp Cycles Per Issued|Executed Instructions  |Grid Size' "$logs/nvs_ncu_moe.txt" | head -30)
      note_lines "  stall_moe" < <(grep -E 'nvs_kernel<|issue_stalled' "$logs/nvs_ncu_moe.txt" |
        awk '/nvs_kernel</ { print substr($0, 1, 60); next } { v = $NF + 0; if (v >= 0.2) printf "%-60s %s\n", $1, $NF }' | head -24)
      # the stall reasons above 0.2 cycles per issued instruction
      note_lines "  stall" < <(grep -E 'issue_stalled' "$logs/nvs_ncu.txt" |
        awk '{ v = $NF + 0; if (v >= 0.2) printf "%-60s %s\n", $1, $NF }' | sort -k2,2nr | head -12)
      ;;
    fp8ab)
      build_benches || { note fp8ab "build failed"; continue; }
      ab_build lpr0 "-DMOE_DOWN_FP8_LPR=0" || continue
      fp8_ab fp8ab lpr0 2 1
      ;;
    fp8wave)
      fp8_rows_ab fp8wave wave0 "-DNVS_FP8_WAVE=0" '^copy|fp8 +stream.*tok= [18] |^moe_expert fp8'
      ;;
    l2hot)
      build_benches || { note l2hot "build failed"; continue; }
      timeout 150 "$b/bin/bench_kernels" l2 > "$logs/l2hot_bench.txt" 2>&1
      note l2hot "bench_kernels l2 rc=$? ($(elapsed))"
      note_lines "  l2" < <(grep -E '^copy|^l2 ' "$logs/l2hot_bench.txt" | sed -E 's/ +/ /g; s/^l2 //')
      ;;
    fp8wide)
      fp8_rows_ab fp8wide wide0 "-DNVS_FP8_WIDE=0" '^copy|fp8 +stream.*tok= [18] '
      ;;
    pipes)
      build_benches || { note pipes "build failed"; continue; }
      timeout 90 "$b/bin/bench_kernels" rows > "$logs/pipes_rows.txt" 2>&1
      note pipes "rows rc=$? ($(elapsed))"
      note_lines "  rows" < <(grep -E '^copy|tok= 1 |^moe' "$logs/pipes_rows.txt")
      for k in 'nvs_kernel<\(int\)0, \(bool\)1, \(bool\)1, \(bool\)0, \(int\)8' \
          'nvs_kernel<\(int\)0, \(bool\)1, \(bool\)1, \(bool\)0, \(int\)16' \
          'moe_gate_up_kernel<\(int\)2>' 'moe_down_slots_kernel<\(int\)2>' \
          'wrows_kernel'; do
        timeout 100 ncu --clock-control none --cache-control all --kernel-name-base demangled \
          -k "regex:$k" -s 8 -c 1 \
          --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
          --section Occupancy --section LaunchStats --section SchedulerStats \
          --section InstructionStats \
          --metrics 'regex:^sm__inst_executed_pipe_[a-z_]*\.avg\.pct_of_peak_sustained_active$,regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$' \
          "$b/bin/bench_kernels" rows > "$logs/pipes_ncu.txt" 2>&1
        note pipes "ncu '$k' rc=$? ($(elapsed))"
        note_lines "  ncu" < <(grep -E '^  [a-z_]+.*\(|DRAM Throughput|^ +Duration|Registers Per Thread|Achieved Occupancy|Theoretical Occupancy|Waves Per SM|Grid Size|Block Size|Issued Warp Per|No Eligible|Eligible Warps|Warp Cycles Per Issued|Executed Instructions  |Issue Slots Busy|SM Busy' "$logs/pipes_ncu.txt" | head -24)
        note_lines "  pipe" < <(grep -E 'inst_executed_pipe_' "$logs/pipes_ncu.txt" |
          awk '{ v = $NF + 0; if (v >= 1.0) printf "%-62s %s\n", $1, $NF }' | sort -k2,2nr | head -10)
        note_lines "  stall" < <(grep -E 'issue_stalled' "$logs/pipes_ncu.txt" |
          awk '{ v = $NF + 0; if (v >= 0.2) printf "%-62s %s\n", $1, $NF }' | sort -k2,2nr | head -8)
        cat "$logs/pipes_ncu.txt" >> "$logs/pipes_ncu_all.txt"
      done
      if command -v cuobjdump > /dev/null; then
        cuobjdump -sass "$b/bin/bench_kernels" > "$logs/sass_all.txt" 2>&1
        for f in _Z10nvs_kernelILi0ELb1ELb1ELb0ELi8EEv _Z18moe_gate_up_kernelILi2EEv \
            _Z21moe_down_slots_kernelILi2EEv; do
          note pipes "sass $f:"
          note_lines "  sass" < <(awk -v fn="$f" '
            index($0, "Function : " fn) { g = 1; next }
            /Function :/ { g = 0 }
            g && /^ +\/\*[0-9a-f]+\*\// {
              sub(/^ +\/\*[0-9a-f]+\*\/ +/, ""); op = $1
              if (op ~ /^@/) op = $2
              sub(/[ ;].*/, "", op); n[op]++; tot++
            }
            END { printf "%6d TOTAL\n", tot; for (o in n) printf "%6d %s\n", n[o], o }
          ' "$logs/sass_all.txt" | sort -k1,1nr | head -22 | paste -sd' ' | fold -w 150)
        done
      fi
      ;;
    smoke)
      # gpu_smoke on the NVFP4 config (MTP head declared, dummy weights): batch-1 decode with the
      # MTP upkeep, the k = 1..4 verify steps against a plain step and the spec windows (issue 16:
      # a k = 3 verify at most 1.3x a plain step)
      build_benches && { [ -x "$b/bin/gpu_smoke" ] || cmake --build "$b" -j"$(nproc)" \
          --target gpu_smoke > "$logs/build_smoke.log" 2>&1; } || { note smoke "build failed"; continue; }
      (cd "$root" && timeout 200 "$b/bin/gpu_smoke" "$cfg" 64 4096 4) > "$logs/smoke.txt" 2>&1
      note smoke "rc=$? ($(elapsed))"
      note_lines "  smoke" < <(grep -E '^batch1 (plain|verify|window|spec)|^batch1:' "$logs/smoke.txt")
      ;;
    profile1)
      build_benches || { note profile1 "build failed"; continue; }
      # 9 decode steps in the range (gpu_bench's warm-ups included)
      # the L2 kept between kernels (--cache-control none), as inside the step's graph
      OUT=$logs/p1 NCU_CACHE=none timeout 200 "$root/tests/gpu/profile.sh" "$b" decode 9 -- "$cfg" \
        --prompt-len 2048 --batch 1 --gen 4 --chunk 2048 > /dev/null 2>&1
      note profile1 "decode1 rc=$? ($(elapsed))"
      note_lines "  profile1" < <(head -30 "$logs/p1/profile_decode.txt" 2>/dev/null)
      rm -f "$logs"/p1/profile_*.csv
      ;;
    trace1|trace4|trace8|trace64)
      build_benches || { note "$s" "build failed"; continue; }
      cmake --build "$b" --target ktrace >> "$logs/build.log" 2>&1 ||
        { note "$s" "no libktrace (CUPTI not found by CMake)"; continue; }
      case $s in
        trace1) targs=(--prompt-len 2048 --batch 1 --gen 32 --chunk 2048) ;;
        trace4) targs=(--prompt-len 2048 --batch 4 --gen 32 --chunk 2048) ;;
        trace8) targs=(--prompt-len 2048 --batch 8 --gen 32 --chunk 2048) ;;
        *) targs=(--prompt-len 128 --batch 64 --gen 16) ;;
      esac
      CUDA_INJECTION64_PATH="$b/lib/libktrace.so" KTRACE_OUT="$logs/$s.csv" bench "$s" 150 "${targs[@]}"
      note_lines "  $s" < <(python3 "$root/tests/gpu/ktrace.py" "$logs/$s.csv" --top 24 2>&1)
      gzip -f "$logs/$s.csv"
      ;;
    *) echo "measure: unknown stage '$s' (tests tiles decode decode_ab decode1q decode1 prefill attn attnab long gdn pool stack nvs nvsminb profile profile1 trace1 trace4 trace8 trace64 rowsab routerab routerrb gqapre gdnab gdntiles sessab sessab64 shab shab64 convab normab sess25ab lmab slotwave sess24ab64 sass sess19ab prompts3 fp8moe smoke pipes fp8ab fp8wave fp8wide l2hot wgattn wgab)" >&2; exit 2 ;;
  esac
done
finish

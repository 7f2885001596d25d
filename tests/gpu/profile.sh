#!/usr/bin/env bash
# tests/gpu/profile.sh: on the GPU machine, Nsight Compute kernel times of gpu_bench's phases
# (issue 16 item 7): the kernels of the NVTX range "prefill" or "decode" of one gpu_bench run,
# summed by kernel name, one line each, largest first, with the share of the phase and the time
# per step. ncu measures each kernel alone (serialised, --clock-control none: the clocks as they
# run), so the sum is the GPU time without launch gaps or overlap, not the wall time.
#   tests/gpu/profile.sh BUILD_DIR PHASE STEPS -- GPU_BENCH_ARGS...
# PHASE: prefill or decode; STEPS: what the per-step column divides by (the number of decode
# steps in the range, counting gpu_bench's warm-ups: embed_kernel's count in the output is the
# number of steps). Output: $OUT/profile_PHASE.txt (and .csv). NCU_CACHE=none keeps the L2 between
# kernels (as in a graph) instead of flushing it before each (ncu's default, "all").
set -uo pipefail
b=${1:?usage: profile.sh BUILD_DIR PHASE STEPS -- GPU_BENCH_ARGS}
phase=${2:?phase}
steps=${3:?steps}
shift 3
[ "${1:-}" = -- ] && shift
out=${OUT:-gpu-logs}
mkdir -p "$out"
command -v ncu > /dev/null || { echo "profile: no ncu on PATH"; exit 2; }
csv=$out/profile_$phase.csv
ncu --clock-control none --cache-control "${NCU_CACHE:-all}" --nvtx --nvtx-include "$phase/" --metrics gpu__time_duration.sum --print-units base \
  --csv --page raw "$b/bin/gpu_bench" "$@" > "$csv" 2> "$out/profile_$phase.err"
rc=$?
python3 - "$csv" "$phase" "$steps" <<'PY' | tee "$out/profile_$phase.txt"
import csv, sys, collections
path, phase, steps = sys.argv[1], sys.argv[2], float(sys.argv[3])
rows = [l for l in open(path, errors='replace')]
start = next((i for i, l in enumerate(rows) if '"Kernel Name"' in l), None)
if start is None:
    print('profile: no kernel rows in %s' % path)
    sys.exit(1)
rd = csv.DictReader(rows[start:])
tot, cnt = collections.Counter(), collections.Counter()
for r in rd:
    v = r.get('gpu__time_duration.sum', '')
    try:
        ns = float(v.replace(',', ''))
    except ValueError:
        continue  # the units row
    name = r['Kernel Name'].split('(')[0][:70]
    tot[name] += ns
    cnt[name] += 1
all_ns = sum(tot.values())
print('profile phase=%s kernels=%d gpu_ms=%.3f steps=%g gpu_ms_per_step=%.3f' %
      (phase, sum(cnt.values()), all_ns / 1e6, steps, all_ns / 1e6 / steps))
for name, ns in tot.most_common(30):
    print('  %-70s n=%-6d ms=%9.3f share=%5.1f%% us_per_step=%9.1f' %
          (name, cnt[name], ns / 1e6, 100 * ns / all_ns, ns / 1e3 / steps))
PY
exit $rc

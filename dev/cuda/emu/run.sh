#!/bin/sh
# Host emulation of the new CUDA kernels (no GPU needed): the real kernel bodies (PTX asm swapped
# for host code by gen_inc.py; launchers cut, or run) with one pthread per CUDA thread, barriers for
# __syncthreads / warp intrinsics and an mma.sync m16n8k16 emulation with the PTX fragment
# layout, against the CPU references. Catches indexing / layout / tiling / barrier-logic bugs
# (with EMU_SAN: out-of-bounds accesses, shared-memory races between barriers); not FTZ /
# fast-math effects, hardware conversion corner cases, performance or cuBLASLt behaviour.
# Usage: dev/cuda/emu/run.sh BUILD_DIR [TESTS]  (a tests/gpu build with tern_kernels_ref built;
# TESTS default "emu_moe emu_tiles emu_attn emu_misc emu_sample emu_logit emu_gdn emu_gemv emu_moe_expert emu_norm emu_route emu_fill"; the last
# three run the real launchers too: gen_inc.py rewrites their <<<>>> launches (and
# kcuda_launch_pdl calls) into emu_launch_cfg, which checks CUDA's launch limits and logs the
# kernel names). EMU_SAN=address
# or EMU_SAN=thread builds with that sanitizer (out-of-bounds global/shared accesses;
# shared-memory races between barriers); EMU_SAN=alignment: misaligned vector loads/stores
# (emu.h's __ldg checks alignment always). EMU_BLOCK_ORDER=reverse runs the blocks of every
# launch in reverse order (a result that depends on the block order is a race on a GPU).
# EMU_DEFS: extra compiler flags, e.g. -DNVS_FP8_WAVE=1 (an opt-in form's A/B switch).
# PDL: launches run one after another; a harness may name the bytes the kernel before a launch
# would write (emu.h emu_pdl_guard_add), and a cp.async or __ldg of them before the thread's
# kcuda_pdl_enter is counted (emu_attn: the GQA form's keys read before its wait).
set -e
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}  # the harnesses do not free their buffers
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}  # EMU_SAN=alignment
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
b=${1:?usage: run.sh BUILD_DIR}
out=$b/emu${EMU_SAN:+-$EMU_SAN}
tests=${2:-emu_moe emu_tiles emu_attn emu_misc emu_sample emu_logit emu_gdn emu_gemv emu_moe_expert emu_norm emu_route emu_fill}
san=${EMU_SAN:+-fsanitize=$EMU_SAN}
mkdir -p "$out"
python3 "$here/gen_inc.py" "$root/kernels" "$out"
libs="$b/kernels/libtern_kernels_ref.a $b/libtern_common.a -lm"
for t in $tests; do
  g++ -std=c++17 -O1 -g $san ${EMU_DEFS:-} -ffp-contract=off -pthread -I"$out" -I"$root/kernels" \
    -I"$root/common/include" -I/usr/local/cuda/include -o "$out/$t" "$here/$t.cpp" \
    "$here/emu.cpp" $libs
  "$out/$t" ${EMU_SAN:+quick}  # quick: smaller sizes where a harness has them
done

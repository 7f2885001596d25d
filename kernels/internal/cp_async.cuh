/* cp_async.cuh: asynchronous global -> shared copies (cp.async, sm_80+), zero-filled past the
 * source bytes given, grouped by commit and waited for by group count. The CUDA emulator
 * (dev/cuda/emu/gen_inc.py) replaces this header with host copies done at issue time. */
#pragma once

#include <stdint.h>

/* 16 bytes to dst (16-byte aligned shared memory) from src (16-byte aligned global memory; any
 * valid address when src_bytes is 0), bytes src_bytes..15 zero. Cached in L2 only. */
static __device__ __forceinline__ void cpa_16(void *dst, const void *src, int src_bytes)
{
    const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
                 "r"(src_bytes));
}

/* 4 bytes, both sides 4-byte aligned, bytes src_bytes..3 zero. */
static __device__ __forceinline__ void cpa_4(void *dst, const void *src, int src_bytes)
{
    const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src),
                 "r"(src_bytes));
}

/* close the group of the copies issued since the last commit */
static __device__ __forceinline__ void cpa_commit()
{
    asm volatile("cp.async.commit_group;\n" ::);
}

/* wait until at most N groups of this thread are pending */
template <int N> static __device__ __forceinline__ void cpa_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Host emulation of the CUDA features the reviewed kernels use: one pthread per CUDA thread,
// __syncthreads = block barrier, warp intrinsics through a per-warp exchange + warp barrier,
// mma.sync m16n8k16 bf16 emulated with the PTX ISA fragment layout. Blocks run one at a time.
#pragma once
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <pthread.h>
#include <atomic>
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <functional>
#include <vector>
#include <algorithm>
#include <string>

#undef __global__
#undef __device__
#undef __shared__
#undef __forceinline__
#undef __launch_bounds__
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

struct emu_warp {
    pthread_barrier_t bar;
    uint64_t slot[32][8];
};
struct emu_block {
    pthread_barrier_t bar;
    int nthreads;
    emu_warp warps[32];
};
extern emu_block *g_emu_block;
extern thread_local dim3 threadIdx_;
extern dim3 blockIdx_, blockDim_, gridDim_;
#define threadIdx threadIdx_
#define blockIdx blockIdx_
#define blockDim blockDim_
#define gridDim gridDim_
extern unsigned char *g_emu_dyn_smem; /* the block's dynamic shared memory (exact size) */
extern size_t g_emu_dyn_smem_bytes;    /* its size */

static inline void __syncthreads() { pthread_barrier_wait(&g_emu_block->bar); }
static inline int emu_lane() { return (int)(threadIdx.x & 31); }
static inline emu_warp &emu_w() { return g_emu_block->warps[threadIdx.x >> 5]; }
static inline void __syncwarp(unsigned m = 0xffffffffu) { (void)m; pthread_barrier_wait(&emu_w().bar); }

template <class T> static inline T emu_xchg(T v, int src)
{
    static_assert(sizeof(T) <= 8, "");
    emu_warp &w = emu_w();
    memcpy(&w.slot[emu_lane()][0], &v, sizeof(T));
    pthread_barrier_wait(&w.bar);
    T r;
    memcpy(&r, &w.slot[src & 31][0], sizeof(T));
    pthread_barrier_wait(&w.bar);
    return r;
}
template <class T> static inline T __shfl_xor_sync(unsigned, T v, int o) { return emu_xchg(v, emu_lane() ^ o); }
template <class T> static inline T __shfl_sync(unsigned, T v, int src) { return emu_xchg(v, src); }
template <class T> static inline T __shfl_up_sync(unsigned, T v, int o)
{
    const int l = emu_lane();
    T r = emu_xchg(v, l >= o ? l - o : l);
    return r;
}
static inline int __any_sync(unsigned, int p)
{
    int any = 0;
    for (int i = 0; i < 32; i++)
        any |= __shfl_sync(0xffffffffu, p, i);
    return any != 0;
}
static inline unsigned __match_any_sync(unsigned, int v)
{
    unsigned m = 0;
    for (int i = 0; i < 32; i++)
        if (__shfl_sync(0xffffffffu, v, i) == v)
            m |= 1u << i;
    return m;
}
/* redux.sync.max / .min (unsigned) */
static inline unsigned __reduce_max_sync(unsigned, unsigned v)
{
    unsigned m = 0u;
    for (int i = 0; i < 32; i++)
        m = std::max(m, __shfl_sync(0xffffffffu, v, i));
    return m;
}
static inline unsigned __reduce_min_sync(unsigned, unsigned v)
{
    unsigned m = 0xffffffffu;
    for (int i = 0; i < 32; i++)
        m = std::min(m, __shfl_sync(0xffffffffu, v, i));
    return m;
}
/* prmt.b32: byte i of the result is byte (s >> 4 i) & 7 of the pair (x = bytes 0-3, y = 4-7) */
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s)
{
    const uint64_t v = (uint64_t)x | ((uint64_t)y << 32);
    unsigned r = 0;
    for (int i = 0; i < 4; i++) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xffu) << (8 * i);
    return r;
}
static inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static inline unsigned atomicAdd(unsigned *p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v)
{
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
static inline unsigned long long atomicMax(unsigned long long *p, unsigned long long v)
{
    unsigned long long o = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (o < v && !__atomic_compare_exchange_n(p, &o, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    return o;
}
static inline unsigned long long atomicExch(unsigned long long *p, unsigned long long v)
{
    return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST);
}
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
/* a fresh read (the compiler may not reuse an earlier load); vector types by memcpy */
template <class T> static inline T __ldcg(const T *p)
{
    T r;
    __asm__ __volatile__("" ::: "memory");
    memcpy(&r, (const void *)p, sizeof(T));
    return r;
}
void emu_check_read(const void *p, size_t n); /* below: reads before kcuda_pdl_enter */
/* __ldg also checks the type's natural alignment (a misaligned vector load faults on a GPU) */
template <class T> static inline T __ldg(const T *p)
{
    if ((uintptr_t)p % alignof(T)) {
        fprintf(stderr, "emu: misaligned __ldg of %zu bytes at %p\n", sizeof(T), (const void *)p);
        abort();
    }
    emu_check_read(p, sizeof(T));
    return *p;
}
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
// A NaN result of a GPU fp32 add/sub/mul/div (.rn PTX ops) is the canonical NaN 0x7fffffff
// whatever the operands' payloads; x86 SSE returns the NaN operand (0x7fc00000 for C's NAN).
// The swapped ops of sample.cu go through this so the emulator sees the device's bits.
static inline float emu_gpu_nan(float r) { return r != r ? __uint_as_float(0x7fffffffu) : r; }
static inline int __float_as_int(float f) { int u; memcpy(&u, &f, 4); return u; }
static inline float __int_as_float(int u) { float f; memcpy(&f, &u, 4); return f; }
#define __expf expf
extern "C" float rsqrtf(float x); /* device-only in the CUDA headers; emu.cpp has the host one */
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
using std::min;
using std::max;

/* mma.sync.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32, fragment layout of the PTX ISA:
 * g = lane/4, t = lane%4; A regs: (g, 2t..), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..);
 * B regs: (k 2t.., n g), (k 2t+8.., n g); C: (g, 2t..), (g+8, 2t..). Low half = lower index.
 * Products and sums in double (exact products; the hardware's fp32 sum order is unspecified). */
static inline float emu_bf(uint32_t w, int hi) { return __uint_as_float(hi ? (w & 0xffff0000u) : (w << 16)); }
static inline float emu_h16(uint32_t w, int hi) /* IEEE binary16 half of w, exactly */
{
    const uint32_t h = hi ? w >> 16 : w & 0xffffu;
    const int e = (int)((h >> 10) & 31), m = (int)(h & 1023);
    const float v = e == 31 ? (m ? NAN : INFINITY) : e ? ldexpf((float)(1024 + m), e - 25) : ldexpf((float)m, -24);
    return (h & 0x8000u) ? -v : v;
}
template <bool F16> static inline void emu_mma_t(float *c, const uint32_t *a, uint32_t b0, uint32_t b1)
{
    emu_warp &w = emu_w();
    const int l = emu_lane();
    uint32_t mine[6] = {a[0], a[1], a[2], a[3], b0, b1};
    memcpy(&w.slot[l][0], mine, sizeof(mine));
    pthread_barrier_wait(&w.bar);
    float A[16][16], B[16][8];
    for (int ln = 0; ln < 32; ln++) {
        uint32_t r[6];
        memcpy(r, &w.slot[ln][0], sizeof(r));
        const int g = ln >> 2, t = ln & 3;
        for (int j = 0; j < 2; j++) {
            float v[6];
            for (int q = 0; q < 6; q++)
                v[q] = F16 ? emu_h16(r[q], j) : emu_bf(r[q], j);
            A[g][2 * t + j] = v[0];
            A[g + 8][2 * t + j] = v[1];
            A[g][2 * t + 8 + j] = v[2];
            A[g + 8][2 * t + 8 + j] = v[3];
            B[2 * t + j][g] = v[4];
            B[2 * t + 8 + j][g] = v[5];
        }
    }
    pthread_barrier_wait(&w.bar);
    const int g = l >> 2, t = l & 3;
    for (int i = 0; i < 4; i++) {
        const int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
        double s = c[i];
        for (int k = 0; k < 16; k++)
            s += (double)A[row][k] * B[k][col];
        c[i] = (float)s;
    }
}
static inline void emu_mma(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) { emu_mma_t<false>(c, a, b0, b1); }
static inline void emu_mma_f16(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) { emu_mma_t<true>(c, a, b0, b1); }

/* Run body() as a grid of blocks of nthreads threads (blocks one after another, in x-fastest
 * order, or the reverse with EMU_BLOCK_ORDER=reverse: results must not depend on it), with smem
 * bytes of dynamic shared memory (heap: out-of-bounds accesses show under -fsanitize=address). */
void emu_launch(dim3 grid, int nthreads, const std::function<void()> &body, size_t smem = 0);
/* A real launcher's kernel<<<grid, block, smem, stream>>>(...) as rewritten by gen_inc.py: CUDA's
 * launch limits checked first (grid.x < 2^31, grid.y/z <= 65535, no zero dimension, 1..1024
 * threads (emulator: a multiple of 32), dynamic shared memory <= 48 KB without an opt-in); a
 * violation runs nothing, is logged, and the next cudaGetLastError() returns it, as on a GPU. */
void emu_launch_cfg(dim3 grid, dim3 block, size_t smem, const char *name,
                    const std::function<void()> &body);
/* Launches emu_launch_cfg refused so far (harnesses that expect none check it), and the names of
 * the kernels it ran, "name;" each, since the harness last cleared it. */
extern int g_emu_bad_launches;
extern std::string g_emu_launched;

/* Reads before kcuda_pdl_enter (pdl.cuh's rule: nothing the kernel before writes). A harness
 * names the byte ranges the kernel before a launch would write (emu_pdl_guard_add); a cp.async or
 * __ldg from them by a thread that has not passed its kcuda_pdl_enter in its block counts in
 * g_emu_prewait_reads (the first one is printed). emu_pdl_guard_clear drops the ranges. */
void emu_pdl_guard_add(const void *p, size_t n);
void emu_pdl_guard_clear();
extern std::atomic<long> g_emu_prewait_reads;
void emu_pdl_enter();

/* 16-byte aligned heap buffer of n bytes rounded up to 16 (device-buffer stand-in). */
static inline void *emu_alloc(size_t n) { return aligned_alloc(16, (n + 15) / 16 * 16); }

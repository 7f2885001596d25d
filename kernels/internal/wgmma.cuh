/* wgmma.cuh: Hopper warpgroup MMA (wgmma.mma_async, sm_90a only) for the flash attention
 * kernels. A warpgroup is 4 consecutive warps (128 threads); warp w of it owns rows 16 (w % 4) ..
 * 16 (w % 4) + 15 of the 64-row tile, and its accumulator fragment for each 8-column chunk n is
 * the mma.sync m16n8 layout: d[4 n + e], lane L: row L / 4 (e < 2) or L / 4 + 8, column
 * 8 n + 2 (L % 4) + e % 2. An A operand in registers is the mma.sync m16n8k16 A fragment of the
 * warp's 16 rows.
 * Shared-memory operands use the 128-byte swizzle (descriptor layout type 1): a tile of ROWS
 * rows of 64-element (128-byte) atoms, atom a of row r at a ROWS 128 + r 128 bytes, its 16-byte
 * chunk c stored at chunk c ^ (r % 8) (wg_sw128_off). Atom bases must be 1024-byte aligned in the
 * shared window. K-major operands (the k dimension contiguous: Q as A, K as B of Q K^T): the
 * descriptor of a k16 step starts at the atom's row 0 plus 32 bytes a step, stride byte offset
 * (8-row groups) 1024. The MN-major B of P V (V rows are keys = k, the n dims contiguous,
 * transposed: imm-trans-b 1): a k16 step starts at key 16 kb (2,048 bytes a step), leading byte
 * offset = the atom stride along n (ROWS x 128 bytes), stride byte offset = 8 keys (1024).
 * Generic-proxy writes (st.shared, cp.async) become visible to wgmma after wg_fence_smem() and a
 * barrier. wg_fence() before the first wgmma whose accumulators were written by other
 * instructions; wg_commit(), wg_wait<N>() (at most N groups pending), then wg_hold() on the
 * accumulators before ordinary code reads them. On other targets the MMA helpers trap: callers
 * launch them only where attn_prefill_wgmma_ok (a build with sm_90a code on a 9.0 device).
 * The CUDA emulator (dev/cuda/emu/gen_inc.py) replaces this header with a host version that
 * computes each thread's accumulators from the descriptors' addresses. */
#pragma once

#include <stdint.h>

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define WG_ASM 1
#else
#define WG_ASM 0
#endif

/* row r's 16-byte chunk c (elements of 16 bits) in the swizzled atoms of a ROWS-row tile */
template <int ROWS> static __device__ __forceinline__ int wg_sw128_off(int r, int c)
{
    return (c >> 3) * ROWS * 64 + r * 64 + (((c & 7) ^ (r & 7)) << 3);
}

static __device__ __forceinline__ uint32_t wg_smem(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* a 128-byte-swizzle descriptor: start address, leading and stride byte offsets (bytes) */
static __device__ __forceinline__ uint64_t wg_desc(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((addr & 0x3ffffu) >> 4) | ((uint64_t)((lbo >> 4) & 0x3fffu) << 16) |
           ((uint64_t)((sbo >> 4) & 0x3fffu) << 32) | (1ull << 62);
}

static __device__ __forceinline__ void wg_fence_smem()
{
#if WG_ASM
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

static __device__ __forceinline__ void wg_fence()
{
#if WG_ASM
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

static __device__ __forceinline__ void wg_commit()
{
#if WG_ASM
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

template <int N> static __device__ __forceinline__ void wg_wait()
{
#if WG_ASM
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

/* keeps ordinary code that reads (or writes) the accumulators x (N fragments of 4) after the
 * wg_wait before it */
template <int N> static __device__ __forceinline__ void wg_hold(float (*x)[4])
{
#pragma unroll
    for (int n = 0; n < N; n++)
        asm volatile("" : "+f"(x[n][0]), "+f"(x[n][1]), "+f"(x[n][2]), "+f"(x[n][3])::"memory");
}

/* The asm operand lists: WG_R<n> the accumulators' "%0 .. %n-1" in the instruction text,
 * WG_D<n> their "+f" constraints on d[0 .. n-1]. */
#define WG_R32 \
    "%0, %1, %2, %3, %4, %5, %6, %7, " \
    "%8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, " \
    "%24, %25, %26, %27, %28, %29, %30, %31"
#define WG_R64 WG_R32 ", " \
    "%32, %33, %34, %35, %36, %37, %38, %39, " \
    "%40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, " \
    "%56, %57, %58, %59, %60, %61, %62, %63"
#define WG_R128 WG_R64 ", " \
    "%64, %65, %66, %67, %68, %69, %70, %71, " \
    "%72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, " \
    "%88, %89, %90, %91, %92, %93, %94, %95, " \
    "%96, %97, %98, %99, %100, %101, %102, %103, " \
    "%104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, " \
    "%120, %121, %122, %123, %124, %125, %126, %127"
#define WG_D8(i) \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
        "+f"(d[i + 6]), "+f"(d[i + 7])
#define WG_D32(i) WG_D8(i), WG_D8(i + 8), WG_D8(i + 16), WG_D8(i + 24)
#define WG_D64(i) WG_D32(i), WG_D32(i + 32)
#define WG_D128(i) WG_D64(i), WG_D64(i + 64)

/* D (64 x 64, f32) (+)= A (64 x 16, K-major, smem) B^T (B: 64 x 16, K-major, smem): S = Q K^T;
 * scale_d 0 ignores D's old values. TY: "bf16" or "f16". */
#define WG_SS64(TY)                                                                                \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                        \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " {" WG_R32               \
                 "}, %32, %33, p, 1, 1, 0, 0;\n}\n"                                                \
                 : WG_D32(0)                                                                      \
                 : "l"(da), "l"(db), "r"(scale_d))

/* D (64 x N, f32) += A (64 x 16, registers) B (16 x N, MN-major smem, imm-trans-b 1): O += P V.
 * R and D: the accumulators' list and constraints; A0 .. A3, B, P: the operand numbers (strings)
 * of a, the descriptor and the scale, the ones after the accumulators */
#define WG_RS(N, TY, R, D, A0, A1, A2, A3, B, P)                                                  \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" P ", 0;\n"                                    \
                 "wgmma.mma_async.sync.aligned.m64n" N "k16.f32." TY "." TY " {" R "}, {%" A0      \
                 ", %" A1 ", %" A2 ", %" A3 "}, %" B ", p, 1, 1, 1;\n}\n"                           \
                 : D                                                                              \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1))

template <bool F16>
static __device__ __forceinline__ void wg_ss_m64n64k16(float *d, uint64_t da, uint64_t db,
                                                       int scale_d)
{
#if WG_ASM
    if constexpr (F16)
        WG_SS64("f16");
    else
        WG_SS64("bf16");
#else
    (void)d;
    (void)da;
    (void)db;
    (void)scale_d;
    __trap();
#endif
}

/* the input types by F16 (f16, else bf16) and O's width by HD */
template <int HD, bool F16>
static __device__ __forceinline__ void wg_rs_k16_tb(float *d, const uint32_t *a, uint64_t db)
{
    static_assert(HD == 64 || HD == 128 || HD == 256, "O widths 64 / 128 / 256");
#if WG_ASM
    if constexpr (HD == 64 && F16)
        WG_RS("64", "f16", WG_R32, WG_D32(0), "32", "33", "34", "35", "36", "37");
    else if constexpr (HD == 64)
        WG_RS("64", "bf16", WG_R32, WG_D32(0), "32", "33", "34", "35", "36", "37");
    else if constexpr (HD == 128 && F16)
        WG_RS("128", "f16", WG_R64, WG_D64(0), "64", "65", "66", "67", "68", "69");
    else if constexpr (HD == 128)
        WG_RS("128", "bf16", WG_R64, WG_D64(0), "64", "65", "66", "67", "68", "69");
    else if constexpr (F16)
        WG_RS("256", "f16", WG_R128, WG_D128(0), "128", "129", "130", "131", "132", "133");
    else
        WG_RS("256", "bf16", WG_R128, WG_D128(0), "128", "129", "130", "131", "132", "133");
#else
    (void)d;
    (void)a;
    (void)db;
    __trap();
#endif
}

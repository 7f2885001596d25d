/* mma16.cuh: mma.sync m16n8k16 with fp32 accumulators on bf16 or fp16 operands (the fragment
 * layout of the PTX ISA), the packing of two fp32 values into one operand register, and the
 * e4m3 -> fp16 pair decode (exact) that feeds the fp16 form. The CUDA emulator
 * (dev/cuda/emu/gen_inc.py) runs its host mma in their place. */
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

#include "kcuda.cuh"

static __device__ __forceinline__ void mma_bf16(float *c, const uint32_t *a, uint32_t b0,
                                                uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

static __device__ __forceinline__ void mma_f16(float *c, const uint32_t *a, uint32_t b0,
                                               uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* bf16 (F16 false) or fp16 (F16 true) operands */
template <bool F16>
static __device__ __forceinline__ void mma_t(float *c, const uint32_t *a, uint32_t b0, uint32_t b1)
{
    if (F16)
        mma_f16(c, a, b0, b1);
    else
        mma_bf16(c, a, b0, b1);
}

/* two fp32 values rounded (to nearest even) into one register, lo in the low half */
static __device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi)
{
    return (uint32_t)f32_to_bf16_bits(lo) | ((uint32_t)f32_to_bf16_bits(hi) << 16);
}

static __device__ __forceinline__ uint32_t pack_f16x2(float lo, float hi)
{
    return (uint32_t)__half_as_ushort(__float2half_rn(lo)) |
           ((uint32_t)__half_as_ushort(__float2half_rn(hi)) << 16);
}

template <bool F16> static __device__ __forceinline__ uint32_t pack_t(float lo, float hi)
{
    return F16 ? pack_f16x2(lo, hi) : pack_bf16x2(lo, hi);
}

/* two e4m3 codes (low byte the lower element) -> an fp16 pair, exact */
static __device__ __forceinline__ uint32_t e4m3x2_h2(uint32_t two)
{
    const __half2_raw h =
        __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(two & 0xffffu), __NV_E4M3);
    return (uint32_t)h.x | ((uint32_t)h.y << 16);
}

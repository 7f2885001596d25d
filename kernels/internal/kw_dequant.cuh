/* kw_dequant.cuh: 8 consecutive elements of a struct kweight row fetched as loaded and decoded
 * (scales applied) to bf16, shared by moe_grouped.cu (tiles in shared memory) and linear.cu (a
 * bf16 copy of a weight for cuBLASLt). */
#pragma once

#include <cuda_fp8.h>

#include "kcuda.cuh"
#include "kweight.h"

static __device__ __forceinline__ uint32_t kwd_pack_bf16(float a, float b)
{
    return (uint32_t)f32_to_bf16_bits(a) | ((uint32_t)f32_to_bf16_bits(b) << 16);
}

/* 8 consecutive weight elements W[e][r][k .. k+7] as loaded (k % 8 == 0, all < cols), decoded
 * later by kwd_decode_w8 so that the loads of the next K step stay in flight during the mma steps.
 * bf16: q = the 8 values; fp8: q.x, q.y = 8 codes, s = the scale; nvfp4: q.x = 8 codes (element
 * m in bits 4m..4m+3), q.y = the e4m3 block scale byte (k % 16 is 0 or 8: one block), s = the
 * global scale. All zero (decodes to zeros) outside the tile. */
struct kwd_wraw {
    uint4 q;
    float s;
};

static __device__ __forceinline__ kwd_wraw kwd_fetch_w8(const kweight &w, int e, int r, int k)
{
    kwd_wraw o;
    const int64_t idx = (int64_t)e * w.expert_stride + (int64_t)r * w.row_stride + k;
    o.q = make_uint4(0u, 0u, 0u, 0u);
    o.s = 1.0f;
    if (w.fmt == KW_FMT_BF16) {
        o.q = __ldg(reinterpret_cast<const uint4 *>((const uint16_t *)w.data + idx));
    } else if (w.fmt == KW_FMT_FP8) {
        const uint2 v = __ldg(reinterpret_cast<const uint2 *>((const uint8_t *)w.data + idx));
        const float *sb = w.scale + (int64_t)e * w.scale_expert_stride;
        o.q.x = v.x;
        o.q.y = v.y;
        if (w.scale_kind == KW_SCALE_TENSOR)
            o.s = __ldg(sb);
        else if (w.scale_kind == KW_SCALE_CHANNEL)
            o.s = __ldg(sb + r);
        else
            o.s = __ldg(sb +
                        (int64_t)(r / w.block_rows) * ((w.cols + w.block_cols - 1) / w.block_cols) +
                        k / w.block_cols);
    } else {
        o.q.x = __ldg(reinterpret_cast<const uint32_t *>((const uint8_t *)w.data + idx / 2));
        o.q.y = __ldg(w.bscale + (int64_t)e * w.bscale_expert_stride +
                      (int64_t)r * w.bscale_stride + k / 16);
        o.s = w.gscale_e ? __ldg(w.gscale_e + e) : w.gscale;
    }
    return o;
}

/* The 8 values of a fetched chunk, scales applied, rounded to bf16 (element 0 lowest). */
static __device__ __forceinline__ uint4 kwd_decode_w8(int fmt, const kwd_wraw &o)
{
    float v[8];
    if (fmt == KW_FMT_BF16)
        return o.q;
    if (fmt == KW_FMT_FP8) {
        const uint32_t u[2] = {o.q.x, o.q.y};
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int j = 0; j < 2; j++) {
                const __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2(
                    (__nv_fp8x2_storage_t)((u[i] >> (16 * j)) & 0xffffu), __NV_E4M3);
                const float2 f = __half22float2(__half2(hr));
                v[4 * i + 2 * j] = f.x * o.s;
                v[4 * i + 2 * j + 1] = f.y * o.s;
            }
    } else {
        /* decoded codes carry 2^-14 (e2m1x2_hi_to_f32_scaled): folded into the scale */
        const float s = e4m3_to_f32((uint8_t)o.q.y) * 16384.0f * o.s;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const float2 f = e2m1x2_hi_to_f32_scaled(o.q.x << (12 - 4 * j)); /* elements j, j+4 */
            v[j] = f.x * s;
            v[j + 4] = f.y * s;
        }
    }
    return make_uint4(kwd_pack_bf16(v[0], v[1]), kwd_pack_bf16(v[2], v[3]), kwd_pack_bf16(v[4], v[5]),
                      kwd_pack_bf16(v[6], v[7]));
}

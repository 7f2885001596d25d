/* wdot.cuh: per-lane partial dot products of one weight row (any struct kweight format) with
 * up to NT activation rows, shared by gemv.cu and moe_expert.cu. A row is split into 16-byte
 * chunks (bf16: 8 elements, fp8: 16, nvfp4: 32); lane `sub` of a group of `lpr` lanes takes
 * chunks sub, sub+lpr, ... Each chunk is one 128-bit load, dequantized in registers.
 * NVFP4 rows whose length or stride is not a multiple of 32 (or whose scale rows are not 2-byte
 * aligned) take the narrow form: 8-byte chunks of 16 codes and one scale byte (K % 16 == 0).
 * Preconditions (checked by kweight_check_dev in the launchers): cols % chunk == 0, 16-byte
 * aligned rows (8-byte for narrow nvfp4) and activations. */
#pragma once

#include "kcuda.cuh"
#include "kweight.h"

static __host__ __device__ __forceinline__ int kw_chunk_elems(int fmt)
{
    return fmt == KW_FMT_BF16 ? 8 : fmt == KW_FMT_FP8 ? 16 : 32;
}

/* NVFP4 weights readable in 16-byte chunks of 32 codes with 2-byte scale pairs (the wide form). */
static __host__ __device__ __forceinline__ bool kw_nvfp4_wide(const kweight &w)
{
    return w.cols % 32 == 0 && w.row_stride % 32 == 0 && w.expert_stride % 32 == 0 &&
           w.bscale_stride % 2 == 0 && w.bscale_expert_stride % 2 == 0 &&
           ((uintptr_t)w.bscale) % 2 == 0;
}

/* Elements per chunk of this weight: kw_chunk_elems, or 16 for narrow nvfp4. */
static __host__ __device__ __forceinline__ int kw_chunk_of(const kweight &w)
{
    return w.fmt == KW_FMT_NVFP4 && !kw_nvfp4_wide(w) ? 16 : kw_chunk_elems(w.fmt);
}

/* Multiplier applied once to the finished dot of row r of expert e (fp8 block scales and nvfp4
 * block scales are applied per chunk inside wdot instead). */
static __device__ __forceinline__ float kw_row_scale(const kweight &w, int e, int r)
{
    if (w.fmt == KW_FMT_NVFP4)
        return w.gscale_e ? w.gscale_e[e] : w.gscale;
    if (w.fmt == KW_FMT_FP8) {
        const float *s = w.scale + (int64_t)e * w.scale_expert_stride;
        if (w.scale_kind == KW_SCALE_TENSOR)
            return s[0];
        if (w.scale_kind == KW_SCALE_CHANNEL)
            return s[r];
    }
    return 1.0f;
}

/* Rows r0 + i*rstep, i < nr (<= R), of expert e against activation rows x + t*ldx, t < nt (<= NT):
 *   acc[i*NT + t] += sum over this lane's chunks of W[e][row_i][c] * x[t*ldx + c].
 * With R > 1 each activation chunk is loaded once and used for R weight rows (the activation
 * loads, not the weights, limit a one-row-per-lane nvfp4 GEMV). With R == 1 each weight chunk is
 * decoded once and used for NT tokens. */
/* Kernel format classes for compile-time specialization (KF template argument of wdot): each
 * kernel instance then holds only its format's loop (fewer registers). KF_ANY decides at run
 * time. */
enum kw_kf { KF_ANY = 0, KF_BF16 = 1, KF_FP8 = 2, KF_NVFP4 = 3, KF_NVFP4_NARROW = 4 };

static inline int kw_kf_of(const kweight *w)
{
    if (w->fmt == KW_FMT_NVFP4)
        return kw_nvfp4_wide(*w) ? KF_NVFP4 : KF_NVFP4_NARROW;
    return w->fmt == KW_FMT_FP8 ? KF_FP8 : KF_BF16;
}

/* One 16-byte chunk's dot with its fp32 x columns, the arithmetic every CUDA-core path shares
 * (wdot, the row kernel of wrows.cuh, the experts' slots form): bf16, 8 weights widened by a
 * shift against xa, xb; e4m3, 16 weights widened through fp16 (exact) against x[0..3], summed
 * per 4-weight word first. */
static __device__ __forceinline__ float kw_dot_bf16x8(const uint4 q, const float4 xa,
                                                      const float4 xb)
{
    const uint32_t u[4] = {q.x, q.y, q.z, q.w};
    return __uint_as_float(u[0] << 16) * xa.x + __uint_as_float(u[0] & 0xffff0000u) * xa.y +
           __uint_as_float(u[1] << 16) * xa.z + __uint_as_float(u[1] & 0xffff0000u) * xa.w +
           __uint_as_float(u[2] << 16) * xb.x + __uint_as_float(u[2] & 0xffff0000u) * xb.y +
           __uint_as_float(u[3] << 16) * xb.z + __uint_as_float(u[3] & 0xffff0000u) * xb.w;
}

static __device__ __forceinline__ float kw_dot_e4m3x16(const uint4 q, const float4 *x)
{
    const uint32_t u[4] = {q.x, q.y, q.z, q.w};
    float p = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        __half2_raw h0 =
            __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(u[k] & 0xffff), __NV_E4M3);
        __half2_raw h1 = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(u[k] >> 16), __NV_E4M3);
        const float2 f0 = __half22float2(__half2(h0)), f1 = __half22float2(__half2(h1));
        p += f0.x * x[k].x + f0.y * x[k].y + f1.x * x[k].z + f1.y * x[k].w;
    }
    return p;
}

template <int NT, int R, int KF = KF_ANY>
static __device__ __forceinline__ void wdot(const kweight &w, int e, int r0, int rstep, int nr,
                                            const float *x, int64_t ldx, int nt, int sub, int lpr,
                                            float *acc)
{
    const int64_t ebase = (int64_t)e * w.expert_stride;
    if (KF == KF_BF16 || (KF == KF_ANY && w.fmt == KW_FMT_BF16)) {
        const uint16_t *base = (const uint16_t *)w.data + ebase;
        const int nch = w.cols / 8;
        for (int c = sub; c < nch; c += lpr) {
            uint4 q[R];
#pragma unroll
            for (int i = 0; i < R; i++)
                if (i < nr)
                    q[i] = __ldg(reinterpret_cast<const uint4 *>(base + (int64_t)(r0 + i * rstep) *
                                                                            w.row_stride) +
                                 c);
#pragma unroll
            for (int t = 0; t < NT; t++) {
                if (t < nt) {
                    const float4 *xp = reinterpret_cast<const float4 *>(x + t * ldx + c * 8);
                    const float4 a = __ldg(xp), b = __ldg(xp + 1);
#pragma unroll
                    for (int i = 0; i < R; i++)
                        if (i < nr)
                            acc[i * NT + t] += kw_dot_bf16x8(q[i], a, b);
                }
            }
        }
    } else if (KF == KF_FP8 || (KF == KF_ANY && w.fmt == KW_FMT_FP8)) {
        const uint8_t *base = (const uint8_t *)w.data + ebase;
        const int nch = w.cols / 16;
        const bool blk = w.scale_kind == KW_SCALE_BLOCK;
        const float *bsc = w.scale + (int64_t)e * w.scale_expert_stride;
        const int bcols = blk ? w.block_cols : 1;
        const int nbc = blk ? (w.cols + w.block_cols - 1) / w.block_cols : 0;
        /* one token (R > 1), fp8-only instance: two chunks per pass, the second chunk's loads
         * issue before the first is computed */
#pragma unroll(R > 1 && KF == KF_FP8 ? 2 : 1)
        for (int c = sub; c < nch; c += lpr) {
            uint4 q[R];
            float s[R];
#pragma unroll
            for (int i = 0; i < R; i++)
                if (i < nr) {
                    const int r = r0 + i * rstep;
                    q[i] = __ldg(reinterpret_cast<const uint4 *>(base + (int64_t)r * w.row_stride) +
                                 c);
                    s[i] = blk ? __ldg(bsc + (int64_t)(r / w.block_rows) * nbc + (c * 16) / bcols)
                               : 1.0f;
                }
#pragma unroll
            for (int t = 0; t < NT; t++) {
                if (t < nt) {
                    const float4 *xp = reinterpret_cast<const float4 *>(x + t * ldx + c * 16);
                    float4 xa[4];
#pragma unroll
                    for (int k = 0; k < 4; k++)
                        xa[k] = __ldg(xp + k);
#pragma unroll
                    for (int i = 0; i < R; i++)
                        if (i < nr)
                            acc[i * NT + t] += kw_dot_e4m3x16(q[i], xa) * s[i];
                }
            }
        }
    } else if (KF == KF_NVFP4_NARROW || (KF == KF_ANY && !kw_nvfp4_wide(w))) {
        /* narrow NVFP4: 8 bytes = 16 codes = 1 scale block; element 8k+i in nibble i of word k */
        const uint8_t *base = (const uint8_t *)w.data + ebase / 2;
        const uint8_t *sbase = w.bscale + (int64_t)e * w.bscale_expert_stride;
        const int nch = w.cols / 16;
        for (int c = sub; c < nch; c += lpr) {
            uint2 q[R];
            uint8_t sb[R];
#pragma unroll
            for (int i = 0; i < R; i++)
                if (i < nr) {
                    const int r = r0 + i * rstep;
                    q[i] = __ldg(
                        reinterpret_cast<const uint2 *>(base + (int64_t)r * (w.row_stride / 2)) +
                        c);
                    sb[i] = __ldg(sbase + (int64_t)r * w.bscale_stride + c);
                }
#pragma unroll
            for (int t = 0; t < NT; t++) {
                if (t < nt) {
                    const float4 *xp = reinterpret_cast<const float4 *>(x + t * ldx + c * 16);
                    float p[R];
#pragma unroll
                    for (int i = 0; i < R; i++)
                        p[i] = 0.0f;
#pragma unroll
                    for (int k = 0; k < 2; k++) {
                        const float4 xl = __ldg(xp + 2 * k), xh = __ldg(xp + 2 * k + 1);
#pragma unroll
                        for (int i = 0; i < R; i++) {
                            if (i < nr) {
                                const uint32_t u = k == 0 ? q[i].x : q[i].y;
                                float2 f;
                                float pp;
                                f = e2m1x2_hi_to_f32_scaled(u);
                                pp = f.x * xl.w + f.y * xh.w;
                                f = e2m1x2_hi_to_f32_scaled(u << 4);
                                pp += f.x * xl.z + f.y * xh.z;
                                f = e2m1x2_hi_to_f32_scaled(u << 8);
                                pp += f.x * xl.y + f.y * xh.y;
                                f = e2m1x2_hi_to_f32_scaled(u << 12);
                                pp += f.x * xl.x + f.y * xh.x;
                                p[i] += pp;
                            }
                        }
                    }
#pragma unroll
                    for (int i = 0; i < R; i++)
                        if (i < nr)
                            acc[i * NT + t] += p[i] * (e4m3_to_f32(sb[i]) * 16384.0f);
                }
            }
        }
    } else {
        /* NVFP4: 16 bytes = 32 codes = 2 scale blocks of 16. */
        const uint8_t *base = (const uint8_t *)w.data + ebase / 2;
        const uint8_t *sbase = w.bscale + (int64_t)e * w.bscale_expert_stride;
        const int nch = w.cols / 32;
        for (int c = sub; c < nch; c += lpr) {
            uint4 q[R];
            uint16_t sb[R];
#pragma unroll
            for (int i = 0; i < R; i++)
                if (i < nr) {
                    const int r = r0 + i * rstep;
                    q[i] = __ldg(
                        reinterpret_cast<const uint4 *>(base + (int64_t)r * (w.row_stride / 2)) +
                        c);
                    sb[i] = __ldg(
                        reinterpret_cast<const uint16_t *>(sbase + (int64_t)r * w.bscale_stride) +
                        c);
                }
#pragma unroll
            for (int t = 0; t < NT; t++) {
                if (t < nt) {
                    const float4 *xp = reinterpret_cast<const float4 *>(x + t * ldx + c * 32);
                    float p[R][2];
#pragma unroll
                    for (int i = 0; i < R; i++)
                        p[i][0] = p[i][1] = 0.0f;
#pragma unroll
                    for (int k = 0; k < 4; k++) {
                        /* word k = elements 8k..8k+7, element 8k+j in nibble j: pairs (j, j+4) */
                        const float4 xl = __ldg(xp + 2 * k), xh = __ldg(xp + 2 * k + 1);
#pragma unroll
                        for (int i = 0; i < R; i++) {
                            if (i < nr) {
                                const uint32_t u = k == 0   ? q[i].x
                                                   : k == 1 ? q[i].y
                                                   : k == 2 ? q[i].z
                                                            : q[i].w;
                                float2 f;
                                float pp;
                                f = e2m1x2_hi_to_f32_scaled(u);
                                pp = f.x * xl.w + f.y * xh.w;
                                f = e2m1x2_hi_to_f32_scaled(u << 4);
                                pp += f.x * xl.z + f.y * xh.z;
                                f = e2m1x2_hi_to_f32_scaled(u << 8);
                                pp += f.x * xl.y + f.y * xh.y;
                                f = e2m1x2_hi_to_f32_scaled(u << 12);
                                pp += f.x * xl.x + f.y * xh.x;
                                p[i][k >> 1] += pp;
                            }
                        }
                    }
#pragma unroll
                    for (int i = 0; i < R; i++) {
                        if (i < nr) {
                            /* decoded values carry 2^-14: fold 2^14 into the block scales */
                            acc[i * NT + t] +=
                                p[i][0] * (e4m3_to_f32((uint8_t)(sb[i] & 0xff)) * 16384.0f) +
                                p[i][1] * (e4m3_to_f32((uint8_t)(sb[i] >> 8)) * 16384.0f);
                        }
                    }
                }
            }
        }
    }
}

/* Sum a value over the lpr lanes of a row group (lpr in {4, 8, 16, 32}); all lanes get it. */
static __device__ __forceinline__ float group_sum(float v, int lpr)
{
    for (int o = lpr >> 1; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Lanes per row: enough to cover a row's chunks with one pass where possible. */
static inline int kw_lanes_per_row(const kweight *w)
{
    int nch = w->cols / kw_chunk_of(*w);
    int lpr = 32;
    while (lpr > 4 && lpr / 2 >= nch)
        lpr >>= 1;
    return lpr;
}

/* Launcher-side checks shared by gemv and moe_expert: 0 or ERR_INVAL. */
static inline int kweight_check_dev(const kweight *w)
{
    if (!w || !w->data || w->rows <= 0 || w->cols <= 0)
        return ERR_INVAL;
    if (w->fmt != KW_FMT_BF16 && w->fmt != KW_FMT_FP8 && w->fmt != KW_FMT_NVFP4)
        return ERR_INVAL;
    /* nvfp4: K % 16 == 0 (one scale block); the kernels pick 16- or 8-byte loads */
    const int ch = w->fmt == KW_FMT_NVFP4 ? 16 : kw_chunk_elems(w->fmt);
    if (w->cols % ch || w->row_stride % ch || w->expert_stride % ch || w->row_stride < w->cols)
        return ERR_INVAL;
    if (((uintptr_t)w->data) % 16)
        return ERR_INVAL;
    if (w->fmt == KW_FMT_FP8) {
        if (!w->scale || w->scale_kind == KW_SCALE_NONE)
            return ERR_INVAL;
        if (w->scale_kind == KW_SCALE_BLOCK &&
            (w->block_rows <= 0 || w->block_cols <= 0 || w->block_cols % 16))
            return ERR_INVAL;
    }
    if (w->fmt == KW_FMT_NVFP4) {
        if (!w->bscale || w->bscale_stride < w->cols / 16 || w->bscale_expert_stride < 0)
            return ERR_INVAL;
    }
    return 0;
}

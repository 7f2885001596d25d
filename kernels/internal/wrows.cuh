/* wrows.cuh: the one-token GEMV of the decode step for bf16 and fp8 (e4m3) weights on the CUDA
 * cores, y[r] = sum_c W[r][c] x[c] with fp32 x and fp32 accumulation (gemv_cuda's CUDA-core
 * numerics: each weight widened exactly, fp8 block scales per 16-byte chunk, tensor and channel
 * scales on the finished dot; the per-lane partial sums in this kernel's order). A row belongs to
 * one warp, or to wk warps of a block when it is longer than one warp round (32 lanes x 64
 * columns = 2,048). Each lane issues its 128 bytes of the round (8 bf16 or 4 fp8 chunks of 16
 * bytes, and their block scales) before it uses any, the first round before the PDL wait (no
 * kernel of the step writes weights); x is read after the wait through the read-only cache (a
 * block's warps read the same x). Up to WR_MAX weights of one width in one launch (the GDN qkv, z,
 * b and a; attention q, k and v; bf16 and fp8 mixed): contiguous block ranges, one weight each.
 * Why not gemv_kernel<1, 4> (4 rows a 32-lane group, each x chunk reused for them): it gave the
 * 2,048-row bf16 out projection 64 blocks on 132 SMs and one 16-byte load a row in flight a
 * lane, 22% of the copy bandwidth (this kernel: 32%; batch-1 BF16 decode 288 -> 370 tok/s).
 * For fp8 the e4m3 widening on the CUDA cores costs more than the stream kernel's tensor-core
 * form (FP8 decode 346 -> 336 tok/s with it), so gemv_cuda's AUTO keeps fp8 on the stream kernel
 * (GEMV_FP8_ROWS_AUTO, gemv.h); GEMV_PATH_ROWS runs it. A persistent form (each warp a row slot
 * over rows g, g + G, ..., the next row's loads issued before the current row's math) measured
 * 1.5% slower on the BF16 step and was dropped (docs/PERF.md, seventeenth session). */
#pragma once

#include <stdint.h>
#include <string.h>

#include "kcuda.cuh"
#include "kweight.h"
#include "pdl.cuh"
#include "wdot.cuh"

#define WR_WARPS 8  /* warps a block */
#define WR_COLS 64  /* columns a lane a round: 8 chunks of bf16, 4 of fp8 (wr_fmt::U) */
#define WR_MAX_WK 8 /* warps a row at most (a round then covers 16,384 columns) */
#define WR_MAX 4    /* weights a launch (GEMV_MULTI_MAX) */

struct wrows_args {
    const uint8_t *w[WR_MAX]; /* the expert's first row */
    int64_t ld[WR_MAX];       /* row stride, bytes */
    float *y[WR_MAX];
    const float *s[WR_MAX];     /* fp8: the expert's scales (NULL for bf16) */
    int sk[WR_MAX];             /* fp8: enum kw_scale */
    int br[WR_MAX], bc[WR_MAX]; /* fp8 block scales: rows, columns a block */
    int fmt[WR_MAX];            /* KW_FMT_BF16 or KW_FMT_FP8 */
    int rows[WR_MAX];
    int bend[WR_MAX]; /* weight i: blocks [bend[i - 1], bend[i]) */
    const float *x;
    int K;  /* columns */
    int wk; /* warps a row */
};

/* weight i's field of the argument block without a dynamic index (which would copy the
 * parameter arrays to local memory) */
#define WR_PICK(a, f, i)                                                                           \
    ((i) == 0 ? (a).f[0] : (i) == 1 ? (a).f[1] : (i) == 2 ? (a).f[2] : (a).f[3])

template <int KF> struct wr_fmt {
    static constexpr int CE = KF == KF_BF16 ? 8 : 16; /* elements a 16-byte chunk */
    static constexpr int U = WR_COLS / CE;            /* chunks a lane a round */
};

/* one 16-byte chunk's dot with its x columns (wdot.cuh's arithmetic) */
template <int KF> static __device__ __forceinline__ float wr_chunk(const uint4 q, const float4 *xp)
{
    if (KF == KF_BF16)
        return kw_dot_bf16x8(q, __ldg(xp), __ldg(xp + 1));
    const float4 x[4] = {__ldg(xp), __ldg(xp + 1), __ldg(xp + 2), __ldg(xp + 3)};
    return kw_dot_e4m3x16(q, x);
}

/* lane's chunks of round `base`: base + (u * wk + kw) * 32 + lane, u < U (each (u, kw) a
 * contiguous 512-byte segment of the row), and for fp8 block scales each chunk's scale */
template <int KF>
static __device__ __forceinline__ void wr_load(uint4 *q, float *sc, const uint4 *row,
                                               const float *bs, int nbc, int bc, int base, int wk,
                                               int kw, int lane, int nch, bool valid)
{
#pragma unroll
    for (int u = 0; u < wr_fmt<KF>::U; u++) {
        const int c = base + (u * wk + kw) * 32 + lane;
        const bool on = valid && c < nch;
        q[u] = on ? __ldg(row + c) : make_uint4(0u, 0u, 0u, 0u);
        if (KF == KF_FP8)
            sc[u] = on && bs ? __ldg(bs + (c * 16) / bc) : 1.0f;
    }
}

/* block bx's rows of weight wi (its blocks start at b0), in format KF */
template <int KF>
static __device__ __forceinline__ void wrows_body(const wrows_args &a, float *red, int bx, int wi,
                                                  int b0)
{
    constexpr int U = wr_fmt<KF>::U;
    const int rows = WR_PICK(a, rows, wi);
    const int warp = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31;
    const int wk = a.wk, kw = warp % wk;
    const int row = (bx - b0) * (WR_WARPS / wk) + warp / wk;
    const bool valid = row < rows;
    const int rr = valid ? row : 0;
    const int nch = a.K / wr_fmt<KF>::CE, step = wk * 32 * U;
    const uint4 *wr =
        reinterpret_cast<const uint4 *>(WR_PICK(a, w, wi) + (int64_t)rr * WR_PICK(a, ld, wi));
    /* fp8: the block-scale row of this weight row, or the row's own multiplier */
    const float *bs = nullptr;
    int nbc = 0, bc = 1;
    float rs = 1.0f;
    if (KF == KF_FP8) {
        const float *s = WR_PICK(a, s, wi);
        const int sk = WR_PICK(a, sk, wi);
        if (sk == KW_SCALE_BLOCK) {
            bc = WR_PICK(a, bc, wi);
            nbc = (a.K + bc - 1) / bc;
            bs = s + (int64_t)(rr / WR_PICK(a, br, wi)) * nbc;
        } else if (valid && sk != KW_SCALE_NONE) {
            rs = __ldg(s + (sk == KW_SCALE_CHANNEL ? rr : 0));
        }
    }
    uint4 q[U];
    float sc[U];
    wr_load<KF>(q, sc, wr, bs, nbc, bc, 0, wk, kw, lane, nch, valid);
    kcuda_pdl_enter();
    const float4 *xv = reinterpret_cast<const float4 *>(a.x);
    float acc = 0.0f;
    for (int base = 0;;) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int c = base + (u * wk + kw) * 32 + lane;
            if (valid && c < nch) {
                const float p = wr_chunk<KF>(q[u], xv + c * (wr_fmt<KF>::CE / 4));
                if (KF == KF_FP8)
                    acc += p * sc[u];
                else
                    acc += p;
            }
        }
        base += step;
        if (base >= nch)
            break;
        wr_load<KF>(q, sc, wr, bs, nbc, bc, base, wk, kw, lane, nch, valid);
    }
    acc = warp_sum(acc);
    float *y = WR_PICK(a, y, wi);
    if (wk == 1) {
        if (valid && lane == 0)
            y[row] = acc * rs;
        return;
    }
    if (lane == 0)
        red[warp] = acc;
    __syncthreads(); /* wk is the launch's: block-uniform */
    if (valid && kw == 0 && lane == 0) {
        float s = 0.0f;
        for (int i = 0; i < wk; i++)
            s += red[warp + i];
        y[row] = s * rs;
    }
}

static __global__ void __launch_bounds__(WR_WARPS * 32) wrows_kernel(const wrows_args a)
{
    __shared__ float red[WR_WARPS];
    const int bx = (int)blockIdx.x;
    const int wi = bx < a.bend[0] ? 0 : bx < a.bend[1] ? 1 : bx < a.bend[2] ? 2 : 3;
    const int b0 = wi == 0 ? 0 : WR_PICK(a, bend, wi - 1);
    if (WR_PICK(a, fmt, wi) == KW_FMT_FP8) /* block-uniform */
        wrows_body<KF_FP8>(a, red, bx, wi, b0);
    else
        wrows_body<KF_BF16>(a, red, bx, wi, b0);
}

/* weights this kernel reads: bf16 or fp8 with 16-byte aligned rows (cols, row and expert
 * strides % 16 bytes) and, for fp8 block scales, blocks of whole 16-column chunks */
static inline bool wrows_ok(const kweight *w)
{
    const int eb = w->fmt == KW_FMT_BF16 ? 2 : 1;
    if (w->fmt != KW_FMT_BF16 && w->fmt != KW_FMT_FP8)
        return false;
    if ((w->cols * eb) % 16 || (w->row_stride * eb) % 16 || (w->expert_stride * eb) % 16 ||
        ((uintptr_t)w->data) % 16)
        return false;
    if (w->fmt == KW_FMT_FP8 &&
        ((!w->scale && w->scale_kind != KW_SCALE_NONE) ||
         (w->scale_kind == KW_SCALE_BLOCK &&
          (w->block_cols <= 0 || w->block_cols % 16 || w->block_rows <= 0))))
        return false;
    return true;
}

/* warps a row for K columns: enough that one round covers the row, at most WR_MAX_WK (a power of
 * two, so that a block holds whole rows) */
static inline int wrows_wk(int K)
{
    int wk = 1;
    while (wk < WR_MAX_WK && wk * 32 * WR_COLS < K)
        wk *= 2;
    return wk;
}

/* y_i = W_i[e_i] x for n (1..WR_MAX) wrows_ok weights (bf16 and fp8 mixed: each block reads one
 * weight) of the same cols; x 16-byte aligned */
static inline int wrows_launch(const kweight *const *ws, float *const *ys, const int *es, int n,
                               const float *x, cudaStream_t stream)
{
    wrows_args a;
    memset(&a, 0, sizeof a);
    const int K = ws[0]->cols, wk = wrows_wk(K), rpb = WR_WARPS / wk;
    int blocks = 0;
    for (int i = 0; i < n; i++) {
        const kweight *w = ws[i];
        const bool fp8 = w->fmt == KW_FMT_FP8;
        const int eb = fp8 ? 1 : 2;
        a.fmt[i] = w->fmt;
        a.w[i] = (const uint8_t *)w->data + (int64_t)es[i] * w->expert_stride * eb;
        a.ld[i] = w->row_stride * eb;
        a.y[i] = ys[i];
        if (fp8) {
            a.s[i] = w->scale ? w->scale + (int64_t)es[i] * w->scale_expert_stride : NULL;
            a.sk[i] = w->scale_kind;
            a.br[i] = w->block_rows;
            a.bc[i] = w->block_cols;
        }
        a.rows[i] = w->rows;
        blocks += (w->rows + rpb - 1) / rpb;
        a.bend[i] = blocks;
    }
    for (int i = n; i < WR_MAX; i++)
        a.bend[i] = blocks;
    a.x = x;
    a.K = K;
    a.wk = wk;
    kcuda_launch_pdl(wrows_kernel, dim3(blocks), dim3(WR_WARPS * 32), 0, stream, a);
    return kcuda_launch_status("gemv_rows");
}

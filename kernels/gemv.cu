/* gemv: skinny y = x W^T over struct kweight (see gemv.h). nvfp4 at 1..8 tokens: the stream
 * kernel (internal/nvfp4_stream.cuh). Otherwise one group of lpr lanes per output row,
 * 256-thread blocks. One token: each lane group does 4 rows, reusing its activation chunk; more
 * tokens: tiles of 4 tokens against one row (weights re-read from L1 for later tiles). */
#include "gemv.h"

#include <string.h>

#include "common/xalloc.h"
#include "internal/kcuda.cuh"
#include "internal/nvfp4_mma.cuh"
#include "internal/nvfp4_stream.cuh"
#include "internal/pdl.cuh"
#include "internal/wdot.cuh"
#include "internal/wrows.cuh"

#define GEMV_ROWS_T1 4 /* rows per lane group for one token: activation chunks reused 4x */

/* AUTO's row kernel for this format at one token (GEMV_BF16_ROWS_AUTO / GEMV_FP8_ROWS_AUTO,
 * gemv.h) */
static bool rows_fmt_auto(int fmt)
{
    return fmt == KW_FMT_BF16  ? GEMV_BF16_ROWS_AUTO
           : fmt == KW_FMT_FP8 ? GEMV_FP8_ROWS_AUTO
                               : false;
}

/* the row kernel for this weight at n_tok under GEMV_PATH_AUTO */
static bool rows_auto(const struct kweight *w, int n_tok)
{
    return rows_fmt_auto(w->fmt) && n_tok == 1 && w->rows > GEMV_WIDE_MAX_ROWS && wrows_ok(w);
}
/* 1: GEMV_PATH_AUTO takes the nvfp4 stream kernel (internal/nvfp4_stream.cuh) for 1..8 tokens
 * when its staged activations fit; 0: back to the tensor / CUDA-core choice */
#define GEMV_STREAM_AUTO 1
/* 1: ... and the same kernel for fp8 weights (e4m3 -> fp16 exact, scales per tensor, channel or
 * 128-column-aligned block) at 1..8 tokens; 0: fp8 stays on the CUDA cores */
#define GEMV_STREAM_FP8_AUTO 1

template <int NT, int R, int KF>
__global__ void __launch_bounds__(256, 2)
    gemv_kernel(float *y, kweight w, int e, const float *x, int n_tok, int lpr)
{
    kcuda_pdl_enter();
    const int rpb = blockDim.x / lpr;
    const int r0 = (blockIdx.x * rpb + threadIdx.x / lpr) * R;
    const int sub = threadIdx.x % lpr;
    const int nr = min(R, w.rows - r0); /* <= 0: idle group (still joins the shuffles) */
    float rs[R];
#pragma unroll
    for (int i = 0; i < R; i++)
        rs[i] = i < nr ? kw_row_scale(w, e, r0 + i) : 0.0f;
    for (int t0 = 0; t0 < n_tok; t0 += NT) {
        float acc[R * NT];
#pragma unroll
        for (int i = 0; i < R * NT; i++)
            acc[i] = 0.0f;
        const int nt = min(NT, n_tok - t0);
        if (nr > 0)
            wdot<NT, R, KF>(w, e, r0, 1, nr, x + (int64_t)t0 * w.cols, w.cols, nt, sub, lpr, acc);
#pragma unroll
        for (int i = 0; i < R; i++)
#pragma unroll
            for (int t = 0; t < NT; t++) {
                float v = group_sum(acc[i * NT + t], lpr);
                if (sub == 0 && i < nr && t < nt)
                    y[(int64_t)(t0 + t) * w.rows + r0 + i] = v * rs[i];
            }
    }
}

/* Few output rows (GEMV_WIDE_MAX_ROWS: routers, gates, the GDN b/a projections): one block of
 * GEMV_WIDE_THREADS per output row, the row's 16-byte chunks spread over all its threads (one or
 * two loads each) and a block reduction, so a 32-row weight is 32 blocks, not one block of
 * 4-row groups walking the whole row. Up to GEMV_MULTI_MAX weights on the same activations in one
 * launch: blockIdx.y picks the weight (each body is inlined once: no dynamic indexing of the
 * parameter struct), blocks past a weight's rows return. */
#define GEMV_WIDE_THREADS 256

struct gemv_wide_args {
    kweight w[GEMV_MULTI_MAX];
    float *y[GEMV_MULTI_MAX];
    int e[GEMV_MULTI_MAX];
    const float *x;
    int n_tok;
};

template <int NT, int KF>
static __device__ __forceinline__ void gemv_wide_row(const kweight &w, int e, float *y,
                                                     const float *x, int n_tok)
{
    __shared__ float red[NT][GEMV_WIDE_THREADS / 32];
    const int r = blockIdx.x;
    if (r >= w.rows)
        return; /* the whole block: before any barrier */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int t0 = 0; t0 < n_tok; t0 += NT) {
        const int nt = min(NT, n_tok - t0);
        float acc[NT];
#pragma unroll
        for (int t = 0; t < NT; t++)
            acc[t] = 0.0f;
        wdot<NT, 1, KF>(w, e, r, 1, 1, x + (int64_t)t0 * w.cols, w.cols, nt, threadIdx.x,
                        GEMV_WIDE_THREADS, acc);
#pragma unroll
        for (int t = 0; t < NT; t++) {
            const float v = warp_sum(acc[t]);
            if (lane == 0)
                red[t][warp] = v;
        }
        __syncthreads();
        if (threadIdx.x < nt) {
            float v = 0.0f;
#pragma unroll
            for (int i = 0; i < GEMV_WIDE_THREADS / 32; i++)
                v += red[threadIdx.x][i];
            y[(int64_t)(t0 + threadIdx.x) * w.rows + r] = v * kw_row_scale(w, e, r);
        }
        __syncthreads(); /* red[] is reused by the next token group */
    }
}

template <int NT, int KF>
__global__ void __launch_bounds__(GEMV_WIDE_THREADS) gemv_wide_kernel(gemv_wide_args a)
{
    kcuda_pdl_enter();
    switch (blockIdx.y) {
    case 0: gemv_wide_row<NT, KF>(a.w[0], a.e[0], a.y[0], a.x, a.n_tok); break;
    case 1: gemv_wide_row<NT, KF>(a.w[1], a.e[1], a.y[1], a.x, a.n_tok); break;
    case 2: gemv_wide_row<NT, KF>(a.w[2], a.e[2], a.y[2], a.x, a.n_tok); break;
    default: gemv_wide_row<NT, KF>(a.w[3], a.e[3], a.y[3], a.x, a.n_tok); break;
    }
}

template <int KF>
static void gemv_wide_launch(const gemv_wide_args &a, int rows, int n, cudaStream_t stream)
{
    const dim3 grid(rows, n);
    if (a.n_tok == 1)
        kcuda_launch_pdl(gemv_wide_kernel<1, KF>, grid, GEMV_WIDE_THREADS, 0, stream, a);
    else
        kcuda_launch_pdl(gemv_wide_kernel<GEMV_WIDE_MAX_TOK, KF>, grid, GEMV_WIDE_THREADS, 0,
                         stream, a);
}

/* one launch for n weights (kf: their common format class, or KF_ANY) */
static int gemv_wide_run(const gemv_wide_args &a, int rows, int n, int kf, cudaStream_t stream)
{
    switch (kf) {
    case KF_BF16: gemv_wide_launch<KF_BF16>(a, rows, n, stream); break;
    case KF_FP8: gemv_wide_launch<KF_FP8>(a, rows, n, stream); break;
    case KF_NVFP4: gemv_wide_launch<KF_NVFP4>(a, rows, n, stream); break;
    case KF_NVFP4_NARROW: gemv_wide_launch<KF_NVFP4_NARROW>(a, rows, n, stream); break;
    default: gemv_wide_launch<KF_ANY>(a, rows, n, stream); break;
    }
    return kcuda_launch_status("gemv_wide");
}

template <int KF>
static int gemv_cores_launch(float *y, const struct kweight *w, int expert, const float *x,
                             int n_tok, cudaStream_t stream)
{
    if (w->rows <= GEMV_WIDE_MAX_ROWS && n_tok <= GEMV_WIDE_MAX_TOK) {
        gemv_wide_args a;
        memset(&a, 0, sizeof a);
        a.w[0] = *w;
        a.y[0] = y;
        a.e[0] = expert;
        a.x = x;
        a.n_tok = n_tok;
        return gemv_wide_run(a, w->rows, 1, KF, stream);
    }
    const int lpr = kw_lanes_per_row(w);
    const int threads = 256;
    if (n_tok == 1) {
        dim3 grid(CEIL_DIV(w->rows, threads / lpr * GEMV_ROWS_T1));
        kcuda_launch_pdl(gemv_kernel<1, GEMV_ROWS_T1, KF>, grid, threads, 0, stream, y, *w,
                         expert, x, n_tok, lpr);
    } else {
        dim3 grid(CEIL_DIV(w->rows, threads / lpr));
        kcuda_launch_pdl(gemv_kernel<4, 1, KF>, grid, threads, 0, stream, y, *w, expert, x,
                         n_tok, lpr);
    }
    return kcuda_launch_status("gemv");
}

int gemv_cuda_path(float *y, const struct kweight *w, int expert, const float *x, int n_tok,
                   int path, cudaStream_t stream)
{
    int rc = kweight_check_dev(w);
    if (rc < 0)
        return rc;
    if (!y || !x || n_tok <= 0 || expert < 0 || ((uintptr_t)x) % 16)
        return ERR_INVAL;
    const bool mma_ok = nvfp4_mma_ok(w);
    if (path == GEMV_PATH_TENSOR && !mma_ok)
        return ERR_UNSUPPORTED;
    if (path < GEMV_PATH_AUTO || path > GEMV_PATH_ROWS)
        return ERR_INVAL;
    const bool stream_ok =
        GEMV_STREAM_AUTO && nvs_ok(w) && n_tok <= NVS_MAX_TOK && nvs_fits(w->cols, n_tok, 1);
    const bool stream_fp8_ok = GEMV_STREAM_FP8_AUTO && nvs_ok_fp8(w) && n_tok <= NVS_MAX_TOK &&
                               nvs_fits(w->cols, n_tok, 1);
    if (path == GEMV_PATH_ROWS || (path == GEMV_PATH_AUTO && rows_auto(w, n_tok))) {
        if (n_tok != 1 || !wrows_ok(w))
            return ERR_UNSUPPORTED;
        return wrows_launch(&w, &y, &expert, 1, x, stream);
    }
    if ((path == GEMV_PATH_STREAM && w->fmt == KW_FMT_FP8) ||
        (path == GEMV_PATH_AUTO && stream_fp8_ok)) {
        struct nvs_args a = {y, w->rows, x, w->cols, NULL, NULL, n_tok, 1, 1, expert, 1, 0};
        return nvs_launch<NVS_PLAIN>(w, a, 1, 1, n_tok, stream);
    }
    if (path == GEMV_PATH_STREAM || (path == GEMV_PATH_AUTO && stream_ok)) {
        struct nvs_args a = {y, w->rows, x, w->cols, NULL, NULL, n_tok, 1, 1, expert, 1, 0};
        return nvs_launch<NVS_PLAIN>(w, a, 1, 1, n_tok, stream);
    }
    if (path == GEMV_PATH_TENSOR || (path == GEMV_PATH_AUTO && mma_ok)) {
        const int ntile = n_tok <= 8 ? 1 : 8;
        dim3 grid(CEIL_DIV(w->rows, 16), CEIL_DIV(n_tok, ntile * 8));
        struct nvfp4_mma_args a = {y, w->rows, x, w->cols, NULL, 1, n_tok, 0, expert};
        if (grid.y > 65535)
            return ERR_INVAL;
        if (ntile == 1)
            nvfp4_mma_kernel<1, false><<<grid, NVFP4_MMA_WARPS * 32, 0, stream>>>(*w, a);
        else
            nvfp4_mma_kernel<8, false><<<grid, NVFP4_MMA_WARPS * 32, 0, stream>>>(*w, a);
        return kcuda_launch_status("gemv_nvfp4_mma");
    }
    switch (kw_kf_of(w)) {
    case KF_BF16:
        return gemv_cores_launch<KF_BF16>(y, w, expert, x, n_tok, stream);
    case KF_FP8:
        return gemv_cores_launch<KF_FP8>(y, w, expert, x, n_tok, stream);
    case KF_NVFP4:
        return gemv_cores_launch<KF_NVFP4>(y, w, expert, x, n_tok, stream);
    default:
        return gemv_cores_launch<KF_NVFP4_NARROW>(y, w, expert, x, n_tok, stream);
    }
}

int gemv_cuda(float *y, const struct kweight *w, int expert, const float *x, int n_tok,
              cudaStream_t stream)
{
    return gemv_cuda_path(y, w, expert, x, n_tok, GEMV_PATH_AUTO, stream);
}

/* The stream kernel's share of these weights: ns (2..NVS_MULTI) nvfp4 weights, or ns fp8 ones,
 * it takes, each as gemv_cuda would, in one load form and with one expert index */
static bool multi_stream_ok(const struct gemv_out *outs, int ns, int n_tok)
{
    const bool fp8 = ns > 0 && outs[0].w->fmt == KW_FMT_FP8;
    if (ns < 2 || ns > NVS_MULTI || !(fp8 ? GEMV_STREAM_FP8_AUTO : GEMV_STREAM_AUTO) ||
        n_tok > NVS_MAX_TOK)
        return false;
    for (int i = 0; i < ns; i++) {
        const struct kweight *w = outs[i].w;
        if (!(fp8 ? nvs_ok_fp8(w) : nvs_ok(w) && nvs_vec16(w) == nvs_vec16(outs[0].w)) ||
            !nvs_fits(w->cols, n_tok, 1) || outs[i].expert != outs[0].expert)
            return false;
    }
    return true;
}

/* How many weights lead the set in the first one's format when it is the stream kernel's (nvfp4
 * or fp8; its share, when it takes them) */
static int multi_lead_stream(const struct gemv_out *outs, int n)
{
    const int f = n > 0 && outs[0].w ? outs[0].w->fmt : -1;
    if (f != KW_FMT_NVFP4 && f != KW_FMT_FP8)
        return 0;
    int ns = 0;
    while (ns < n && outs[ns].w && outs[ns].w->fmt == f)
        ns++;
    return ns;
}

int gemv_multi_kind(const struct gemv_out *outs, int n, int n_tok)
{
    if (!outs || n < 1 || n > GEMV_MULTI_MAX || n_tok < 1)
        return GEMV_MULTI_NONE;
    bool wide = n_tok <= GEMV_WIDE_MAX_TOK;
    for (int i = 0; i < n; i++) {
        const struct kweight *w = outs[i].w;
        if (!w || w->cols != outs[0].w->cols)
            return GEMV_MULTI_NONE;
        wide = wide && w->rows <= GEMV_WIDE_MAX_ROWS;
    }
    /* bf16 and fp8 weights at one token, one of them past the wide kernel's rows, each big one
     * where gemv_cuda takes the row kernel: the row kernel (the small ones' sums in its order) */
    bool rows = !wide && n_tok == 1;
    for (int i = 0; rows && i < n; i++)
        rows = wrows_ok(outs[i].w) &&
               (outs[i].w->rows <= GEMV_WIDE_MAX_ROWS || rows_auto(outs[i].w, n_tok));
    if (rows)
        return GEMV_MULTI_ROWS;
    const int ns = multi_lead_stream(outs, n);
    /* the stream kernel: what gemv_cuda takes for each of them, in one launch of one load form */
    if (ns == n && multi_stream_ok(outs, n, n_tok))
        return GEMV_MULTI_STREAM;
    /* ... followed by 1..NVS_MULTI_WIDE small bf16 weights, a warp per row in the same launch */
    bool tail = ns < n && n - ns <= NVS_MULTI_WIDE && multi_stream_ok(outs, ns, n_tok);
    for (int i = ns; tail && i < n; i++)
        tail = outs[i].w->fmt == KW_FMT_BF16 && outs[i].w->rows <= GEMV_WIDE_MAX_ROWS;
    if (tail)
        return GEMV_MULTI_STREAM_WIDE;
    return wide ? GEMV_MULTI_WIDE : GEMV_MULTI_NONE;
}

int gemv_multi_cuda(const struct gemv_out *outs, int n, const float *x, int n_tok,
                    cudaStream_t stream)
{
    if (!outs || n < 1 || n > GEMV_MULTI_MAX || !x || n_tok < 1 || ((uintptr_t)x) % 16)
        return ERR_INVAL;
    gemv_wide_args a;
    memset(&a, 0, sizeof a);
    int rows = 0, kf = kw_kf_of(outs[0].w);
    for (int i = 0; i < n; i++) {
        const struct kweight *w = outs[i].w;
        int rc = kweight_check_dev(w);
        if (rc < 0)
            return rc;
        if (!outs[i].y || outs[i].expert < 0 || w->cols != outs[0].w->cols)
            return ERR_INVAL;
    }
    const int kind = gemv_multi_kind(outs, n, n_tok);
    if (kind == GEMV_MULTI_NONE)
        return ERR_UNSUPPORTED;
    /* the row and stream kernels take the outputs as arrays */
    const kweight *ws[GEMV_MULTI_MAX];
    float *ys[GEMV_MULTI_MAX];
    int es[GEMV_MULTI_MAX];
    for (int i = 0; i < n; i++) {
        ws[i] = outs[i].w;
        ys[i] = outs[i].y;
        es[i] = outs[i].expert;
    }
    if (kind == GEMV_MULTI_ROWS)
        return wrows_launch(ws, ys, es, n, x, stream);
    if (kind == GEMV_MULTI_STREAM || kind == GEMV_MULTI_STREAM_WIDE) {
        const int ns = multi_lead_stream(outs, n); /* == n for GEMV_MULTI_STREAM */
        const struct nvs_args na = {outs[0].y, outs[0].w->rows, x, outs[0].w->cols, NULL, NULL,
                                    n_tok, 1, 1, outs[0].expert, 1, 0};
        return nvs_launch_multi(ws, ys, ns, ws + ns, ys + ns, es + ns, n - ns, na,
                                outs[0].w->fmt == KW_FMT_FP8, stream);
    }
    for (int i = 0; i < n; i++) { /* GEMV_MULTI_WIDE */
        const struct kweight *w = outs[i].w;
        if (kw_kf_of(w) != kf)
            kf = KF_ANY;
        rows = w->rows > rows ? w->rows : rows;
        a.w[i] = *w;
        a.y[i] = outs[i].y;
        a.e[i] = outs[i].expert;
    }
    a.x = x;
    a.n_tok = n_tok;
    return gemv_wide_run(a, rows, n, kf, stream);
}

/* gemv: skinny y = x W^T over struct kweight (see gemv.h). nvfp4 at 1..8 tokens: the stream
 * kernel (internal/nvfp4_stream.cuh). Otherwise one group of lpr lanes per output row,
 * 256-thread blocks. One token: each lane group does 4 rows, reusing its activation chunk; more
 * tokens: tiles of 4 tokens against one row (weights re-read from L1 for later tiles). */
#include "gemv.h"

#include "common/xalloc.h"
#include "internal/kcuda.cuh"
#include "internal/nvfp4_mma.cuh"
#include "internal/nvfp4_stream.cuh"
#include "internal/wdot.cuh"

#define GEMV_ROWS_T1 4 /* rows per lane group for one token: activation chunks reused 4x */
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

template <int KF>
static int gemv_cores_launch(float *y, const struct kweight *w, int expert, const float *x,
                             int n_tok, cudaStream_t stream)
{
    const int lpr = kw_lanes_per_row(w);
    const int threads = 256;
    if (n_tok == 1) {
        dim3 grid(CEIL_DIV(w->rows, threads / lpr * GEMV_ROWS_T1));
        gemv_kernel<1, GEMV_ROWS_T1, KF>
            <<<grid, threads, 0, stream>>>(y, *w, expert, x, n_tok, lpr);
    } else {
        dim3 grid(CEIL_DIV(w->rows, threads / lpr));
        gemv_kernel<4, 1, KF><<<grid, threads, 0, stream>>>(y, *w, expert, x, n_tok, lpr);
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
    if (path < GEMV_PATH_AUTO || path > GEMV_PATH_STREAM)
        return ERR_INVAL;
    const bool stream_ok =
        GEMV_STREAM_AUTO && nvs_ok(w) && n_tok <= NVS_MAX_TOK && nvs_fits(w->cols, n_tok, 1);
    const bool stream_fp8_ok = GEMV_STREAM_FP8_AUTO && nvs_ok_fp8(w) && n_tok <= NVS_MAX_TOK &&
                               nvs_fits(w->cols, n_tok, 1);
    if ((path == GEMV_PATH_STREAM && w->fmt == KW_FMT_FP8) ||
        (path == GEMV_PATH_AUTO && stream_fp8_ok)) {
        struct nvs_args a = {y, w->rows, x, w->cols, NULL, NULL, n_tok, 1, 1, expert, 1, 0};
        return nvs_launch_fp8(w, a, stream);
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

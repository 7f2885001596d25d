/* gemm_fp8: per-token e4m3 quantization kernel + cuBLASLt fp8 GEMM (TN, fp32 out) + scale
 * epilogue; BLOCK-scaled weights: bf16 dequantization kernels + gemm_bf16. Row-major
 * y(m,n) = x(m,k) w(n,k)^T is, column-major, Y(n,m) = op_T(W as k x n) * X(k x m), the TN layout
 * that fp8 cuBLASLt requires. cuBLASLt always writes the context's own aligned fp32 scratch; the
 * epilogue applies the scales and writes or adds into y. */
#include "gemm_fp8.h"

#include <cublasLt.h>

#include "common/xalloc.h"
#include "gemm_bf16.h"
#include "internal/kcuda.cuh"

#define GF_QUANT_THREADS 256
#define GF_EW_THREADS 256

struct gemm_fp8 {
    cublasLtHandle_t lt;
    void *ws; /* cuBLASLt workspace */
    size_t ws_bytes;
    uint8_t *xq;  /* (max_rows, max_k) e4m3 */
    float *sx;    /* (max_rows) per-token scales */
    float *ytmp;  /* (max_rows, max_n) fp32 GEMM output */
    uint16_t *xb; /* (max_rows, max_k) bf16 (BLOCK path) */
    uint16_t *wb; /* (max_n, max_k) bf16 dequantized weight (BLOCK path) */
    int max_rows, max_n, max_k;
    int n_fallback; /* calls of the fp8 path that ran the bf16 fallback */
};

static int gf_check_weight(const struct kweight *w)
{
    if (!w || !w->data || w->fmt != KW_FMT_FP8 || w->rows <= 0 || w->cols <= 0 || w->rows % 16 ||
        w->cols % 16 || w->row_stride % 16 || w->expert_stride % 16 || w->row_stride < w->cols ||
        !w->scale || ((uintptr_t)w->data) % 16)
        return ERR_INVAL;
    if (w->scale_kind != KW_SCALE_TENSOR && w->scale_kind != KW_SCALE_CHANNEL &&
        w->scale_kind != KW_SCALE_BLOCK)
        return ERR_INVAL;
    if (w->scale_kind == KW_SCALE_BLOCK &&
        (w->block_rows <= 0 || w->block_cols <= 0 || w->block_cols % 16))
        return ERR_INVAL;
    return 0;
}

void gemm_fp8_destroy(struct gemm_fp8 *g)
{
    if (!g)
        return;
    cudaFree(g->ws);
    cudaFree(g->xq);
    cudaFree(g->sx);
    cudaFree(g->ytmp);
    cudaFree(g->xb);
    cudaFree(g->wb);
    if (g->lt)
        cublasLtDestroy(g->lt);
    free(g);
}

int gemm_fp8_create(struct gemm_fp8 **out, int max_rows, int max_n, int max_k, size_t ws_bytes)
{
    struct gemm_fp8 *g;
    int rc = ERR_NOMEM;
    if (!out || max_rows <= 0 || max_n <= 0 || max_k <= 0)
        return ERR_INVAL;
    *out = NULL;
    g = (struct gemm_fp8 *)calloc(1, sizeof(*g));
    if (!g)
        return ERR_NOMEM;
    g->max_rows = max_rows;
    g->max_n = max_n;
    g->max_k = max_k;
    g->ws_bytes = ws_bytes;
    if (cublasLtCreate(&g->lt) != CUBLAS_STATUS_SUCCESS) {
        g->lt = NULL;
        rc = ERR_CUDA;
        goto fail;
    }
    if ((ws_bytes && cudaMalloc(&g->ws, ws_bytes) != cudaSuccess) ||
        cudaMalloc((void **)&g->xq, (size_t)max_rows * max_k) != cudaSuccess ||
        cudaMalloc((void **)&g->sx, sizeof(float) * (size_t)max_rows) != cudaSuccess ||
        cudaMalloc((void **)&g->ytmp, sizeof(float) * (size_t)max_rows * max_n) != cudaSuccess ||
        cudaMalloc((void **)&g->xb, 2 * (size_t)max_rows * max_k) != cudaSuccess ||
        cudaMalloc((void **)&g->wb, 2 * (size_t)max_n * max_k) != cudaSuccess) {
        cudaGetLastError(); /* clear the allocation error */
        goto fail;
    }
    *out = g;
    return 0;
fail:
    LOG_ERR("gemm_fp8_create_failed", "rows=%d n=%d k=%d ws=%zu rc=%d", max_rows, max_n, max_k,
            ws_bytes, rc);
    gemm_fp8_destroy(g);
    return rc;
}

/* One block per row: amax, s = amax/448, xq = e4m3(x * 448/amax), RNE, saturating. k % 4 == 0. */
__global__ void __launch_bounds__(GF_QUANT_THREADS)
    gemm_fp8_quant_kernel(uint8_t *xq, float *sx, const float *x, int k)
{
    __shared__ float red[32];
    const float *xt = x + (int64_t)blockIdx.x * k;
    float m = 0.0f;
    for (int c = threadIdx.x * 4; c < k; c += blockDim.x * 4) {
        const float4 v = *reinterpret_cast<const float4 *>(xt + c);
        m = fmaxf(m, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
    }
    m = block_max(m, red);
    /* explicit IEEE division: --use_fast_math would make '/' approximate (the reference is IEEE) */
    const float inv = m > 0.0f ? __fdiv_rn(448.0f, m) : 0.0f;
    if (threadIdx.x == 0)
        sx[blockIdx.x] = __fdiv_rn(m, 448.0f);
    uint8_t *qt = xq + (int64_t)blockIdx.x * k;
    for (int c = threadIdx.x * 4; c < k; c += blockDim.x * 4) {
        const float4 v = *reinterpret_cast<const float4 *>(xt + c);
        const uint32_t lo =
            __nv_cvt_float2_to_fp8x2(make_float2(v.x * inv, v.y * inv), __NV_SATFINITE, __NV_E4M3);
        const uint32_t hi =
            __nv_cvt_float2_to_fp8x2(make_float2(v.z * inv, v.w * inv), __NV_SATFINITE, __NV_E4M3);
        *reinterpret_cast<uint32_t *>(qt + c) = lo | (hi << 16);
    }
}

/* y[t][c] (+)= src[t][c] * (sx ? sx[t] : 1) * (wsc ? wsc[channel ? c : 0] : 1); grid (m, n/256). */
__global__ void gemm_fp8_epilogue_kernel(float *y, const float *src, const float *sx,
                                         const float *wsc, int channel, int n, int accumulate)
{
    const int t = blockIdx.x, c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= n)
        return;
    const float s = (sx ? sx[t] : 1.0f) * (wsc ? wsc[channel ? c : 0] : 1.0f);
    const int64_t i = (int64_t)t * n + c;
    const float v = src[i] * s;
    y[i] = accumulate ? y[i] + v : v;
}

/* wb[r][c] = bf16(e4m3(W[e][r][c]) * block scale), or with block_scaled == 0 the bare e4m3 value
 * (exact in bf16: the fallback of the TENSOR/CHANNEL path); grid (n, k/256). */
__global__ void gemm_fp8_dequant_kernel(uint16_t *wb, const kweight w, int e, int block_scaled)
{
    const int r = blockIdx.x, c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= w.cols)
        return;
    const uint8_t b =
        ((const uint8_t *)w.data)[(int64_t)e * w.expert_stride + (int64_t)r * w.row_stride + c];
    float s = 1.0f;
    if (block_scaled) {
        const int nbc = (w.cols + w.block_cols - 1) / w.block_cols;
        s = w.scale[(int64_t)e * w.scale_expert_stride + (int64_t)(r / w.block_rows) * nbc +
                    c / w.block_cols];
    }
    wb[(int64_t)r * w.cols + c] = f32_to_bf16_bits(e4m3_to_f32(b) * s);
}

/* xb[i] = bf16(e4m3 xq[i]) (exact). */
__global__ void gemm_fp8_xq_to_bf16_kernel(uint16_t *xb, const uint8_t *xq, int64_t n)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        xb[i] = f32_to_bf16_bits(e4m3_to_f32(xq[i]));
}

__global__ void gemm_fp8_to_bf16_kernel(uint16_t *xb, const float *x, int64_t n)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        xb[i] = f32_to_bf16_bits(x[i]);
}

/* D(n, m) fp32 = op_T(A: e4m3 k x n, ld lda) * B (e4m3 k x m, ld k), col-major, into g->ytmp. */
static int gf_lt_matmul(struct gemm_fp8 *g, const uint8_t *wq, int64_t lda, int m, int n, int k,
                        cudaStream_t stream)
{
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0, rc = ERR_CUDA;
    const cublasOperation_t tr = CUBLAS_OP_T, nt = CUBLAS_OP_N;
    const float alpha = 1.0f, beta = 0.0f;
    if (cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS)
        return ERR_CUDA;
    if (cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tr, sizeof(tr)) ||
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &nt, sizeof(nt)))
        goto out;
    if (cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, k, n, lda) ||
        cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, k, m, k) ||
        cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, n, m, n))
        goto out;
    if (cublasLtMatmulPreferenceCreate(&pref) ||
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &g->ws_bytes, sizeof(g->ws_bytes)))
        goto out;
    if (cublasLtMatmulAlgoGetHeuristic(g->lt, op, la, lb, lc, lc, pref, 1, &heur, &found) ||
        found == 0) {
        LOG_DEBUG("gemm_fp8_no_algo", "m=%d n=%d k=%d", m, n, k);
        rc = ERR_UNSUPPORTED;
        goto out;
    }
    if (cublasLtMatmul(g->lt, op, &alpha, wq, la, g->xq, lb, &beta, g->ytmp, lc, g->ytmp, lc,
                       &heur.algo, g->ws, g->ws_bytes, stream) == CUBLAS_STATUS_SUCCESS)
        rc = 0;
    else
        LOG_ERR("gemm_fp8_matmul_failed", "m=%d n=%d k=%d", m, n, k);
out:
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    if (lc)
        cublasLtMatrixLayoutDestroy(lc);
    if (lb)
        cublasLtMatrixLayoutDestroy(lb);
    if (la)
        cublasLtMatrixLayoutDestroy(la);
    cublasLtMatmulDescDestroy(op);
    return rc;
}

int gemm_fp8_fallbacks(const struct gemm_fp8 *g)
{
    return g ? g->n_fallback : 0;
}

int gemm_fp8_cuda(struct gemm_fp8 *g, float *y, const float *x, int rows, const struct kweight *w,
                  int expert, int accumulate, cudaStream_t stream)
{
    int rc;
    if (!g || !y || !x || rows < 0 || expert < 0 || gf_check_weight(w) < 0 || rows > g->max_rows ||
        w->rows > g->max_n || w->cols > g->max_k || ((uintptr_t)x) % 16)
        return ERR_INVAL;
    if (rows == 0)
        return 0;
    const int n = w->rows, k = w->cols;
    const dim3 eg(rows, CEIL_DIV(n, GF_EW_THREADS));
    if (w->scale_kind == KW_SCALE_BLOCK) {
        gemm_fp8_dequant_kernel<<<dim3(n, CEIL_DIV(k, GF_EW_THREADS)), GF_EW_THREADS, 0, stream>>>(
            g->wb, *w, expert, 1);
        const int64_t nx = (int64_t)rows * k;
        gemm_fp8_to_bf16_kernel<<<(unsigned)CEIL_DIV(nx, GF_EW_THREADS), GF_EW_THREADS, 0,
                                  stream>>>(g->xb, x, nx);
        rc = kcuda_launch_status("gemm_fp8_dequant");
        if (rc == 0)
            rc = gemm_bf16_cuda(g->ytmp, g->xb, g->wb, rows, n, k, 0, g->lt, g->ws, g->ws_bytes,
                                stream);
        if (rc < 0)
            return rc;
        gemm_fp8_epilogue_kernel<<<eg, GF_EW_THREADS, 0, stream>>>(y, g->ytmp, NULL, NULL, 0, n,
                                                                   accumulate);
        return kcuda_launch_status("gemm_fp8_epilogue");
    }
    gemm_fp8_quant_kernel<<<rows, GF_QUANT_THREADS, 0, stream>>>(g->xq, g->sx, x, k);
    rc = kcuda_launch_status("gemm_fp8_quant");
    if (rc == 0)
        rc = gf_lt_matmul(g, (const uint8_t *)w->data + (int64_t)expert * w->expert_stride,
                          w->row_stride, rows, n, k, stream);
    if (rc == ERR_UNSUPPORTED) {
        /* no fp8 cuBLASLt algorithm for this shape / build: the same products in bf16 (e4m3
         * values are exact in bf16, so only the fp32 summation order can differ) */
        if (g->n_fallback++ == 0)
            LOG_WARN("gemm_fp8_bf16_fallback", "m=%d n=%d k=%d", rows, n, k);
        const int64_t nx = (int64_t)rows * k;
        gemm_fp8_dequant_kernel<<<dim3(n, CEIL_DIV(k, GF_EW_THREADS)), GF_EW_THREADS, 0, stream>>>(
            g->wb, *w, expert, 0);
        gemm_fp8_xq_to_bf16_kernel<<<(unsigned)CEIL_DIV(nx, GF_EW_THREADS), GF_EW_THREADS, 0,
                                     stream>>>(g->xb, g->xq, nx);
        rc = kcuda_launch_status("gemm_fp8_fallback");
        if (rc == 0)
            rc = gemm_bf16_cuda(g->ytmp, g->xb, g->wb, rows, n, k, 0, g->lt, g->ws, g->ws_bytes,
                                stream);
    }
    if (rc < 0)
        return rc;
    gemm_fp8_epilogue_kernel<<<eg, GF_EW_THREADS, 0, stream>>>(
        y, g->ytmp, g->sx, w->scale + (int64_t)expert * w->scale_expert_stride,
        w->scale_kind == KW_SCALE_CHANNEL, n, accumulate);
    return kcuda_launch_status("gemm_fp8_epilogue");
}

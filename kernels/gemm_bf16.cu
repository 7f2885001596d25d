/* gemm_bf16: cuBLASLt call (bf16 inputs, or fp32 inputs for gemm_f32_ld_cuda). Row-major y(m,n) = x(m,k) w(n,k)^T is, column-major,
 * Y(n,m) = op_T(W as k x n) * X(k x m). Descriptors are created per call (prefill only). */
#include "gemm_bf16.h"

#include <cublasLt.h>

#include "common/xalloc.h"
#include "internal/kcuda.cuh"

static int lt_gemm(float *y, int64_t ldy, const void *x, const void *w, int64_t ldw, int m, int n,
                   int k, int accumulate, cudaDataType_t ab, void *lt, void *workspace,
                   size_t ws_bytes, cudaStream_t stream);

int gemm_bf16_cuda(float *y, const uint16_t *x, const uint16_t *w, int m, int n, int k,
                   int accumulate, void *lt, void *workspace, size_t ws_bytes, cudaStream_t stream)
{
    return lt_gemm(y, n, x, w, k, m, n, k, accumulate, CUDA_R_16BF, lt, workspace, ws_bytes,
                   stream);
}

int gemm_bf16_ld_cuda(float *y, int64_t ldy, const uint16_t *x, const uint16_t *w, int64_t ldw,
                      int m, int n, int k, int accumulate, void *lt, void *workspace,
                      size_t ws_bytes, cudaStream_t stream)
{
    return lt_gemm(y, ldy, x, w, ldw, m, n, k, accumulate, CUDA_R_16BF, lt, workspace, ws_bytes,
                   stream);
}

int gemm_f32_ld_cuda(float *y, int64_t ldy, const float *x, const float *w, int64_t ldw, int m,
                     int n, int k, int accumulate, void *lt, void *workspace, size_t ws_bytes,
                     cudaStream_t stream)
{
    return lt_gemm(y, ldy, x, w, ldw, m, n, k, accumulate, CUDA_R_32F, lt, workspace, ws_bytes,
                   stream);
}

static int lt_gemm(float *y, int64_t ldy, const void *x, const void *w, int64_t ldw, int m, int n,
                   int k, int accumulate, cudaDataType_t ab, void *lt, void *workspace,
                   size_t ws_bytes, cudaStream_t stream)
{
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0, rc = ERR_CUDA;
    const cublasOperation_t tr = CUBLAS_OP_T, nt = CUBLAS_OP_N;
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    if (!y || !x || !w || !lt || m < 0 || n <= 0 || k <= 0 || ldy < n || ldw < k ||
        (ws_bytes && !workspace))
        return ERR_INVAL;
    if (m == 0)
        return 0;
    if (cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS)
        return ERR_CUDA;
    if (cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tr, sizeof(tr)) ||
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &nt, sizeof(nt)))
        goto out_op;
    if (cublasLtMatrixLayoutCreate(&la, ab, k, n, ldw))
        goto out_op;
    if (cublasLtMatrixLayoutCreate(&lb, ab, k, m, k))
        goto out_la;
    if (cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, n, m, ldy))
        goto out_lb;
    if (cublasLtMatmulPreferenceCreate(&pref))
        goto out_lc;
    if (cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &ws_bytes, sizeof(ws_bytes)))
        goto out_pref;
    if (cublasLtMatmulAlgoGetHeuristic((cublasLtHandle_t)lt, op, la, lb, lc, lc, pref, 1, &heur,
                                       &found) ||
        found == 0) {
        rc = ERR_UNSUPPORTED;
        goto out_pref;
    }
    if (cublasLtMatmul((cublasLtHandle_t)lt, op, &alpha, w, la, x, lb, &beta, y, lc, y, lc,
                       &heur.algo, workspace, ws_bytes, stream) == CUBLAS_STATUS_SUCCESS)
        rc = kcuda_launch_status(ab == CUDA_R_32F ? "gemm_f32" : "gemm_bf16");
out_pref:
    cublasLtMatmulPreferenceDestroy(pref);
out_lc:
    cublasLtMatrixLayoutDestroy(lc);
out_lb:
    cublasLtMatrixLayoutDestroy(lb);
out_la:
    cublasLtMatrixLayoutDestroy(la);
out_op:
    cublasLtMatmulDescDestroy(op);
    return rc;
}

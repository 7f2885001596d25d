/* gemm_bf16: prefill GEMM through cuBLASLt, y = x W^T with bf16 x and W, fp32 accumulation and
 * fp32 output. A thin wrapper: the caller owns the cublasLt handle and the workspace. */
#ifndef KERNELS_GEMM_BF16_H
#define KERNELS_GEMM_BF16_H

#include <stddef.h>
#include <stdint.h>

#include "kstream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y: (m, n) fp32 row-major; x: (m, k) bf16 row-major; w: (n, k) bf16 row-major (nn.Linear).
 * accumulate != 0 adds into y. lt: a cublasLtHandle_t; workspace: device scratch of ws_bytes
 * (may be 0). Device pointers. Returns 0, ERR_INVAL, ERR_UNSUPPORTED (no cuBLASLt algorithm),
 * ERR_CUDA. */
int gemm_bf16_cuda(float *y, const uint16_t *x, const uint16_t *w, int m, int n, int k,
                   int accumulate, void *lt, void *workspace, size_t ws_bytes, cudaStream_t stream);
/* The same with row pitches: y rows ldy >= n floats apart, w rows ldw >= k elements apart (a
 * column block of a wider output, a weight with padded rows). */
int gemm_bf16_ld_cuda(float *y, int64_t ldy, const uint16_t *x, const uint16_t *w, int64_t ldw,
                      int m, int n, int k, int accumulate, void *lt, void *workspace,
                      size_t ws_bytes, cudaStream_t stream);
/* The same on fp32 x and w (cuBLASLt fp32, no TF32: the products as exact as a CUDA-core dot),
 * for small weights whose outputs pick discrete choices (the MoE router). */
int gemm_f32_ld_cuda(float *y, int64_t ldy, const float *x, const float *w, int64_t ldw, int m,
                     int n, int k, int accumulate, void *lt, void *workspace, size_t ws_bytes,
                     cudaStream_t stream);
/* Same contract on host pointers (lt/workspace unused). */
int gemm_bf16_ref(float *y, const uint16_t *x, const uint16_t *w, int m, int n, int k,
                  int accumulate);

#ifdef __cplusplus
}
#endif

#endif

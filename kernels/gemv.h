/* gemv: y = x W^T for a skinny activation batch (decode, 1..64 tokens) and a weight in any
 * struct kweight format (bf16, fp8 e4m3 with tensor/channel/block scales, nvfp4 weight-only).
 * Weights are streamed once with 128-bit loads and dequantized in registers; fp32 accumulation
 * (nvfp4 on tensor cores: fp16 products of the exact dequantized weight and the fp16-rounded
 * activation, fp32 accumulation; activations must stay below 65504 in magnitude).
 * For bigger batches use gemm_bf16 (cuBLASLt). */
#ifndef KERNELS_GEMV_H
#define KERNELS_GEMV_H

#include <stdint.h>

#include "kstream.h"
#include "kweight.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y[t][r] = sum_c W[expert][r][c] * x[t][c].  y: (n_tok, w->rows); x: (n_tok, w->cols), 16-byte
 * aligned. Device pointers (w's too). n_tok >= 1. Returns 0, ERR_INVAL (shape/alignment: cols a
 * multiple of 8/16/32 for bf16/fp8/nvfp4) or ERR_CUDA. Does not synchronize. */
int gemv_cuda(float *y, const struct kweight *w, int expert, const float *x, int n_tok,
              cudaStream_t stream);
/* gemv_cuda with an explicit path, for tests and benchmarks: GEMV_PATH_AUTO (what gemv_cuda does:
 * tensor cores for nvfp4 when the shape allows it, CUDA cores otherwise), GEMV_PATH_CORES (fp32
 * CUDA-core dot products, any format), GEMV_PATH_TENSOR (nvfp4 only, cols % 128 == 0, 8-byte
 * aligned scale rows: weights decoded to fp16 in registers, activations rounded to fp16,
 * mma.m16n8k16 with fp32 accumulation; else ERR_UNSUPPORTED). */
enum gemv_path { GEMV_PATH_AUTO = 0, GEMV_PATH_CORES, GEMV_PATH_TENSOR };
int gemv_cuda_path(float *y, const struct kweight *w, int expert, const float *x, int n_tok,
                   int path, cudaStream_t stream);
/* Same contract on host pointers. */
int gemv_ref(float *y, const struct kweight *w, int expert, const float *x, int n_tok);

#ifdef __cplusplus
}
#endif

#endif

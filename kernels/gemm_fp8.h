/* gemm_fp8: prefill GEMM y = x W^T for an fp8 e4m3 struct kweight, through cuBLASLt.
 *   TENSOR / CHANNEL weight scales: x is quantized to e4m3 per token (row) on the fly
 *     (s_t = max|x_t| / 448, xq = e4m3(x / s_t) rounded to nearest even), cuBLASLt computes
 *     xq Wq^T in fp8 with fp32 accumulation and fp32 output, and an epilogue kernel multiplies
 *     by s_t * w_scale(n) (and adds into y when accumulating).
 *   BLOCK weight scales (e.g. 128x128): the weight is dequantized (scale applied) to bf16 and x
 *     rounded to bf16, then gemm_bf16 (cuBLASLt bf16, fp32 accumulation). cuBLASLt's own
 *     block-scaled fp8 modes are not used (their scale layouts are not exercised yet).
 * The context owns the cuBLASLt handle, its workspace and all scratch (sized by create);
 * gemm_fp8_cuda allocates nothing on the device (cuBLASLt descriptors are host objects made per
 * call). One context per stream at a time. */
#ifndef KERNELS_GEMM_FP8_H
#define KERNELS_GEMM_FP8_H

#include <stddef.h>
#include <stdint.h>

#include "kstream.h"
#include "kweight.h"

#ifdef __cplusplus
extern "C" {
#endif

struct gemm_fp8;

/* Scratch for up to max_rows x max_k activations and max_n x max_k (BLOCK path) weights, and a
 * cuBLASLt workspace of ws_bytes (32 MiB is a good value). Returns 0, ERR_INVAL, ERR_NOMEM (device
 * memory), ERR_CUDA. */
int gemm_fp8_create(struct gemm_fp8 **out, int max_rows, int max_n, int max_k, size_t ws_bytes);
void gemm_fp8_destroy(struct gemm_fp8 *g);
/* Calls of g that took the bf16 fallback of the fp8 path (see gemm_fp8_cuda). */
int gemm_fp8_fallbacks(const struct gemm_fp8 *g);

/* y: (rows, w->rows) fp32; x: (rows, w->cols) fp32, 16-byte aligned; w: fp8 weight (device
 * pointers), expert e of a stack (0 for a plain weight). accumulate != 0 adds into y.
 * Constraints (else ERR_INVAL): 0 <= rows <= max_rows, w->rows <= max_n, w->cols <= max_k,
 * w->rows % 16 == 0, w->cols % 16 == 0, w->row_stride % 16 == 0, expert_stride % 16 == 0,
 * 16-byte aligned data, a scale kind. When cuBLASLt has no fp8 algorithm for a TENSOR/CHANNEL
 * call, the same products run through gemm_bf16 (e4m3 values are exact in bf16; logged once,
 * counted by gemm_fp8_fallbacks). Returns 0, ERR_INVAL, ERR_UNSUPPORTED (no cuBLASLt
 * algorithm at all), ERR_CUDA. Does not synchronize. */
int gemm_fp8_cuda(struct gemm_fp8 *g, float *y, const float *x, int rows, const struct kweight *w,
                  int expert, int accumulate, cudaStream_t stream);

/* Host reference of exactly that math: per-token e4m3 quantization (TENSOR/CHANNEL) or bf16
 * rounding of x and of the dequantized weight (BLOCK), double accumulation. Same constraints
 * except the max_* ones. Returns 0, ERR_INVAL, ERR_NOMEM. */
int gemm_fp8_ref(float *y, const float *x, int rows, const struct kweight *w, int expert,
                 int accumulate);

#ifdef __cplusplus
}
#endif

#endif

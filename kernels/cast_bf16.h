/* cast_bf16: fp32 -> bf16 (round to nearest even), e.g. activations before gemm_bf16. */
#ifndef KERNELS_CAST_BF16_H
#define KERNELS_CAST_BF16_H

#include <stdint.h>

#include "kstream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out[i] = bf16(x[i]) for i < n. Device pointers. Returns 0, ERR_INVAL, ERR_CUDA. */
int cast_bf16_cuda(uint16_t *out, const float *x, int64_t n, cudaStream_t stream);
int cast_bf16_ref(uint16_t *out, const float *x, int64_t n);

#ifdef __cplusplus
}
#endif

#endif

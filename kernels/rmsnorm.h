/* rmsnorm: out[r,:] = x[r,:] * rsqrt(mean(x[r,:]^2) + eps) * (w_offset + w), fp32.
 * w_offset = 1 for Qwen3.5's zero-centred norms (1+w), 0 for a plain weight. Also serves the
 * per-head q/k norms (n_rows = tokens*heads, dim = head_dim). */
#ifndef KERNELS_RMSNORM_H
#define KERNELS_RMSNORM_H

#include "kstream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out, x: (n_rows, dim); w: (dim,). Device pointers; out may equal x. Returns 0, ERR_INVAL,
 * ERR_CUDA. */
int rmsnorm_cuda(float *out, const float *x, const float *w, int n_rows, int dim, float eps,
                 float w_offset, cudaStream_t stream);
/* Threads of rmsnorm_cuda's block for a row of dim: its block sum's order, so its bits (kernels
 * that fold the norm in, embed_rmsnorm_cuda, take the same). */
static inline int rmsnorm_threads(int dim)
{
    return dim >= 1024 ? 256 : dim >= 256 ? 128 : 64;
}
/* Same contract on host pointers. */
int rmsnorm_ref(float *out, const float *x, const float *w, int n_rows, int dim, float eps,
                float w_offset);

#ifdef __cplusplus
}
#endif

#endif

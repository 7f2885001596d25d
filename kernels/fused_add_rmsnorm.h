/* fused_add_rmsnorm: the residual add and the next RMSNorm in one pass:
 *   resid[r,:] += x[r,:];  out[r,:] = rmsnorm(resid[r,:]) * (w_offset + w)   (fp32). */
#ifndef KERNELS_FUSED_ADD_RMSNORM_H
#define KERNELS_FUSED_ADD_RMSNORM_H

#include "kstream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out, resid, x: (n_rows, dim); w: (dim,). Device pointers; resid is updated in place; out must
 * not alias resid or x. Returns 0, ERR_INVAL, ERR_CUDA. */
int fused_add_rmsnorm_cuda(float *out, float *resid, const float *x, const float *w, int n_rows,
                           int dim, float eps, float w_offset, cudaStream_t stream);
/* Same contract on host pointers: the add, then rmsnorm_ref. */
int fused_add_rmsnorm_ref(float *out, float *resid, const float *x, const float *w, int n_rows,
                          int dim, float eps, float w_offset);

#ifdef __cplusplus
}
#endif

#endif

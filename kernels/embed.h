/* embed: token embedding gather from a bf16 table into fp32 rows. */
#ifndef KERNELS_EMBED_H
#define KERNELS_EMBED_H

#include <stdint.h>

#include "kstream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out[t,:] = table[ids[t],:] as fp32.  out: (n_tok, dim); table: (vocab, dim) bf16; ids: (n_tok,).
 * Device pointers. An id outside [0, vocab) yields a zero row (ids are validated upstream).
 * Returns 0, ERR_INVAL, ERR_CUDA. */
int embed_cuda(float *out, const uint16_t *table, const int32_t *ids, int n_tok, int dim, int vocab,
               cudaStream_t stream);
int embed_ref(float *out, const uint16_t *table, const int32_t *ids, int n_tok, int dim, int vocab);
/* embed_cuda into h, then rmsnorm_cuda(x, h, w, n_tok, dim, eps, w_offset) in the same launch (the
 * first layer's input norm: a launch fewer a step), the bits the two launches give. h and x:
 * (n_tok, dim), distinct; w: (dim,). Returns 0, ERR_INVAL, ERR_CUDA. */
int embed_rmsnorm_cuda(float *h, float *x, const uint16_t *table, const int32_t *ids, int n_tok,
                       int dim, int vocab, const float *w, float eps, float w_offset,
                       cudaStream_t stream);
int embed_rmsnorm_ref(float *h, float *x, const uint16_t *table, const int32_t *ids, int n_tok,
                      int dim, int vocab, const float *w, float eps, float w_offset);

#ifdef __cplusplus
}
#endif

#endif

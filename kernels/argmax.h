/* argmax: greedy sampling, the index of the largest logit of each row (ties -> lowest index;
 * NaN is never chosen; a row of only NaN gives 0). */
#ifndef KERNELS_ARGMAX_H
#define KERNELS_ARGMAX_H

#include <stdint.h>

#include "kstream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ids[r] = argmax_i logits[r, i].  logits: (n_rows, vocab) fp32; ids: (n_rows,). Device pointers.
 * Returns 0, ERR_INVAL, ERR_CUDA. */
int argmax_cuda(int32_t *ids, const float *logits, int n_rows, int vocab, cudaStream_t stream);
int argmax_ref(int32_t *ids, const float *logits, int n_rows, int vocab);

#ifdef __cplusplus
}
#endif

#endif

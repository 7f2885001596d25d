/* argmax: greedy sampling, the index of the largest logit of each row (ties -> lowest index;
 * NaN is never chosen; a row of only NaN gives 0). */
#ifndef KERNELS_ARGMAX_H
#define KERNELS_ARGMAX_H

#include <stddef.h>
#include <stdint.h>

#include "kstream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ids[r] = argmax_i logits[r, i].  logits: (n_rows, vocab) fp32; ids: (n_rows,). Device pointers.
 * Each row is read by up to ARGMAX_MAX_PARTS blocks (a 248,320-entry vocabulary row is 1 MB: one
 * block took ~20 us over it), each folding its best (value, index) into the row's 64-bit key with
 * an atomic max; the last block of a row (a counter) writes the id and zeroes the key and the
 * counter. ws: argmax_ws_words(n_rows) 64-bit words, zero before the first launch; every launch
 * leaves them zero (launches in stream order). Returns 0, ERR_INVAL, ERR_CUDA. */
#define ARGMAX_MAX_PARTS 64
size_t argmax_ws_words(int n_rows);
int argmax_cuda(int32_t *ids, const float *logits, int n_rows, int vocab, unsigned long long *ws,
                cudaStream_t stream);
/* Same ids on host pointers. */
int argmax_ref(int32_t *ids, const float *logits, int n_rows, int vocab);

#ifdef __cplusplus
}
#endif

#endif

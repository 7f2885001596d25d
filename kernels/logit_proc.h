/* logit_proc: the logits processors that run before sampling, on the device, with the semantics
 * of model/sample.c (its logit_bias, banned ids and allow mask, in that order, before the
 * penalties): for each row of B rows of V fp32 logits
 *   1. l[id] += value for each (id, value) of the row's bias pairs, in order (ids outside [0, V)
 *      skipped; a repeated id adds again, as sample.c does);
 *   2. l[id] = -inf for each of the row's banned ids (outside [0, V) skipped);
 *   3. with an allow mask (a bit set of (V + 31) / 32 words, bit id & 31 of word id >> 5):
 *      l[i] = -inf for every i whose bit is clear.
 * Each addition is one fp32 add rounded to nearest with denormals kept (as the host computes it),
 * and a NaN logit keeps its bits (the device's add would return its canonical NaN, the host's
 * the operand's), so the processed rows equal the host's bit for bit (bias values are finite:
 * the gateway refuses others). */
#ifndef KERNELS_LOGIT_PROC_H
#define KERNELS_LOGIT_PROC_H

#include <stdint.h>

#include "kstream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One row's processors: bias pairs bias_ids/bias_vals[bias_off .. bias_off+n_bias), banned ids
 * ban_ids[ban_off .. ban_off+n_ban), allow mask at allow + allow_off (words), or allow_off < 0
 * for none. A row with nothing to do is left untouched. */
struct logit_proc_row {
    int32_t bias_off, n_bias;
    int32_t ban_off, n_ban;
    int32_t allow_off;
    int32_t pad_;
};

/* Words of one row's allow mask. */
static inline int logit_proc_mask_words(int V) { return (V + 31) / 32; }

/* logits: (B, V) fp32, processed in place; rows: (B); the tables may be NULL when no row uses
 * them. Device pointers. 1 <= V. Returns 0, ERR_INVAL, ERR_CUDA. */
int logit_proc_cuda(float *logits, int B, int V, const struct logit_proc_row *rows,
                    const int32_t *bias_ids, const float *bias_vals, const uint32_t *ban_ids,
                    const uint32_t *allow, cudaStream_t stream);
/* The same on host pointers. */
int logit_proc_ref(float *logits, int B, int V, const struct logit_proc_row *rows,
                   const int32_t *bias_ids, const float *bias_vals, const uint32_t *ban_ids,
                   const uint32_t *allow);

#ifdef __cplusplus
}
#endif

#endif

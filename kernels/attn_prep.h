/* attn_prep: a gated-attention layer's inputs after its q/k/v projections, in one launch (what
 * rmsnorm, rope and kv_write do one after another, MODEL.md §3.4): for every row t
 *   query head h: q[t][h] = rope(rmsnorm(qsrc[t][h]) * (1 + q_norm)); with an output gate the
 *     projection's head is [q | gate] (2 * head_dim wide) and the gate half is copied to gate;
 *   key head h:   k[t][h] = rope(rmsnorm(k[t][h]) * (1 + k_norm)) in place, then k[t] and v[t]
 *     stored into the paged caches at slot_mapping[t] as kv_write_dtype_cuda stores them (bf16,
 *     or e4m3 of x / scale, saturating); rows whose slot is < 0 are not stored.
 * rope as rope.h (partial neox rotation of the first rot_dim dims at position pos[t]). One block
 * per (head, row), one thread per dim. */
#ifndef KERNELS_ATTN_PREP_H
#define KERNELS_ATTN_PREP_H

#include <stdint.h>

#include "kstream.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_PREP_MAX_HEAD_DIM 512

/* q: (n_tok, n_q_heads, head_dim); gate: the same or NULL (then qsrc is (n_tok, n_q_heads,
 * head_dim) too, else (n_tok, n_q_heads, 2 * head_dim)); k, v: (n_tok, n_kv_heads, head_dim);
 * caches: (slots, n_kv_heads, head_dim) of kv_dtype. Device pointers. Returns 0, ERR_INVAL
 * (shapes: head_dim <= ATTN_PREP_MAX_HEAD_DIM, rot_dim even and <= head_dim, n_tok <= 65535;
 * scales > 0), ERR_CUDA. */
int attn_prep_cuda(float *q, float *gate, const float *qsrc, float *k, const float *v,
                   void *k_cache, void *v_cache, int kv_dtype, float k_scale, float v_scale,
                   const float *q_norm, const float *k_norm, const int32_t *pos,
                   const int32_t *slot_mapping, int n_tok, int n_q_heads, int n_kv_heads,
                   int head_dim, int rot_dim, float eps, float theta, cudaStream_t stream);
/* Same contract on host pointers: the split, rmsnorm_ref, rope_ref and kv_write_dtype_ref. */
int attn_prep_ref(float *q, float *gate, const float *qsrc, float *k, const float *v,
                  void *k_cache, void *v_cache, int kv_dtype, float k_scale, float v_scale,
                  const float *q_norm, const float *k_norm, const int32_t *pos,
                  const int32_t *slot_mapping, int n_tok, int n_q_heads, int n_kv_heads,
                  int head_dim, int rot_dim, float eps, float theta);

#ifdef __cplusplus
}
#endif

#endif

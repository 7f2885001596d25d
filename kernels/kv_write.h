/* kv_write: store new keys/values (fp32, after k-norm and RoPE) into the paged bf16 KV cache.
 * Cache layout: (n_slots_total, n_kv_heads, head_dim) where slot = block_id*block_size + offset,
 * the same layout attn_decode reads. */
#ifndef KERNELS_KV_WRITE_H
#define KERNELS_KV_WRITE_H

#include <stdint.h>

#include "kstream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* k, v: (n_tok, n_kv_heads, head_dim) fp32; slot_mapping: (n_tok,) cache slot of each token
 * (< 0 = skip). Device pointers. Returns 0, ERR_INVAL, ERR_CUDA. */
int kv_write_cuda(uint16_t *k_cache, uint16_t *v_cache, const float *k, const float *v,
                  const int32_t *slot_mapping, int n_tok, int n_kv_heads, int head_dim,
                  cudaStream_t stream);
int kv_write_ref(uint16_t *k_cache, uint16_t *v_cache, const float *k, const float *v,
                 const int32_t *slot_mapping, int n_tok, int n_kv_heads, int head_dim);

#ifdef __cplusplus
}
#endif

#endif

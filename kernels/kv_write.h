/* kv_write: store new keys/values (fp32, after k-norm and RoPE) into the paged KV cache, as bf16
 * or as fp8 e4m3 with a per-tensor scale (vLLM --kv-cache-dtype fp8: stored = e4m3(x / scale),
 * read back as e4m3 * scale; RNE, saturating to +-448).
 * Cache layout: (n_slots_total, n_kv_heads, head_dim) where slot = block_id*block_size + offset,
 * the same layout attn_decode and attn_prefill read; 2 bytes per element (bf16) or 1 (fp8). */
#ifndef KERNELS_KV_WRITE_H
#define KERNELS_KV_WRITE_H

#include <stdint.h>

#include "common/kv_plan.h" /* enum kv_dtype: KV_DTYPE_BF16, KV_DTYPE_FP8 (AUTO is refused) */
#include "kstream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes per cache element of kv_dtype (0 for an unknown dtype). */
static inline int kv_dtype_bytes(int kv_dtype)
{
    return kv_dtype == KV_DTYPE_BF16 ? 2 : kv_dtype == KV_DTYPE_FP8 ? 1 : 0;
}

/* k, v: (n_tok, n_kv_heads, head_dim) fp32; slot_mapping: (n_tok,) cache slot of each token
 * (< 0 = skip). Device pointers. bf16 cache. Returns 0, ERR_INVAL, ERR_CUDA. */
int kv_write_cuda(uint16_t *k_cache, uint16_t *v_cache, const float *k, const float *v,
                  const int32_t *slot_mapping, int n_tok, int n_kv_heads, int head_dim,
                  cudaStream_t stream);
int kv_write_ref(uint16_t *k_cache, uint16_t *v_cache, const float *k, const float *v,
                 const int32_t *slot_mapping, int n_tok, int n_kv_heads, int head_dim);

/* Same, for a cache of kv_dtype (enum kv_dtype of common/kv_plan.h, resolved). k_scale,
 * v_scale: per-tensor scales (finite, > 0; only used for fp8, where the value stored is
 * e4m3(x * (1/scale)); 1.0 = vLLM's default).
 * Both sides compute the reciprocal in fp32 first, so GPU and reference bytes are identical. */
int kv_write_dtype_cuda(void *k_cache, void *v_cache, const float *k, const float *v,
                        const int32_t *slot_mapping, int n_tok, int n_kv_heads, int head_dim,
                        int kv_dtype, float k_scale, float v_scale, cudaStream_t stream);
int kv_write_dtype_ref(void *k_cache, void *v_cache, const float *k, const float *v,
                       const int32_t *slot_mapping, int n_tok, int n_kv_heads, int head_dim,
                       int kv_dtype, float k_scale, float v_scale);

#ifdef __cplusplus
}
#endif

#endif

/* kv_write reference. */
#include "kv_write.h"

#include <math.h>

#include "common/err.h"
#include "kdtype.h"

int kv_write_dtype_ref(void *k_cache, void *v_cache, const float *k, const float *v,
                       const int32_t *slot_mapping, int n_tok, int n_kv_heads, int head_dim,
                       int kv_dtype, float k_scale, float v_scale)
{
    const long w = (long)n_kv_heads * head_dim;
    if (n_tok < 0 || n_kv_heads <= 0 || head_dim <= 0 || !kv_dtype_bytes(kv_dtype) ||
        !(k_scale > 0.0f) || !(v_scale > 0.0f) || isinf(k_scale) || isinf(v_scale))
        return ERR_INVAL;
    const float k_inv = 1.0f / k_scale, v_inv = 1.0f / v_scale;
    for (int t = 0; t < n_tok; t++) {
        long s = slot_mapping[t];
        if (s < 0)
            continue;
        for (long i = 0; i < w; i++) {
            if (kv_dtype == KV_DTYPE_BF16) {
                ((uint16_t *)k_cache)[s * w + i] = kdtype_f32_to_bf16(k[t * w + i]);
                ((uint16_t *)v_cache)[s * w + i] = kdtype_f32_to_bf16(v[t * w + i]);
            } else {
                ((uint8_t *)k_cache)[s * w + i] = kdtype_f32_to_e4m3(k[t * w + i] * k_inv);
                ((uint8_t *)v_cache)[s * w + i] = kdtype_f32_to_e4m3(v[t * w + i] * v_inv);
            }
        }
    }
    return 0;
}

int kv_write_ref(uint16_t *k_cache, uint16_t *v_cache, const float *k, const float *v,
                 const int32_t *slot_mapping, int n_tok, int n_kv_heads, int head_dim)
{
    return kv_write_dtype_ref(k_cache, v_cache, k, v, slot_mapping, n_tok, n_kv_heads, head_dim,
                              KV_DTYPE_BF16, 1.0f, 1.0f);
}

/* kv_write reference. */
#include "kv_write.h"

#include "common/err.h"
#include "kdtype.h"

int kv_write_ref(uint16_t *k_cache, uint16_t *v_cache, const float *k, const float *v,
                 const int32_t *slot_mapping, int n_tok, int n_kv_heads, int head_dim)
{
    const long w = (long)n_kv_heads * head_dim;
    if (n_tok < 0 || n_kv_heads <= 0 || head_dim <= 0)
        return ERR_INVAL;
    for (int t = 0; t < n_tok; t++) {
        long s = slot_mapping[t];
        if (s < 0)
            continue;
        for (long i = 0; i < w; i++) {
            k_cache[s * w + i] = kdtype_f32_to_bf16(k[t * w + i]);
            v_cache[s * w + i] = kdtype_f32_to_bf16(v[t * w + i]);
        }
    }
    return 0;
}

/* attn_prep reference: the same steps as the separate kernels' references. */
#include "attn_prep.h"

#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/xalloc.h"
#include "kv_write.h"
#include "rmsnorm.h"
#include "rope.h"

int attn_prep_ref(float *q, float *gate, const float *qsrc, float *k, const float *v,
                  void *k_cache, void *v_cache, int kv_dtype, float k_scale, float v_scale,
                  const float *q_norm, const float *k_norm, const int32_t *pos,
                  const int32_t *slot_mapping, int n_tok, int n_q_heads, int n_kv_heads,
                  int head_dim, int rot_dim, float eps, float theta)
{
    if (!q || !qsrc || !k || !v || !k_cache || !v_cache || !q_norm || !k_norm || !pos ||
        !slot_mapping || n_tok < 0 || n_q_heads <= 0 || n_kv_heads <= 0 || head_dim <= 0 ||
        head_dim > ATTN_PREP_MAX_HEAD_DIM || rot_dim <= 0 || rot_dim % 2 || rot_dim > head_dim)
        return ERR_INVAL;
    const int64_t hd = head_dim, qd = (int64_t)n_q_heads * hd;
    for (int64_t t = 0; t < n_tok; t++)
        for (int h = 0; h < n_q_heads; h++) {
            const float *src = qsrc + (t * n_q_heads + h) * (gate ? 2 * hd : hd);
            memcpy(q + t * qd + h * hd, src, sizeof(float) * (size_t)hd);
            if (gate)
                memcpy(gate + t * qd + h * hd, src + hd, sizeof(float) * (size_t)hd);
        }
    int rc = rmsnorm_ref(q, q, q_norm, n_tok * n_q_heads, head_dim, eps, 1.0f);
    if (rc == 0)
        rc = rmsnorm_ref(k, k, k_norm, n_tok * n_kv_heads, head_dim, eps, 1.0f);
    if (rc == 0)
        rc = rope_ref(q, pos, n_tok, n_q_heads, head_dim, rot_dim, qd, hd, theta);
    if (rc == 0)
        rc = rope_ref(k, pos, n_tok, n_kv_heads, head_dim, rot_dim, (int64_t)n_kv_heads * hd, hd,
                      theta);
    if (rc == 0)
        rc = kv_write_dtype_ref(k_cache, v_cache, k, v, slot_mapping, n_tok, n_kv_heads,
                                head_dim, kv_dtype, k_scale, v_scale);
    return rc;
}

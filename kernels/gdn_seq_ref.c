/* gdn_seq reference: each item's rows in order through the single-step references, with the
 * state snapshots copied out after every row. */
#include "gdn_seq.h"

#include <string.h>

#include "common/err.h"
#include "gdn_conv.h"
#include "gdn_step.h"

#define D GDN_SEQ_HEAD_DIM

int gdn_seq_conv_ref(float *out, float *state, float *snap, int n_snap, const float *x,
                     const float *w, const int32_t *items, int n_items, int channels, int kc)
{
    if (n_items < 0 || channels <= 0 || kc < 2 || kc > GDN_CONV_MAX_KC)
        return ERR_INVAL;
    const size_t win = (size_t)channels * (size_t)(kc - 1);
    for (int i = 0; i < n_items; i++) {
        const int32_t *it = items + (size_t)i * GDN_SEQ_ITEM_INTS;
        const int32_t slot = it[2];
        for (int t = 0; t < it[1]; t++) {
            const size_t r = (size_t)it[0] + (size_t)t;
            int rc = gdn_conv_ref(out + r * (size_t)channels, state, x + r * (size_t)channels, w,
                                  &slot, 1, channels, kc);
            if (rc < 0)
                return rc;
            if (snap && it[3] >= 0 && it[3] + t < n_snap)
                memcpy(snap + (size_t)(it[3] + t) * win, state + (size_t)slot * win,
                       sizeof(float) * win);
        }
    }
    return 0;
}

int gdn_seq_step_ref(float *out, float *state, float *snap, int n_snap, const float *qkv,
                     const float *z, const float *a, const float *b, const float *a_log,
                     const float *dt_bias, const float *norm_w, const int32_t *items,
                     int n_items, int n_k_heads, int n_v_heads, float eps)
{
    if (n_items < 0 || n_k_heads <= 0 || n_v_heads <= 0 || n_v_heads % n_k_heads)
        return ERR_INVAL;
    const size_t width = (size_t)(2 * n_k_heads + n_v_heads) * D, vw = (size_t)n_v_heads * D;
    const size_t ss = vw * D;
    for (int i = 0; i < n_items; i++) {
        const int32_t *it = items + (size_t)i * GDN_SEQ_ITEM_INTS;
        const int32_t slot = it[2];
        for (int t = 0; t < it[1]; t++) {
            const size_t r = (size_t)it[0] + (size_t)t;
            int rc = gdn_step_ref(out + r * vw, state, qkv + r * width, z + r * vw,
                                  a + r * (size_t)n_v_heads, b + r * (size_t)n_v_heads, a_log,
                                  dt_bias, norm_w, &slot, 1, n_k_heads, n_v_heads, eps);
            if (rc < 0)
                return rc;
            if (snap && it[3] >= 0 && it[3] + t < n_snap)
                memcpy(snap + (size_t)(it[3] + t) * ss, state + (size_t)slot * ss,
                       sizeof(float) * ss);
        }
    }
    return 0;
}

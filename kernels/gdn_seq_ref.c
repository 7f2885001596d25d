/* gdn_seq reference: each item's rows in order through the single-step references, with the
 * state snapshots copied out after every row. */
#include "gdn_seq.h"

#include <string.h>

#include "common/err.h"
#include "gdn_conv.h"
#include "gdn_step.h"

#define D GDN_SEQ_HEAD_DIM

int gdn_seq_conv_ref(float *out, float *state, int64_t state_stride, float *snap, int n_snap,
                     const float *x, const float *w, const int32_t *items, int n_items,
                     int channels, int kc)
{
    if (n_items < 0 || channels <= 0 || kc < 2 || kc > GDN_CONV_MAX_KC)
        return ERR_INVAL;
    const size_t win = (size_t)channels * (size_t)(kc - 1);
    if (state_stride == 0)
        state_stride = (int64_t)win;
    if (state_stride < (int64_t)win)
        return ERR_INVAL;
    const int32_t slot0 = 0; /* the item's state, addressed directly */
    for (int i = 0; i < n_items; i++) {
        const int32_t *it = items + (size_t)i * GDN_SEQ_ITEM_INTS;
        float *st = state + (size_t)it[2] * (size_t)state_stride;
        for (int t = 0; t < it[1]; t++) {
            const size_t r = (size_t)it[0] + (size_t)t;
            int rc = gdn_conv_ref(out + r * (size_t)channels, st, x + r * (size_t)channels, w,
                                  &slot0, 1, channels, kc);
            if (rc < 0)
                return rc;
            if (snap && it[3] >= 0 && it[3] + t < n_snap)
                memcpy(snap + (size_t)(it[3] + t) * win, st, sizeof(float) * win);
        }
    }
    return 0;
}

int gdn_seq_step_ref(float *out, float *state, int64_t state_stride, float *snap, int n_snap,
                     const float *qkv, const float *z, const float *a, const float *b,
                     const float *a_log, const float *dt_bias, const float *norm_w,
                     const int32_t *items, int n_items, int n_k_heads, int n_v_heads, float eps)
{
    if (n_items < 0 || n_k_heads <= 0 || n_v_heads <= 0 || n_v_heads % n_k_heads)
        return ERR_INVAL;
    const size_t width = (size_t)(2 * n_k_heads + n_v_heads) * D, vw = (size_t)n_v_heads * D;
    const size_t ss = vw * D;
    if (state_stride == 0)
        state_stride = (int64_t)ss;
    if (state_stride < (int64_t)ss)
        return ERR_INVAL;
    const int32_t slot0 = 0; /* the item's state, addressed directly */
    for (int i = 0; i < n_items; i++) {
        const int32_t *it = items + (size_t)i * GDN_SEQ_ITEM_INTS;
        float *st = state + (size_t)it[2] * (size_t)state_stride;
        for (int t = 0; t < it[1]; t++) {
            const size_t r = (size_t)it[0] + (size_t)t;
            int rc = gdn_step_ref(out + r * vw, st, qkv + r * width, z + r * vw,
                                  a + r * (size_t)n_v_heads, b + r * (size_t)n_v_heads, a_log,
                                  dt_bias, norm_w, &slot0, 1, n_k_heads, n_v_heads, eps);
            if (rc < 0)
                return rc;
            if (snap && it[3] >= 0 && it[3] + t < n_snap)
                memcpy(snap + (size_t)(it[3] + t) * ss, st, sizeof(float) * ss);
        }
    }
    return 0;
}

/* logit_proc_ref: the host reference of kernels/logit_proc.h (model/sample.c's order). */
#include "logit_proc.h"

#include <math.h>
#include <stddef.h>

#include "common/err.h"

int logit_proc_ref(float *logits, int B, int V, const struct logit_proc_row *rows,
                   const int32_t *bias_ids, const float *bias_vals, const uint32_t *ban_ids,
                   const uint32_t *allow)
{
    if (!logits || B < 0 || V < 1 || (B > 0 && !rows))
        return ERR_INVAL;
    for (int b = 0; b < B; b++) {
        const struct logit_proc_row *r = &rows[b];
        float *l = logits + (size_t)b * (size_t)V;
        if ((r->n_bias > 0 && (!bias_ids || !bias_vals)) || (r->n_ban > 0 && !ban_ids) ||
            (r->allow_off >= 0 && !allow))
            return ERR_INVAL;
        for (int i = 0; i < r->n_bias; i++) {
            const int32_t id = bias_ids[r->bias_off + i];
            if (id >= 0 && id < V)
                l[id] += bias_vals[r->bias_off + i];
        }
        for (int i = 0; i < r->n_ban; i++)
            if (ban_ids[r->ban_off + i] < (uint32_t)V)
                l[ban_ids[r->ban_off + i]] = -INFINITY;
        if (r->allow_off >= 0) {
            const uint32_t *m = allow + r->allow_off;
            for (int i = 0; i < V; i++)
                if (!(m[i >> 5] >> (i & 31) & 1))
                    l[i] = -INFINITY;
        }
    }
    return 0;
}

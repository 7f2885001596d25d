/* moe_expert reference: gemv_ref of the selected experts, SwiGLU and the weighted sum. */
#include "moe_expert.h"

#include <math.h>
#include <stdlib.h>

#include "common/err.h"
#include "common/xalloc.h"
#include "gemv.h"

size_t moe_expert_ws_floats(int n_tok, int top_k, int inter, int hidden)
{
    return (size_t)n_tok * top_k * (2 * (size_t)inter + hidden);
}

int moe_expert_ref(float *out, float *ws, const float *x, const int32_t *ids, const float *weights,
                   int n_tok, int top_k, int n_experts, const struct kweight *gate_up,
                   const struct kweight *down, int accumulate)
{
    const int hidden = down->rows, inter = down->cols;
    float *gu, *y;
    if (n_tok < 0 || top_k <= 0 || gate_up->rows != 2 * inter || gate_up->cols != hidden)
        return ERR_INVAL;
    gu = xmalloc(sizeof(float) * 2 * (size_t)inter);
    y = xmalloc(sizeof(float) * (size_t)hidden);
    for (int t = 0; t < n_tok; t++) {
        float *o = out + (long)t * hidden;
        if (!accumulate)
            for (int i = 0; i < hidden; i++)
                o[i] = 0.0f;
        for (int j = 0; j < top_k; j++) {
            int e = ids[t * top_k + j];
            float *h = ws + ((long)t * top_k + j) * inter;
            if (e < 0 || e >= n_experts)
                continue;
            gemv_ref(gu, gate_up, e, x + (long)t * hidden, 1);
            for (int i = 0; i < inter; i++)
                h[i] = gu[i] / (1.0f + expf(-gu[i])) * gu[inter + i];
            gemv_ref(y, down, e, h, 1);
            for (int i = 0; i < hidden; i++)
                o[i] += weights[t * top_k + j] * y[i];
        }
    }
    free(gu);
    free(y);
    return 0;
}

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

/* Expert by expert: the slots routed to one expert go through gemv_ref together, so each weight
 * row is decoded once per expert rather than once per slot (the per-slot sums are the same
 * operations as one slot at a time); then every token adds its slots' outputs in slot order. */
int moe_expert_ref(float *out, float *ws, const float *x, const int32_t *ids, const float *weights,
                   int n_tok, int top_k, int n_experts, const struct kweight *gate_up,
                   const struct kweight *down, int accumulate)
{
    const int hidden = down->rows, inter = down->cols;
    if (n_tok < 0 || top_k <= 0 || n_experts <= 0 || gate_up->rows != 2 * inter ||
        gate_up->cols != hidden)
        return ERR_INVAL;
    const size_t slots = (size_t)n_tok * top_k;
    int *list = xmalloc(sizeof(int) * (slots + 1));
    float *xs = xmalloc(sizeof(float) * (slots * (size_t)hidden + 1));
    float *gu = xmalloc(sizeof(float) * (slots * 2 * (size_t)inter + 1));
    float *hs = xmalloc(sizeof(float) * (slots * (size_t)inter + 1));
    float *ys = xmalloc(sizeof(float) * (slots * (size_t)hidden + 1));
    for (int e = 0; e < n_experts; e++) {
        size_t cnt = 0;
        for (size_t i = 0; i < slots; i++)
            if (ids[i] == e)
                list[cnt++] = (int)i;
        if (cnt == 0)
            continue;
        for (size_t k = 0; k < cnt; k++)
            for (int i = 0; i < hidden; i++)
                xs[k * hidden + i] = x[(size_t)(list[k] / top_k) * hidden + i];
        gemv_ref(gu, gate_up, e, xs, (int)cnt);
        for (size_t k = 0; k < cnt; k++) {
            const float *g = gu + k * 2 * (size_t)inter;
            float *h = ws + (size_t)list[k] * inter;
            for (int i = 0; i < inter; i++) {
                h[i] = g[i] / (1.0f + expf(-g[i])) * g[inter + i];
                hs[k * inter + i] = h[i];
            }
        }
        gemv_ref(xs, down, e, hs, (int)cnt); /* xs reused for the (cnt, hidden) outputs */
        for (size_t k = 0; k < cnt; k++)
            for (int i = 0; i < hidden; i++)
                ys[(size_t)list[k] * hidden + i] = xs[k * hidden + i];
    }
    for (int t = 0; t < n_tok; t++) {
        float *o = out + (long)t * hidden;
        if (!accumulate)
            for (int i = 0; i < hidden; i++)
                o[i] = 0.0f;
        for (int j = 0; j < top_k; j++) {
            const int e = ids[t * top_k + j];
            if (e < 0 || e >= n_experts)
                continue;
            const float *y = ys + ((size_t)t * top_k + j) * hidden;
            for (int i = 0; i < hidden; i++)
                o[i] += weights[t * top_k + j] * y[i];
        }
    }
    free(list);
    free(xs);
    free(gu);
    free(hs);
    free(ys);
    return 0;
}

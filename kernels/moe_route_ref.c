/* moe_route reference: softmax in double, selection by repeated scans. */
#include "moe_route.h"

#include "gemv.h"

#include <math.h>
#include <stdlib.h>

#include "common/err.h"
#include "common/xalloc.h"

int moe_route_ref(int32_t *ids, float *weights, const float *logits, int n_tok, int n_experts,
                  int top_k)
{
    double *p;
    if (n_tok < 0 || n_experts <= 0 || n_experts > MOE_ROUTE_MAX_EXPERTS || top_k <= 0 ||
        top_k > n_experts || top_k > MOE_ROUTE_MAX_TOPK)
        return ERR_INVAL;
    p = xmalloc(sizeof(double) * (size_t)n_experts);
    for (int t = 0; t < n_tok; t++) {
        const float *l = logits + (long)t * n_experts;
        double mx = -INFINITY, sum = 0, sel = 0;
        for (int e = 0; e < n_experts; e++)
            mx = l[e] > mx ? l[e] : mx;
        for (int e = 0; e < n_experts; e++) {
            p[e] = exp((double)l[e] - mx);
            sum += p[e];
        }
        for (int e = 0; e < n_experts; e++)
            p[e] /= sum;
        for (int j = 0; j < top_k; j++) {
            int best = -1;
            for (int e = 0; e < n_experts; e++)
                if (p[e] >= 0 && (best < 0 || p[e] > p[best]))
                    best = e;
            ids[(long)t * top_k + j] = best;
            weights[(long)t * top_k + j] = (float)p[best];
            sel += p[best];
            p[best] = -1.0;
        }
        for (int j = 0; j < top_k; j++)
            weights[(long)t * top_k + j] = (float)(weights[(long)t * top_k + j] / sel);
    }
    free(p);
    return 0;
}

int moe_route_shared_ref(int32_t *ids, float *weights, const float *logits, const float *sh,
                         int sh_pitch, int n_tok, int n_experts, int top_k)
{
    if (!sh || sh_pitch < 1 || n_tok < 0 || top_k <= 0 || top_k > MOE_ROUTE_MAX_TOPK)
        return ERR_INVAL;
    int32_t *id = xmalloc(sizeof(int32_t) * (size_t)top_k);
    float *w = xmalloc(sizeof(float) * (size_t)top_k);
    int rc = 0;
    for (int t = 0; t < n_tok && rc == 0; t++) {
        rc = moe_route_ref(id, w, logits + (int64_t)t * n_experts, 1, n_experts, top_k);
        for (int j = 0; j < top_k && rc == 0; j++) {
            ids[(int64_t)t * (top_k + 1) + j] = id[j];
            weights[(int64_t)t * (top_k + 1) + j] = w[j];
        }
        ids[(int64_t)t * (top_k + 1) + top_k] = n_experts;
        weights[(int64_t)t * (top_k + 1) + top_k] =
            (float)(1.0 / (1.0 + exp(-(double)sh[(int64_t)t * sh_pitch])));
    }
    free(w);
    free(id);
    return rc;
}

int moe_router_ref(int32_t *ids, float *weights, float *logits, float *sh_logits,
                   const float *x, const struct kweight *router, const struct kweight *sh_gate,
                   int n_tok, int top_k)
{
    if (!router || n_tok < 1 || (sh_gate && !sh_logits))
        return ERR_INVAL;
    const int E = router->rows;
    int rc = gemv_ref(logits, router, 0, x, n_tok);
    if (rc < 0 || !sh_gate)
        return rc < 0 ? rc : moe_route_ref(ids, weights, logits, n_tok, E, top_k);
    float *sh = xmalloc(sizeof(float) * (size_t)n_tok * (size_t)sh_gate->rows);
    rc = gemv_ref(sh, sh_gate, 0, x, n_tok);
    for (int t = 0; t < n_tok && rc == 0; t++)
        sh_logits[(int64_t)t * 2] = sh[(int64_t)t * sh_gate->rows];
    if (rc == 0)
        rc = moe_route_shared_ref(ids, weights, logits, sh_logits, 2, n_tok, E, top_k);
    free(sh);
    return rc;
}

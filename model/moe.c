/* moe: the sparse MoE block (MODEL.md §3.6): router softmax over all experts in fp32, top-k with
 * ties to the lower expert id, renormalised weights, SwiGLU experts run per expert on the tokens
 * routed to it (one product per expert and call), weighted sum accumulated in ascending expert
 * id, plus the shared expert scaled by its sigmoid scalar gate. */
#include "forward_internal.h"

#include <math.h>
#include <string.h>

void moe_route(float *logits, int n_experts, int k, int *idx, float *w, float *gap)
{
    float mx = -INFINITY;
    for (int e = 0; e < n_experts; e++)
        if (logits[e] > mx)
            mx = logits[e];
    float sum = 0.0f;
    for (int e = 0; e < n_experts; e++) {
        logits[e] = expf(logits[e] - mx);
        sum += logits[e];
    }
    for (int e = 0; e < n_experts; e++)
        logits[e] /= sum;
    float top = 0.0f;
    for (int s = 0; s < k; s++) {
        int best = -1;
        for (int e = 0; e < n_experts; e++)
            if (logits[e] >= 0.0f && (best < 0 || logits[e] > logits[best]))
                best = e;
        idx[s] = best;
        w[s] = logits[best];
        top += w[s];
        logits[best] = -1.0f;  // taken
    }
    if (gap) { /* log p_k - log p_(k+1) = logit k-th - logit (k+1)-th */
        float next = -1.0f;
        for (int e = 0; e < n_experts; e++)
            if (logits[e] > next)
                next = logits[e];
        *gap = next < 0.0f ? INFINITY : logf(w[k - 1]) - logf(next);
    }
    for (int s = 0; s < k; s++)
        w[s] /= top;
}

void forward_route_track(struct forward_ctx *fc, bool on)
{
    fc->route_track = on;
    fc->route_gap = INFINITY;
}

float forward_route_gap_take(struct forward_ctx *fc)
{
    const float g = fc->route_gap;
    fc->route_gap = INFINITY;
    return g;
}

/* hid (n, I) = silu(g) * u in place of g. */
static void swiglu(float *g, const float *u, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        g[i] = fwd_silu(g[i]) * u[i];
}

void moe_forward(struct forward_ctx *fc, const struct model_config *c, const struct moe_w *w,
                 const float *x, int n, float *out)
{
    const int E = c->n_experts, K = c->n_experts_per_tok, H = c->hidden_size;
    const int I = c->moe_inter, Is = c->shared_inter;
    fwd_matmul(fc, &w->router, x, n, fc->moe_logits);
    for (int t = 0; t < n; t++) {
        float gap;
        moe_route(fc->moe_logits + (int64_t)t * E, E, K, fc->moe_idx + t * K, fc->moe_w + t * K,
                  fc->route_track ? &gap : NULL);
        if (fc->route_track && gap < fc->route_gap)
            fc->route_gap = gap;
    }
    memset(out, 0, sizeof(float) * (size_t)n * (size_t)H);

    for (int e = 0; e < E; e++) {
        int cnt = 0;
        for (int t = 0; t < n; t++)
            for (int s = 0; s < K; s++)
                if (fc->moe_idx[t * K + s] == e) {
                    fc->moe_tok[cnt] = t;
                    fc->moe_tw[cnt] = fc->moe_w[t * K + s];
                    cnt++;
                }
        if (cnt == 0)
            continue;
        for (int i = 0; i < cnt; i++)
            memcpy(fc->moe_xg + (int64_t)i * H, x + (int64_t)fc->moe_tok[i] * H,
                   sizeof(float) * (size_t)H);
        fwd_matmul(fc, &w->gate[e], fc->moe_xg, cnt, fc->moe_g);
        fwd_matmul(fc, &w->up[e], fc->moe_xg, cnt, fc->moe_u);
        swiglu(fc->moe_g, fc->moe_u, (int64_t)cnt * I);
        fwd_matmul(fc, &w->down[e], fc->moe_g, cnt, fc->moe_d);
        for (int i = 0; i < cnt; i++) {
            float *o = out + (int64_t)fc->moe_tok[i] * H;
            const float *d = fc->moe_d + (int64_t)i * H;
            const float wt = fc->moe_tw[i];
            for (int j = 0; j < H; j++)
                o[j] += wt * d[j];
        }
    }

    if (!qweight_present(&w->sh_gate))
        return;
    fwd_matmul(fc, &w->sh_gate, x, n, fc->moe_g);
    fwd_matmul(fc, &w->sh_up, x, n, fc->moe_u);
    swiglu(fc->moe_g, fc->moe_u, (int64_t)n * Is);
    fwd_matmul(fc, &w->sh_down, fc->moe_g, n, fc->moe_d);
    fwd_matmul(fc, &w->sh_expert_gate, x, n, fc->moe_sg);
    for (int t = 0; t < n; t++) {
        const float sg = fwd_sigmoid(fc->moe_sg[t]);
        float *o = out + (int64_t)t * H;
        const float *d = fc->moe_d + (int64_t)t * H;
        for (int j = 0; j < H; j++)
            o[j] += sg * d[j];
    }
}

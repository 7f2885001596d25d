/* Pieces of the forward pass against closed forms: partial neox RoPE, the MoE router, and the
 * MoE block against a direct per-token evaluation (and its route margin, forward_route_gap_take). */
#include "forward_internal.h"

#include "common/tpool.h"
#include "test.h"
#include "testmodel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_rope(void)
{
    enum { D = 64, R = 16 };
    const float theta = 1e7f;
    float x[D], y[D], a[D], b[D];
    struct trng r = { 4 };
    for (int i = 0; i < D; i++)
        x[i] = trng_normal(&r, 1.0f);
    const int positions[] = { 0, 1, 7, 1000, 262143 };
    for (size_t pi = 0; pi < sizeof(positions) / sizeof(positions[0]); pi++) {
        const int p = positions[pi];
        memcpy(y, x, sizeof(x));
        attn_rope(y, R, theta, p);
        for (int i = R; i < D; i++)
            CHECK(y[i] == x[i]);           // pass-through dims untouched
        for (int i = 0; i < R / 2; i++) {  // pair (i, i + R/2) rotated by p * theta^(-2i/R)
            double ang = (double)p * pow((double)theta, -2.0 * i / R);
            double c = cos(ang), s = sin(ang);
            double e1 = x[i] * c - x[i + R / 2] * s, e2 = x[i + R / 2] * c + x[i] * s;
            double tol = 1e-5 + 2e-7 * p;  // fp32 angle at large p
            CHECK_NEAR(y[i], e1, tol);
            CHECK_NEAR(y[i + R / 2], e2, tol);
        }
        if (p == 0)
            CHECK(memcmp(x, y, sizeof(x)) == 0);
    }
    // relative position: <rope(q, p+d), rope(k, p)> depends on d only
    for (int i = 0; i < D; i++)
        y[i] = trng_normal(&r, 1.0f);
    double ref = 0;
    for (int p = 0; p < 40; p += 13) {
        memcpy(a, x, sizeof(x));
        memcpy(b, y, sizeof(y));
        attn_rope(a, R, theta, p + 5);
        attn_rope(b, R, theta, p);
        double d = 0;
        for (int i = 0; i < D; i++)
            d += (double)a[i] * b[i];
        if (p == 0)
            ref = d;
        CHECK_NEAR(d, ref, 1e-4);
    }
}

static void test_route(void)
{
    enum { E = 16, K = 4 };
    struct trng r = { 9 };
    for (int it = 0; it < 50; it++) {
        float lg[E], pr[E];
        int idx[K];
        float w[K];
        for (int e = 0; e < E; e++)
            lg[e] = trng_normal(&r, 2.0f);
        memcpy(pr, lg, sizeof(lg));
        float gap;
        moe_route(pr, E, K, idx, w, &gap);
        double sum = 0;
        for (int s = 0; s < K; s++) {
            sum += w[s];
            if (s)
                CHECK(w[s] <= w[s - 1]);
        }
        CHECK_NEAR(sum, 1.0, 1e-6);
        // the chosen are the K largest logits; weights are their softmax over the chosen
        double z = 0;
        for (int s = 0; s < K; s++)
            z += exp((double)lg[idx[s]]);
        for (int s = 0; s < K; s++)
            CHECK_NEAR(w[s], exp((double)lg[idx[s]]) / z, 1e-6);
        double next = -INFINITY; // the route's margin: the K-th minus the best unchosen logit
        for (int e = 0; e < E; e++) {
            int chosen = 0;
            for (int s = 0; s < K; s++)
                chosen |= idx[s] == e;
            if (!chosen)
                for (int s = 0; s < K; s++)
                    CHECK(lg[e] <= lg[idx[s]]);
            if (!chosen)
                next = fmax(next, lg[e]);
        }
        CHECK_NEAR(gap, (double)lg[idx[K - 1]] - next, 1e-5);
    }
    // exact ties go to the lower expert id
    float t[6] = { 1.0f, 3.0f, 3.0f, 0.5f, 3.0f, 2.0f };
    int idx[2];
    float w[2];
    float gap;
    moe_route(t, 6, 2, idx, w, &gap);
    CHECK_EQ_INT(idx[0], 1);
    CHECK_EQ_INT(idx[1], 2);
    CHECK_NEAR(w[0], 0.5, 1e-7);
    CHECK(gap == 0.0f); // the third 3.0 ties the second
    float all[2] = { 1.0f, 2.0f };
    moe_route(all, 2, 2, idx, w, &gap);
    CHECK(gap == INFINITY); // k == E: no expert left out
}

/* The MoE block against a direct double-precision evaluation, token by token. */
static void test_moe_block(void)
{
    struct model *m = testmodel_create("L", 11);
    const struct model_config *c = &m->cfg;
    const struct moe_w *w = &m->layers[0].moe;
    const int H = c->hidden_size, E = c->n_experts, K = c->n_experts_per_tok, I = c->moe_inter;
    enum { N = 9 };
    struct tpool *tp = tpool_create(2);
    struct forward_ctx *fc = forward_ctx_create(m, N, 16, tp);
    float *x = malloc(sizeof(float) * (size_t)(N * H));
    float *out = malloc(sizeof(float) * (size_t)(N * H));
    struct trng r = { 77 };
    for (int i = 0; i < N * H; i++)
        x[i] = trng_normal(&r, 1.0f);
    CHECK(forward_route_gap_take(fc) == INFINITY); /* tracking off: nothing recorded */
    forward_route_track(fc, true);
    moe_forward(fc, c, w, x, N, out);
    const float gap = forward_route_gap_take(fc);
    CHECK(forward_route_gap_take(fc) == INFINITY); /* the take starts over */
    double want_gap = INFINITY;                    /* k-th minus (k+1)-th router logit, min */
    double *ref = calloc((size_t)H, sizeof(double));
    double *lg = calloc((size_t)E, sizeof(double)), *hm = calloc((size_t)I, sizeof(double));
    for (int t = 0; t < N; t++) {
        const float *xt = x + t * H;
#define W(q, r_, c_) (((const float *)(q).data)[(int64_t)(r_) * (q).cols + (c_)])
        for (int e = 0; e < E; e++) {
            lg[e] = 0;
            for (int j = 0; j < H; j++)
                lg[e] += W(w->router, e, j) * xt[j];
        }
        // top-K by value (all distinct with random data)
        int sel[8] = {0};
        double pw[8], tot = 0;
        for (int s = 0; s < K; s++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                int used = 0;
                for (int u = 0; u < s; u++)
                    used |= sel[u] == e;
                if (!used && (best < 0 || lg[e] > lg[best]))
                    best = e;
            }
            sel[s] = best;
            pw[s] = exp(lg[best]);
            tot += pw[s];
        }
        double next = -INFINITY;
        for (int e = 0; e < E; e++) {
            int used = 0;
            for (int u = 0; u < K; u++)
                used |= sel[u] == e;
            if (!used)
                next = fmax(next, lg[e]);
        }
        want_gap = fmin(want_gap, lg[sel[K - 1]] - next);
        for (int j = 0; j < H; j++)
            ref[j] = 0;
        for (int s = 0; s < K; s++) {
            const int e = sel[s];
            for (int i = 0; i < I; i++) {
                double g = 0, u = 0;
                for (int j = 0; j < H; j++) {
                    g += W(w->gate[e], i, j) * xt[j];
                    u += W(w->up[e], i, j) * xt[j];
                }
                hm[i] = g / (1 + exp(-g)) * u;
            }
            for (int j = 0; j < H; j++) {
                double d = 0;
                for (int i = 0; i < I; i++)
                    d += W(w->down[e], j, i) * hm[i];
                ref[j] += pw[s] / tot * d;
            }
        }
        double sg = 0;
        for (int j = 0; j < H; j++)
            sg += W(w->sh_expert_gate, 0, j) * xt[j];
        sg = 1 / (1 + exp(-sg));
        for (int i = 0; i < c->shared_inter; i++) {
            double g = 0, u = 0;
            for (int j = 0; j < H; j++) {
                g += W(w->sh_gate, i, j) * xt[j];
                u += W(w->sh_up, i, j) * xt[j];
            }
            hm[i] = g / (1 + exp(-g)) * u;
        }
        for (int j = 0; j < H; j++) {
            double d = 0;
            for (int i = 0; i < c->shared_inter; i++)
                d += W(w->sh_down, j, i) * hm[i];
            ref[j] += sg * d;
        }
#undef W
        for (int j = 0; j < H; j++)
            CHECK_NEAR(out[t * H + j], ref[j], 1e-5 + 1e-5 * fabs(ref[j]));
    }
    CHECK(K < E && want_gap > 0.0);
    CHECK_NEAR(gap, want_gap, 1e-5 + 1e-5 * fabs(want_gap)); /* fp32 logits vs double */
    free(ref);
    free(lg);
    free(hm);
    free(x);
    free(out);
    forward_ctx_destroy(fc);
    tpool_destroy(tp);
    testmodel_destroy(m);
}

int main(void)
{
    test_rope();
    test_route();
    test_moe_block();
    return test_result();
}

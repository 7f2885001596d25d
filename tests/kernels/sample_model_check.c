/* sample_ref (kernels/sample_ref.c, the semantics of the device sampler) against model/sample.c's
 * sample_token on the same logits, history, params and seeded sample_rng: the tokens must be
 * equal except where sample_ref reports a decision within NEAR_TIE of its threshold (the two
 * differ only in rounding: fp32 exp vs double exp, weights truncated at 2^-44); the rng must be
 * advanced identically (greedy rows draw nothing). CPU only; needs tern_model + tern_kernels_ref
 * (not in the tests/kernels glob: add it where tern_model is available). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/sample.h"
#include "sample.h"
#include "test.h"

#define NEAR_TIE 1e-6

static struct sample_rng data_rng;

static float uni(float lo, float hi)
{
    return lo + (hi - lo) * (float)sample_rng_uniform(&data_rng);
}

static int irand(int n)
{
    return (int)(sample_rng_next(&data_rng) % (uint64_t)n);
}

static void fill_logits(float *l, int V, int kind)
{
    for (int i = 0; i < V; i++)
        l[i] = uni(-10, 10);
    switch (kind) {
    case 1: // peaked
        l[irand(V)] = 40.0f;
        break;
    case 2: // flat: all tied
        for (int i = 0; i < V; i++)
            l[i] = 1.5f;
        break;
    case 3: // coarse values: many ties
        for (int i = 0; i < V; i++)
            l[i] = roundf(l[i] * 0.5f);
        break;
    case 4: // some -inf (not all)
        for (int i = 0; i < V; i++)
            if (irand(3) == 0)
                l[i] = -INFINITY;
        l[irand(V)] = 0.0f;
        break;
    case 5: // near-flat small spread
        for (int i = 0; i < V; i++)
            l[i] = uni(-0.01f, 0.01f);
        break;
    default:
        break;
    }
}

static void random_params(struct sample_params *p, int V)
{
    static const float temps[] = {0.0f, 1e-4f, 0.3f, 0.7f, 1.0f, 1.0f, 1.5f};
    static const float tops[] = {1.0f, 1.0f, 0.95f, 0.8f, 0.5f, 0.1f, 1e-3f};
    static const float minps[] = {0.0f, 0.0f, 0.0f, 0.05f, 0.2f, 1.0f};
    const int topk[] = {0, 0, 1, 2, 5, 40, V, V + 3};
    sample_params_default(p);
    p->temperature = temps[irand(7)];
    p->top_p = tops[irand(7)];
    p->min_p = minps[irand(6)];
    p->top_k = topk[irand(8)];
    if (irand(2)) {
        p->repetition_penalty = irand(2) ? 1.3f : 0.8f;
        p->presence_penalty = irand(2) ? 0.5f : 0.0f;
        p->frequency_penalty = irand(2) ? 0.25f : -0.1f;
    }
}

int main(void)
{
    sample_rng_seed(&data_rng, 12345);
    static const int vocabs[] = {1, 2, 3, 17, 100, 1001, 4096, 32001};
    int near = 0, rows = 0, drawn = 0;
    for (int trial = 0; trial < 3000; trial++) {
        const int V = vocabs[irand(8)];
        float *l = malloc(sizeof(float) * (size_t)V), *lr = malloc(sizeof(float) * (size_t)V);
        int *scratch = calloc((size_t)V, sizeof(int));
        int32_t hist[64], ptok[64], pcnt[64];
        const int n_hist = irand(65);
        for (int i = 0; i < n_hist; i++)
            hist[i] = irand(8) == 0 ? V + irand(5) : irand(V < 20 ? V : 20);
        fill_logits(l, V, irand(6));
        struct sample_params p;
        random_params(&p, V);
        struct sample_ctx *sc = sample_ctx_create(V);
        struct sample_rng ra, rb;
        const uint64_t seed = sample_rng_next(&data_rng);
        sample_rng_seed(&ra, seed);
        sample_rng_seed(&rb, seed);
        const int32_t tm = sample_token(sc, &p, l, hist, n_hist, &ra);

        struct sample_row row = {
            .temperature = p.temperature,
            .top_p = p.top_p,
            .min_p = p.min_p,
            .repetition_penalty = p.repetition_penalty,
            .presence_penalty = p.presence_penalty,
            .frequency_penalty = p.frequency_penalty,
            .top_k = p.top_k,
            .pen_off = 0,
        };
        row.pen_n = sample_pen_pairs(hist, n_hist, V, scratch, ptok, pcnt);
        const int greedy = p.temperature <= 0.0f || p.top_k == 1;
        row.u = greedy ? 0.0 : sample_rng_uniform(&rb);
        drawn += !greedy;
        CHECK_EQ_INT(sample_row_check(&row), 0);
        memcpy(lr, l, sizeof(float) * (size_t)V);
        int32_t tr = -1;
        double margin = 0;
        CHECK_EQ_INT(sample_ref(&tr, NULL, lr, &row, ptok, pcnt, 1, V, &margin), 0);
        CHECK(memcmp(&ra, &rb, sizeof(ra)) == 0);
        for (int i = 0; i < V; i++)
            CHECK(scratch[i] == 0);
        if (tm != tr) {
            if (margin < NEAR_TIE) {
                near++;
                fprintf(stderr,
                        "near-tie trial=%d V=%d model=%d ref=%d margin=%.3g T=%g k=%d p=%g "
                        "minp=%g l_model=%.9g l_ref=%.9g\n",
                        trial, V, tm, tr, margin, p.temperature, p.top_k, p.top_p, p.min_p, lr[tm],
                        lr[tr]);
            } else {
                fprintf(stderr,
                        "MISMATCH trial=%d V=%d model=%d ref=%d margin=%.3g T=%g k=%d p=%g "
                        "minp=%g rp=%g u=%.17g\n",
                        trial, V, tm, tr, margin, p.temperature, p.top_k, p.top_p, p.min_p,
                        p.repetition_penalty, row.u);
                CHECK(0);
            }
        }
        rows++;
        sample_ctx_destroy(sc);
        free(l), free(lr), free(scratch);
    }
    fprintf(stderr, "sample_model_check: rows=%d drawn=%d near_ties=%d (margin < %g)\n", rows,
            drawn, near, NEAR_TIE);
    CHECK(near <= rows / 100);
    /* the deterministic exp: relative error vs exp() over the range that has weight */
    double worst = 0;
    for (int i = 0; i <= 310000; i++) {
        const float x = -31.0f * (float)i / 310000.0f;
        const double e = exp((double)x), g = sample_kexp(x);
        if (fabs(g - e) / e > worst)
            worst = fabs(g - e) / e;
    }
    fprintf(stderr, "sample_kexp: max rel err %.3g on [-31, 0]\n", worst);
    CHECK(worst < 4e-7);
    CHECK(sample_kexp(0.0f) == 1.0f && sample_kexp(-INFINITY) == 0.0f && sample_kexp(NAN) == 0.0f);
    return test_result();
}

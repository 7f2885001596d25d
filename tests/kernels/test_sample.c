/* sample: the device sampler vs sample_ref on random batches (odd V, V = 248320, ties, -inf,
 * NaN, peaked and flat rows, every parameter at its edges, penalties) and a chi-square of many
 * draws of one row against the reference distribution.
 * The device and the reference do the same fp32 operations (explicitly rounded, no FMA) and
 * exact integer weight sums, so tokens must be identical on every row, and the penalised logits
 * bit-identical; logprobs (log of a double ratio, cast to fp32) within 1e-6. Greedy rows are also
 * checked against argmax_ref on the penalised logits. (sample_ref vs model/sample.c is
 * tests/kernels/sample_model_check.c, which needs tern_model.)
 * NaN logits: the penalties leave them as they are (sample.h). Before that rule the H200 gave
 * logit_mismatch_rows 1-4 per random case (issue 18): the rows where a penalised token's logit
 * is NaN (0x7fffffff on the GPU, 0x7fc00000 here), 0/1/2/4/1/1/2 rows for the seven random
 * cases below at seed 11. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "argmax.h"
#include "common/err.h"
#include "ktest.h"
#include "sample.h"
#include "test.h"

struct batch {
    int B, V;
    float *logits;           // (B, V)
    struct sample_row *rows; // (B)
    int32_t *ptok, *pcnt;    // penalty pairs, all rows
    int npen;
};

static double rand_u(void)
{
    const uint64_t hi = ktest_u32(), lo = ktest_u32();
    return (double)(((hi << 32) | lo) >> 11) * (1.0 / 9007199254740992.0);
}

static void fill_row(float *l, int V, int kind)
{
    ktest_fill(l, (size_t)V, -10, 10);
    switch (kind) {
    case 1: // very peaked
        l[ktest_u32() % (uint32_t)V] = 45.0f;
        break;
    case 2: // flat: every logit tied
        for (int i = 0; i < V; i++)
            l[i] = 2.25f;
        break;
    case 3: // coarse: many ties
        for (int i = 0; i < V; i++)
            l[i] = roundf(l[i] * 0.5f);
        break;
    case 4: // a third -inf, plus a -0 and a +0
        for (int i = 0; i < V; i++)
            if (ktest_u32() % 3 == 0)
                l[i] = -INFINITY;
        l[ktest_u32() % (uint32_t)V] = -0.0f;
        l[ktest_u32() % (uint32_t)V] = 0.0f;
        break;
    case 5: // near-flat
        ktest_fill(l, (size_t)V, -0.01f, 0.01f);
        break;
    case 6: // all -inf: greedy fallback, token 0
        for (int i = 0; i < V; i++)
            l[i] = -INFINITY;
        break;
    case 7: // NaN sprinkled (counts as -inf)
        for (int i = 0; i < V; i++)
            if (ktest_u32() % 5 == 0)
                l[i] = NAN;
        break;
    case 8: // a +inf: greedy fallback to it
        l[ktest_u32() % (uint32_t)V] = INFINITY;
        break;
    case 9: // model-like: a few large, a long tail
        for (int i = 0; i < V; i++)
            l[i] = ktest_uniform(-8, 2) + (ktest_u32() % 1000 == 0 ? 12.0f : 0.0f);
        break;
    default:
        break;
    }
}

static void random_row(struct sample_row *r, int V)
{
    static const float temps[] = {0.0f, 1e-6f, 0.3f, 0.7f, 1.0f, 1.0f, 1.5f, 3.0f};
    static const float tops[] = {1.0f, 1.0f, 0.999f, 0.95f, 0.7f, 0.3f, 1e-3f, 2.0f};
    static const float minps[] = {0.0f, 0.0f, 0.0f, 0.01f, 0.1f, 0.5f, 1.0f};
    const int topk[] = {0, 0, -1, 1, 2, 7, 50, 1000, 1024, 2000, V - 1, V, V + 5};
    memset(r, 0, sizeof(*r));
    r->temperature = temps[ktest_u32() % 8];
    r->top_p = tops[ktest_u32() % 8];
    r->min_p = minps[ktest_u32() % 7];
    r->top_k = topk[ktest_u32() % 13];
    r->repetition_penalty = 1.0f;
    if (ktest_u32() % 2) {
        r->repetition_penalty = ktest_u32() % 2 ? 1.3f : 0.7f;
        r->presence_penalty = ktest_u32() % 2 ? 0.5f : 0.0f;
        r->frequency_penalty = ktest_u32() % 2 ? 0.25f : -0.1f;
    }
    const uint32_t e = ktest_u32() % 10;
    r->u = e == 0 ? 0.0 : e == 1 ? 1.0 - 1.0 / 9007199254740992.0 : rand_u();
}

/* Random batch; penalties from a random history per row (ids near the top of the row, some out
 * of the vocabulary), made unique by sample_pen_pairs. */
static void batch_make(struct batch *bt, int B, int V)
{
    enum { HMAX = 300 };
    bt->B = B;
    bt->V = V;
    bt->logits = malloc(sizeof(float) * (size_t)B * (size_t)V);
    bt->rows = malloc(sizeof(struct sample_row) * (size_t)B);
    bt->ptok = malloc(sizeof(int32_t) * (size_t)B * HMAX);
    bt->pcnt = malloc(sizeof(int32_t) * (size_t)B * HMAX);
    bt->npen = 0;
    int *scratch = calloc((size_t)V, sizeof(int));
    int32_t hist[HMAX];
    for (int b = 0; b < B; b++) {
        float *l = bt->logits + (size_t)b * (size_t)V;
        fill_row(l, V, (int)(ktest_u32() % 10));
        random_row(&bt->rows[b], V);
        int amax = 0;
        for (int i = 1; i < V; i++)
            if (l[i] > l[amax])
                amax = i;
        const int n = (int)(ktest_u32() % HMAX);
        for (int i = 0; i < n; i++) {
            const uint32_t c = ktest_u32() % 8;
            hist[i] = c == 0   ? V + (int)(ktest_u32() % 4)
                      : c == 1 ? -1 - (int)(ktest_u32() % 3)
                      : c < 4  ? amax
                               : (int)(ktest_u32() % (uint32_t)(V < 64 ? V : 64));
        }
        bt->rows[b].pen_off = bt->npen;
        bt->rows[b].pen_n =
            sample_pen_pairs(hist, n, V, scratch, bt->ptok + bt->npen, bt->pcnt + bt->npen);
        bt->npen += bt->rows[b].pen_n;
        CHECK_EQ_INT(sample_row_check(&bt->rows[b]), 0);
    }
    free(scratch);
}

static void batch_free(struct batch *bt)
{
    free(bt->logits), free(bt->rows), free(bt->ptok), free(bt->pcnt);
}

/* Run one batch on both sides; tokens_out (optional, B) gets the device tokens. Returns the
 * number of token mismatches. */
static int batch_check(const char *what, const struct batch *bt, int32_t *tokens_out)
{
    const int B = bt->B, V = bt->V;
    const size_t n = (size_t)B * (size_t)V;
    float *lref = malloc(n * 4), *lgot = malloc(n * 4), *pref = malloc((size_t)B * 4),
          *pgot = malloc((size_t)B * 4);
    int32_t *tref = malloc((size_t)B * 4), *tgot = malloc((size_t)B * 4),
            *targ = malloc((size_t)B * 4);
    double *margin = malloc((size_t)B * 8);
    memcpy(lref, bt->logits, n * 4);
    CHECK_EQ_INT(sample_ref(tref, pref, lref, bt->rows, bt->ptok, bt->pcnt, B, V, margin), 0);

    float *dl = ktest_dev_from(bt->logits, n * 4);
    struct sample_row *dr = ktest_dev_from(bt->rows, sizeof(struct sample_row) * (size_t)B);
    int32_t *dpt = ktest_dev_from(bt->ptok, (size_t)(bt->npen ? bt->npen : 1) * 4);
    int32_t *dpc = ktest_dev_from(bt->pcnt, (size_t)(bt->npen ? bt->npen : 1) * 4);
    int32_t *dt = (int32_t *)ktest_dev_poison((size_t)B);
    float *dp = ktest_dev_poison((size_t)B);
    CHECK_EQ_INT(sample_cuda(dt, dp, dl, dr, dpt, dpc, B, V, 0), 0);
    ktest_sync();
    ktest_to_host(tgot, dt, (size_t)B * 4);
    ktest_to_host(pgot, dp, (size_t)B * 4);
    ktest_to_host(lgot, dl, n * 4);

    int bad = 0, bad_l = 0, greedy = 0, bad_g = 0;
    double lp_err = 0;
    CHECK_EQ_INT(argmax_ref(targ, lref, B, V), 0);
    for (int b = 0; b < B; b++) {
        const struct sample_row *r = &bt->rows[b];
        if (memcmp(lgot + (size_t)b * V, lref + (size_t)b * V, (size_t)V * 4) != 0 && bad_l++ < 3)
            for (int i = 0; i < V; i++) {
                uint32_t g, e;
                memcpy(&g, lgot + (size_t)b * V + i, 4);
                memcpy(&e, lref + (size_t)b * V + i, 4);
                if (g != e) { // the first differing logit, as bits (a NaN's payload shows here)
                    fprintf(stderr, "  %s: row %d penalised logit %d got 0x%08x ref 0x%08x\n",
                            what, b, i, g, e);
                    break;
                }
            }
        if (tgot[b] != tref[b] && bad++ < 8)
            fprintf(stderr,
                    "  %s: row %d token got %d ref %d (T=%g k=%d p=%g minp=%g rp=%g pen=%d u=%.17g "
                    "margin=%.3g)\n",
                    what, b, tgot[b], tref[b], r->temperature, r->top_k, r->top_p, r->min_p,
                    r->repetition_penalty, r->pen_n, r->u, margin[b]);
        const double d = fabs((double)pgot[b] - (double)pref[b]);
        if (!(d <= 1e-6 + 1e-6 * fabs((double)pref[b]))) {
            if (lp_err < 1e30)
                fprintf(stderr, "  %s: row %d logprob got %.9g ref %.9g\n", what, b, pgot[b],
                        pref[b]);
            lp_err = 1e31;
        } else if (d > lp_err) {
            lp_err = d;
        }
        if (r->temperature <= 0.0f || r->top_k == 1) {
            greedy++;
            if (tgot[b] != targ[b] && bad_g++ < 3)
                fprintf(stderr, "  %s: row %d greedy %d vs argmax_ref %d\n", what, b, tgot[b],
                        targ[b]);
        }
        if (tokens_out)
            tokens_out[b] = tgot[b];
    }
    fprintf(stderr,
            "sample %s: B=%d V=%d greedy_rows=%d token_mismatches=%d logit_mismatch_rows=%d "
            "greedy_vs_argmax=%d logprob_max_err=%.3g %s\n",
            what, B, V, greedy, bad, bad_l, bad_g, lp_err,
            bad || bad_l || bad_g || lp_err > 1e30 ? "FAIL" : "ok");
    CHECK(bad == 0);
    CHECK(bad_l == 0);
    CHECK(bad_g == 0);
    CHECK(lp_err < 1e30);
    ktest_free(dl), ktest_free(dr), ktest_free(dpt), ktest_free(dpc), ktest_free(dt),
        ktest_free(dp);
    free(lref), free(lgot), free(pref), free(pgot), free(tref), free(tgot), free(targ),
        free(margin);
    return bad;
}

static void test_random(int B, int V)
{
    struct batch bt;
    char what[64];
    batch_make(&bt, B, V);
    snprintf(what, sizeof(what), "random");
    batch_check(what, &bt, NULL);
    batch_free(&bt);
}

/* N draws of one row (different u) on the device: each equal to the reference, and the
 * histogram against the reference probabilities (chi-square; bins with expectation < 5 pooled;
 * a token of probability 0 drawn fails outright). */
static void test_distribution(int V, int N, const struct sample_row *tmpl, int kind)
{
    struct batch bt;
    batch_make(&bt, 1, V); // one random row for its penalty pairs
    fill_row(bt.logits, V, kind);
    const int32_t pen_n = bt.rows[0].pen_n;
    struct sample_row r = *tmpl;
    r.pen_off = 0;
    r.pen_n = pen_n;
    float *one = malloc(sizeof(float) * (size_t)V);
    memcpy(one, bt.logits, sizeof(float) * (size_t)V);
    double *prob = malloc(sizeof(double) * (size_t)V);
    float *tmp = malloc(sizeof(float) * (size_t)V);
    memcpy(tmp, one, sizeof(float) * (size_t)V);
    CHECK_EQ_INT(sample_ref_probs(prob, tmp, &r, bt.ptok, bt.pcnt, V), 0);

    struct batch nb = {.B = N, .V = V, .ptok = bt.ptok, .pcnt = bt.pcnt, .npen = pen_n};
    nb.logits = malloc(sizeof(float) * (size_t)N * (size_t)V);
    nb.rows = malloc(sizeof(struct sample_row) * (size_t)N);
    for (int b = 0; b < N; b++) {
        memcpy(nb.logits + (size_t)b * V, one, sizeof(float) * (size_t)V);
        nb.rows[b] = r;
        nb.rows[b].u = rand_u();
    }
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)N);
    char what[64];
    snprintf(what, sizeof(what), "draws(T=%g k=%d p=%g minp=%g)", r.temperature, r.top_k, r.top_p,
             r.min_p);
    batch_check(what, &nb, tok);

    int *hits = calloc((size_t)V, sizeof(int));
    int impossible = 0;
    for (int b = 0; b < N; b++) {
        hits[tok[b]]++;
        impossible += prob[tok[b]] <= 0.0;
    }
    double chi2 = 0, pool_e = 0, pool_o = 0;
    int bins = 0, support = 0;
    for (int i = 0; i < V; i++) {
        const double e = prob[i] * N;
        support += prob[i] > 0;
        if (e >= 5.0) {
            chi2 += (hits[i] - e) * (hits[i] - e) / e;
            bins++;
        } else {
            pool_e += e;
            pool_o += hits[i];
        }
    }
    if (pool_e >= 5.0) {
        chi2 += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
        bins++;
    }
    const int df = bins > 1 ? bins - 1 : 1;
    const double lim = df + 6.0 * sqrt(2.0 * df) + 10.0; // far tail: p well below 1e-6
    fprintf(stderr,
            "sample chi2 V=%d N=%d support=%d bins=%d chi2=%.1f df=%d limit=%.1f "
            "impossible=%d %s\n",
            V, N, support, bins, chi2, df, lim, impossible,
            chi2 <= lim && !impossible ? "ok" : "FAIL");
    CHECK(chi2 <= lim);
    CHECK(impossible == 0);
    free(hits), free(tok), free(one), free(prob), free(tmp), free(nb.logits), free(nb.rows);
    batch_free(&bt);
}

struct timing {
    int32_t *dt;
    float *dl;
    struct sample_row *dr;
    int B, V;
};

static void timing_run(void *arg)
{
    struct timing *t = arg;
    sample_cuda(t->dt, NULL, t->dl, t->dr, NULL, NULL, t->B, t->V, 0);
}

/* Device time per call (no penalties, so repeated calls see the same logits). */
static void test_timing(int B, int V, float top_p, int top_k)
{
    float *l = malloc(sizeof(float) * (size_t)B * (size_t)V);
    struct sample_row *r = calloc((size_t)B, sizeof(*r));
    for (int b = 0; b < B; b++) {
        fill_row(l + (size_t)b * V, V, 9);
        r[b].temperature = 0.8f;
        r[b].top_p = top_p;
        r[b].top_k = top_k;
        r[b].repetition_penalty = 1.0f;
        r[b].u = rand_u();
    }
    struct timing t = {.B = B, .V = V};
    t.dl = ktest_dev_from(l, sizeof(float) * (size_t)B * (size_t)V);
    t.dr = ktest_dev_from(r, sizeof(*r) * (size_t)B);
    t.dt = ktest_dev_alloc(sizeof(int32_t) * (size_t)B);
    const double us = ktest_time_us(timing_run, &t, 2, 9);
    fprintf(stderr, "sample time: B=%d V=%d top_p=%g top_k=%d: %.1f us\n", B, V, top_p, top_k, us);
    ktest_free(t.dl), ktest_free(t.dr), ktest_free(t.dt);
    free(l), free(r);
}

int main(void)
{
    /* CPU: the deterministic exp is close to exp (its rounding is part of the semantics) */
    double worst = 0;
    for (int i = 0; i <= 31000; i++) {
        const float x = -31.0f * (float)i / 31000.0f;
        const double e = exp((double)x), g = sample_kexp(x);
        if (fabs(g - e) / e > worst)
            worst = fabs(g - e) / e;
    }
    fprintf(stderr, "sample_kexp: max rel err %.3g on [-31, 0]\n", worst);
    CHECK(worst < 4e-7);

    ktest_require_gpu();
    ktest_seed(11);
    /* KTEST_SMALL (tests/gpu/run.sh sets it for racecheck): the random batches only, which take
     * every path of the kernel; the draw statistics (tens of thousands of rows) and the timing
     * rows are left out, their kernels the same */
    const bool small = getenv("KTEST_SMALL") != NULL;
    test_random(3, 1);
    test_random(37, 2);
    test_random(64, 7);
    test_random(96, 1001);
    test_random(33, 4099);
    test_random(40, 65537);
    test_random(24, 248320);

    if (small) {
        ktest_sync();
        return test_result();
    }
    struct sample_row r = {.temperature = 0.8f,
                           .top_p = 0.9f,
                           .min_p = 0.02f,
                           .repetition_penalty = 1.2f,
                           .presence_penalty = 0.3f};
    test_distribution(1001, 16384, &r, 0);
    r = (struct sample_row){
        .temperature = 1.2f, .top_k = 30, .top_p = 1.0f, .repetition_penalty = 1.0f};
    test_distribution(4099, 8192, &r, 3);
    r = (struct sample_row){.temperature = 1.0f, .top_p = 1.0f, .repetition_penalty = 1.0f};
    test_distribution(97, 8192, &r, 5);

    /* launch checks */
    int32_t *dt = ktest_dev_alloc(64);
    float *dl = ktest_dev_alloc(64);
    struct sample_row *dr = ktest_dev_alloc(sizeof(struct sample_row));
    CHECK_EQ_INT(sample_cuda(dt, NULL, dl, dr, NULL, NULL, 1, 0, 0), ERR_INVAL);
    CHECK_EQ_INT(sample_cuda(dt, NULL, dl, dr, NULL, NULL, 1, SAMPLE_MAX_VOCAB + 1, 0), ERR_INVAL);
    CHECK_EQ_INT(sample_cuda(NULL, NULL, dl, dr, NULL, NULL, 1, 8, 0), ERR_INVAL);
    CHECK_EQ_INT(sample_cuda(dt, NULL, dl, dr, NULL, NULL, 0, 8, 0), 0);
    ktest_free(dt), ktest_free(dl), ktest_free(dr);

    test_timing(1, 248320, 1.0f, 0);
    test_timing(64, 248320, 0.9f, 0);
    test_timing(64, 248320, 1.0f, 50);
    test_timing(256, 248320, 0.95f, 40);
    ktest_sync();
    return test_result();
}

/* Sampler: greedy, reproducibility, top-k = 1, the temperature-1 distribution against softmax
 * (chi-square), top-k / top-p / min-p supports, penalties, parameter errors. */
#include "model/sample.h"

#include "common/err.h"
#include "test.h"

#include <math.h>
#include <string.h>

enum { V = 6 };

static const float logits[V] = { 0.5f, 2.0f, -1.0f, 1.2f, 2.0f, 0.0f };

static void softmax(const float *l, int n, double t, double *p)
{
    double mx = -INFINITY, s = 0;
    for (int i = 0; i < n; i++)
        mx = fmax(mx, l[i]);
    for (int i = 0; i < n; i++)
        s += p[i] = exp((l[i] - mx) / t);
    for (int i = 0; i < n; i++)
        p[i] /= s;
}

/* chi-square statistic of n draws against probabilities p (cells with p > 0) */
static double chi2(struct sample_ctx *sc, const struct sample_params *sp, const double *p, int n,
                   uint64_t seed, int *bad)
{
    int cnt[V] = { 0 };
    struct sample_rng r;
    sample_rng_seed(&r, seed);
    *bad = 0;
    for (int i = 0; i < n; i++) {
        int32_t t = sample_token(sc, sp, logits, NULL, 0, &r);
        if (t < 0 || t >= V || p[t] == 0.0)
            (*bad)++;
        else
            cnt[t]++;
    }
    double x = 0;
    for (int i = 0; i < V; i++)
        if (p[i] > 0)
            x += (cnt[i] - n * p[i]) * (cnt[i] - n * p[i]) / (n * p[i]);
    return x;
}

/* Brute force over a large random vocabulary: full sort, top-k, top-p on the renormalised
 * top-k values, min-p; sample_probs must give the same distribution. */
static int cmp_pair(const void *a, const void *b)
{
    const double *x = a, *y = b;  // (logit, id)
    if (x[0] != y[0])
        return x[0] > y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : 1;
}

static void test_large_vocab(void)
{
    enum { N = 5000 };
    static float lg[N], probs[N];
    static double pr[N], pair[2 * N];
    struct sample_ctx *sc = sample_ctx_create(N);
    uint64_t s = 99;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        lg[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 12.0 - 6.0);
        if (i % 97 == 0)
            lg[i] = 3.0f;          // exact ties
    }
    const struct { float t; int k; float p, mp; } cases[] = {
        { 1.0f, 0, 0.9f, 0.0f }, { 0.7f, 0, 0.5f, 0.0f }, { 1.0f, 50, 1.0f, 0.0f },
        { 1.3f, 40, 0.8f, 0.0f }, { 1.0f, 0, 1.0f, 0.05f }, { 2.0f, 3000, 0.99f, 0.01f },
        { 1.0f, 60, 1.0f, 0.0f },  // k inside the tie group at 3.0
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct sample_params sp;
        sample_params_default(&sp);
        sp.temperature = cases[c].t;
        sp.top_k = cases[c].k;
        sp.top_p = cases[c].p;
        sp.min_p = cases[c].mp;
        CHECK_EQ_INT(sample_probs(sc, &sp, lg, NULL, 0, probs), 0);
        for (int i = 0; i < N; i++) {
            pair[2 * i] = lg[i];
            pair[2 * i + 1] = i;
        }
        qsort(pair, N, 2 * sizeof(double), cmp_pair);
        int n = sp.top_k > 0 ? sp.top_k : N;
        double z = 0, mx = pair[0];
        for (int i = 0; i < n; i++)
            z += exp((pair[2 * i] - mx) / sp.temperature);
        double cum = 0;
        int keep = n;
        for (int i = 0; i < n && sp.top_p < 1.0f; i++) {
            cum += exp((pair[2 * i] - mx) / sp.temperature) / z;
            if (cum >= sp.top_p) {
                keep = i + 1;
                break;
            }
        }
        for (int i = 0; i < N; i++)
            pr[i] = 0;
        double pmax = 0, tot = 0;
        for (int i = 0; i < keep; i++) {
            pr[(int)pair[2 * i + 1]] = exp((pair[2 * i] - mx) / sp.temperature) / z;
            pmax = fmax(pmax, pr[(int)pair[2 * i + 1]]);
        }
        for (int i = 0; i < N; i++) {
            if (pr[i] < sp.min_p * pmax)
                pr[i] = 0;
            tot += pr[i];
        }
        int bad = 0;
        for (int i = 0; i < N; i++)
            bad += fabs(probs[i] - pr[i] / tot) > 1e-6;
        int nz = 0;
        for (int i = 0; i < N; i++)
            nz += probs[i] > 0;
        fprintf(stderr, "large vocab case %zu: kept=%d nonzero=%d mismatches=%d\n", c, keep, nz,
                bad);
        CHECK_EQ_INT(bad, 0);
    }
    sample_ctx_destroy(sc);
}

int main(void)
{
    test_large_vocab();

    struct sample_ctx *sc = sample_ctx_create(V);
    struct sample_params sp;
    struct sample_rng r;
    sample_params_default(&sp);

    // greedy: argmax, lowest id on ties (1 and 4 tie)
    CHECK_EQ_INT(sample_argmax(logits, V), 1);
    sp.temperature = 0.0f;
    sample_rng_seed(&r, 1);
    CHECK_EQ_INT(sample_token(sc, &sp, logits, NULL, 0, &r), 1);
    // top-k = 1 at any temperature is greedy
    sample_params_default(&sp);
    sp.top_k = 1;
    sp.temperature = 5.0f;
    for (int i = 0; i < 20; i++)
        CHECK_EQ_INT(sample_token(sc, &sp, logits, NULL, 0, &r), 1);

    // same seed -> same sequence; another seed -> another one
    sample_params_default(&sp);
    int32_t a[64], b[64], c[64];
    struct sample_rng r1, r2, r3;
    sample_rng_seed(&r1, 42);
    sample_rng_seed(&r2, 42);
    sample_rng_seed(&r3, 43);
    for (int i = 0; i < 64; i++) {
        a[i] = sample_token(sc, &sp, logits, NULL, 0, &r1);
        b[i] = sample_token(sc, &sp, logits, NULL, 0, &r2);
        c[i] = sample_token(sc, &sp, logits, NULL, 0, &r3);
    }
    CHECK(memcmp(a, b, sizeof(a)) == 0);
    CHECK(memcmp(a, c, sizeof(a)) != 0);

    // temperature 1 matches softmax; 5 dof, p(chi2 > 30) ~ 1.5e-5
    double p[V];
    int bad;
    softmax(logits, V, 1.0, p);
    double x = chi2(sc, &sp, p, 20000, 7, &bad);
    fprintf(stderr, "chi2 t=1: %.2f\n", x);
    CHECK(x < 30.0);
    CHECK_EQ_INT(bad, 0);
    // temperature 0.5 matches softmax(l / 0.5)
    sp.temperature = 0.5f;
    softmax(logits, V, 0.5, p);
    x = chi2(sc, &sp, p, 20000, 8, &bad);
    fprintf(stderr, "chi2 t=0.5: %.2f\n", x);
    CHECK(x < 30.0);
    // and the uniform distribution does NOT fit (the test has power)
    double u[V];
    for (int i = 0; i < V; i++)
        u[i] = 1.0 / V;
    sp.temperature = 1.0f;
    CHECK(chi2(sc, &sp, u, 20000, 9, &bad) > 100.0);

    // top-k = 3: support {1, 4, 3}, renormalised softmax over them
    sample_params_default(&sp);
    sp.top_k = 3;
    softmax(logits, V, 1.0, p);
    double z = p[1] + p[3] + p[4];
    double pk[V] = { 0 };
    pk[1] = p[1] / z;
    pk[3] = p[3] / z;
    pk[4] = p[4] / z;
    x = chi2(sc, &sp, pk, 20000, 10, &bad);
    CHECK(x < 30.0);
    CHECK_EQ_INT(bad, 0);
    // top-p: smallest prefix of the sorted probabilities reaching p
    sample_params_default(&sp);
    sp.top_p = (float)(p[1] + p[4] + 0.01);  // needs 3 tokens (1, 4 and 3)
    float probs[V];
    CHECK_EQ_INT(sample_probs(sc, &sp, logits, NULL, 0, probs), 0);
    for (int i = 0; i < V; i++)
        CHECK_NEAR(probs[i], pk[i], 1e-6);
    sp.top_p = (float)(p[1] * 0.5);          // one token survives: the first of the tie (id 1)
    CHECK_EQ_INT(sample_probs(sc, &sp, logits, NULL, 0, probs), 0);
    CHECK_NEAR(probs[1], 1.0, 1e-6);
    // min-p: drop p < min_p * p_max
    sample_params_default(&sp);
    sp.min_p = (float)(p[3] / p[1] - 1e-3);  // keeps 1, 4, 3
    CHECK_EQ_INT(sample_probs(sc, &sp, logits, NULL, 0, probs), 0);
    for (int i = 0; i < V; i++)
        CHECK_NEAR(probs[i], pk[i], 1e-6);

    // penalties
    sample_params_default(&sp);
    sp.temperature = 0.0f;
    int32_t hist[3] = { 1, 1, 4 };
    sp.repetition_penalty = 2.0f;  // 2.0 -> 1.0 for 1 and 4; 3 (1.2) wins
    CHECK_EQ_INT(sample_token(sc, &sp, logits, hist, 3, &r), 3);
    sample_params_default(&sp);
    sp.temperature = 0.0f;
    sp.frequency_penalty = 0.1f;   // 1: 2.0 - 0.2, 4: 2.0 - 0.1 -> 4
    CHECK_EQ_INT(sample_token(sc, &sp, logits, hist, 3, &r), 4);
    sp.frequency_penalty = 0.0f;
    sp.presence_penalty = 1.0f;    // both 1.0 -> 3 (1.2)
    CHECK_EQ_INT(sample_token(sc, &sp, logits, hist, 3, &r), 3);
    int32_t neg[2] = { 2, 2 };     // negative logits are multiplied by rp
    sample_params_default(&sp);
    sp.repetition_penalty = 2.0f;
    CHECK_EQ_INT(sample_probs(sc, &sp, logits, neg, 2, probs), 0);
    float l2[V];
    memcpy(l2, logits, sizeof(l2));
    l2[2] = -2.0f;
    softmax(l2, V, 1.0, p);
    for (int i = 0; i < V; i++)
        CHECK_NEAR(probs[i], p[i], 1e-6);
    // the history counts do not leak into the next call
    sample_params_default(&sp);
    CHECK_EQ_INT(sample_probs(sc, &sp, logits, NULL, 0, probs), 0);
    softmax(logits, V, 1.0, p);
    for (int i = 0; i < V; i++)
        CHECK_NEAR(probs[i], p[i], 1e-6);

    // logit bias (before the penalties) and banned ids (min_tokens), greedy and sampled
    sample_params_default(&sp);
    sp.temperature = 0.0f;
    int32_t bias_ids[2] = { 1, 4 };
    float bias_vals[2] = { -100.0f, -0.5f };
    sp.bias_ids = bias_ids;
    sp.bias_vals = bias_vals;
    sp.n_bias = 2;                 // 1 -> -98, 4 -> 1.5: 4 still wins over 3 (1.2)
    CHECK_EQ_INT(sample_token(sc, &sp, logits, NULL, 0, &r), 4);
    bias_vals[1] = -1.0f;          // 4 -> 1.0: 3 wins
    CHECK_EQ_INT(sample_token(sc, &sp, logits, NULL, 0, &r), 3);
    int32_t out_of_vocab[1] = { V + 5 };
    float big[1] = { 100.0f };
    sp.bias_ids = out_of_vocab;    // ignored
    sp.bias_vals = big;
    sp.n_bias = 1;
    CHECK_EQ_INT(sample_token(sc, &sp, logits, NULL, 0, &r), 1);
    sample_params_default(&sp);
    uint32_t ban[2] = { 1, 4 };
    sp.ban_ids = ban;
    sp.n_ban = 2;                  // never drawn at any seed; the rest renormalised
    CHECK_EQ_INT(sample_probs(sc, &sp, logits, NULL, 0, probs), 0);
    CHECK_NEAR(probs[1], 0.0, 0);
    CHECK_NEAR(probs[4], 0.0, 0);
    double rest = 0.0;
    for (int i = 0; i < V; i++)
        rest += probs[i];
    CHECK_NEAR(rest, 1.0, 1e-5);
    for (int i = 0; i < 200; i++) {
        int32_t t = sample_token(sc, &sp, logits, NULL, 0, &r);
        CHECK(t != 1 && t != 4 && t >= 0 && t < V);
    }
    sp.temperature = 0.0f;
    CHECK_EQ_INT(sample_token(sc, &sp, logits, NULL, 0, &r), 3);
    // allow mask (constrained decoding): only ids 0 and 2 may be drawn, with a bias on top
    sample_params_default(&sp);
    uint32_t allow[1] = { (1u << 0) | (1u << 2) };
    sp.allow = allow;
    CHECK_EQ_INT(sample_probs(sc, &sp, logits, NULL, 0, probs), 0);
    CHECK_NEAR(probs[0] + probs[2], 1.0, 1e-5);
    for (int i = 0; i < 200; i++) {
        int32_t t = sample_token(sc, &sp, logits, NULL, 0, &r);
        CHECK(t == 0 || t == 2);
    }
    sp.bias_ids = bias_ids;
    sp.bias_vals = big;            // +100 on id 1, which stays masked
    sp.n_bias = 1;
    sp.temperature = 0.0f;
    CHECK(sample_token(sc, &sp, logits, NULL, 0, &r) != 1);
    sample_params_default(&sp);
    float nan_bias[1] = { NAN };
    sp.bias_ids = bias_ids;
    sp.bias_vals = nan_bias;
    sp.n_bias = 1;
    CHECK_EQ_INT(sample_token(sc, &sp, logits, NULL, 0, &r), ERR_INVAL);

    // bad parameters
    sample_params_default(&sp);
    sp.top_p = 0.0f;
    CHECK_EQ_INT(sample_token(sc, &sp, logits, NULL, 0, &r), ERR_INVAL);
    sample_params_default(&sp);
    sp.repetition_penalty = 0.0f;
    CHECK_EQ_INT(sample_token(sc, &sp, logits, NULL, 0, &r), ERR_INVAL);
    CHECK(sample_ctx_create(0) == NULL);
    sample_ctx_destroy(NULL);
    sample_ctx_destroy(sc);
    return test_result();
}

/* sample: token selection from logits (see model/sample.h). Order of operations, as in vLLM:
 * logit bias, banned ids and the allow mask, penalties, then greedy or temperature softmax, top-k,
 * top-p (on the top-k renormalised values), min-p, renormalise, draw. Truncations that need an
 * order sort a candidate prefix (see candidates()) by (logit desc, id asc), never the whole
 * vocabulary unless they must. */
#include "model/sample.h"

#include "common/err.h"
#include "common/xalloc.h"

#include <stdbool.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---- rng: xoshiro256** seeded by splitmix64 ----

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void sample_rng_seed(struct sample_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

uint64_t sample_rng_next(struct sample_rng *r)
{
    uint64_t *s = r->s;
    const uint64_t out = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

double sample_rng_uniform(struct sample_rng *r)
{
    return (double)(sample_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

// ---- params and ctx ----

void sample_params_default(struct sample_params *p)
{
    p->temperature = 1.0f;
    p->top_k = 0;
    p->top_p = 1.0f;
    p->min_p = 0.0f;
    p->repetition_penalty = 1.0f;
    p->presence_penalty = 0.0f;
    p->frequency_penalty = 0.0f;
    p->bias_ids = NULL;
    p->bias_vals = NULL;
    p->n_bias = 0;
    p->ban_ids = NULL;
    p->n_ban = 0;
    p->allow = NULL;
}

struct sample_ctx {
    int n_vocab;
    float *logit;              // (V) working logits
    double *prob;              // (V) working probabilities (0 = excluded)
    int32_t *order;            // (V) candidate ids
    int *count;                // (V) occurrences in the history (reset after use)
};

struct sample_ctx *sample_ctx_create(int n_vocab)
{
    if (n_vocab <= 0)
        return NULL;
    struct sample_ctx *sc = xcalloc(1, sizeof(*sc));
    sc->n_vocab = n_vocab;
    sc->logit = malloc(sizeof(float) * (size_t)n_vocab);
    sc->prob = malloc(sizeof(double) * (size_t)n_vocab);
    sc->order = malloc(sizeof(int32_t) * (size_t)n_vocab);
    sc->count = calloc((size_t)n_vocab, sizeof(int));
    if (!sc->logit || !sc->prob || !sc->order || !sc->count) {
        sample_ctx_destroy(sc);
        return NULL;
    }
    return sc;
}

void sample_ctx_destroy(struct sample_ctx *sc)
{
    if (!sc)
        return;
    free(sc->logit);
    free(sc->prob);
    free(sc->order);
    free(sc->count);
    free(sc);
}

int32_t sample_argmax(const float *logits, int n)
{
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (logits[i] > logits[best])
            best = i;
    return best;
}

// ---- the pipeline ----

/* logit_bias, then the banned ids and the allow mask (as vLLM's logits processors: before the
 * penalties) */
static void apply_bias(struct sample_ctx *sc, const struct sample_params *p)
{
    const int V = sc->n_vocab;
    for (int i = 0; i < p->n_bias; i++)
        if (p->bias_ids[i] >= 0 && p->bias_ids[i] < V)
            sc->logit[p->bias_ids[i]] += p->bias_vals[i];
    for (int i = 0; i < p->n_ban; i++)
        if (p->ban_ids[i] < (uint32_t)V)
            sc->logit[p->ban_ids[i]] = -INFINITY;
    if (p->allow)
        for (int i = 0; i < V; i++)
            if (!(p->allow[i >> 5] >> (i & 31) & 1))
                sc->logit[i] = -INFINITY;
}

bool sample_params_penalised(const struct sample_params *p)
{
    return p->repetition_penalty != 1.0f || p->presence_penalty != 0.0f ||
           p->frequency_penalty != 0.0f;
}

static void apply_penalties(struct sample_ctx *sc, const struct sample_params *p,
                            const int32_t *hist, int n_hist)
{
    const int V = sc->n_vocab;
    if (n_hist <= 0 || !sample_params_penalised(p))
        return;
    for (int i = 0; i < n_hist; i++)
        if (hist[i] >= 0 && hist[i] < V)
            sc->count[hist[i]]++;
    for (int i = 0; i < n_hist; i++) {
        const int32_t t = hist[i];
        if (t < 0 || t >= V || sc->count[t] == 0)
            continue;          // outside the vocabulary, or already penalised
        float l = sc->logit[t];
        if (p->repetition_penalty != 1.0f)
            l = l > 0.0f ? l / p->repetition_penalty : l * p->repetition_penalty;
        l -= p->presence_penalty;
        l -= p->frequency_penalty * (float)sc->count[t];
        sc->logit[t] = l;
        sc->count[t] = 0;
    }
}

static int cmp_desc(const void *a, const void *b, void *ctx)
{
    const float *logit = ctx;
    const int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    const float li = logit[i], lj = logit[j];
    if (li != lj)
        return li > lj ? -1 : 1;
    return i < j ? -1 : (i > j);
}

/* Candidates for top-k / top-p without sorting the whole vocabulary: C = {i : prob_i >= tau}.
 * Every token outside C has a smaller probability than every token in C, so C is a prefix of
 * the full sorted order; it is enough once it holds k tokens (top-k) or mass top_p (top-p
 * alone). tau shrinks until that holds (tau = 0 takes everything). Returns |C| in sc->order. */
static int candidates(struct sample_ctx *sc, const struct sample_params *p, double pmax)
{
    const int V = sc->n_vocab;
    const bool use_k = p->top_k > 0 && p->top_k < V;
    for (double tau = pmax * (1.0 / 16.0);; tau *= (1.0 / 16.0)) {
        if (tau < 1e-300)
            tau = 0.0;
        int n = 0;
        double mass = 0.0;
        for (int i = 0; i < V; i++)
            if (sc->prob[i] >= tau) {
                sc->order[n++] = i;
                mass += sc->prob[i];
            }
        if (tau == 0.0 || (use_k ? n >= p->top_k : mass >= (double)p->top_p))
            return n;
    }
}

/* The final distribution in sc->prob; returns the greedy token when the params are greedy,
 * else -1. */
static int32_t build(struct sample_ctx *sc, const struct sample_params *p, const float *logits,
                     const int32_t *hist, int n_hist)
{
    const int V = sc->n_vocab;
    memcpy(sc->logit, logits, sizeof(float) * (size_t)V);
    apply_bias(sc, p);
    apply_penalties(sc, p, hist, n_hist);
    if (p->temperature <= 0.0f || p->top_k == 1)
        return sample_argmax(sc->logit, V);

    // softmax(logit / T) over the whole vocabulary
    const float mx = sc->logit[sample_argmax(sc->logit, V)];
    const double inv_t = 1.0 / (double)p->temperature;
    double sum = 0.0;
    for (int i = 0; i < V; i++) {
        sc->prob[i] = exp(((double)sc->logit[i] - (double)mx) * inv_t);
        sum += sc->prob[i];
    }
    double pmax = 0.0;
    for (int i = 0; i < V; i++) {
        sc->prob[i] /= sum;
        if (sc->prob[i] > pmax)
            pmax = sc->prob[i];
    }

    if ((p->top_k > 0 && p->top_k < V) || p->top_p < 1.0f) {
        int n = candidates(sc, p, pmax);
        qsort_r(sc->order, (size_t)n, sizeof(int32_t), cmp_desc, sc->logit);
        double zk = 1.0;       // mass of the top-k set: top-p works on the renormalised values
        if (p->top_k > 0 && p->top_k < n) {
            n = p->top_k;
            zk = 0.0;
            for (int i = 0; i < n; i++)
                zk += sc->prob[sc->order[i]];
        }
        int keep = n;
        if (p->top_p < 1.0f) {
            // the shortest prefix whose mass reaches top_p (at least one token)
            double cum = 0.0;
            for (int i = 0; i < n; i++) {
                cum += sc->prob[sc->order[i]] / zk;
                if (cum >= (double)p->top_p) {
                    keep = i + 1;
                    break;
                }
            }
        }
        // keep order[0..keep) (marked negative), zero the rest
        for (int i = 0; i < keep; i++) {
            const double v = sc->prob[sc->order[i]];
            sc->prob[sc->order[i]] = -1.0 - v;  // mark
        }
        for (int i = 0; i < V; i++)
            sc->prob[i] = sc->prob[i] < 0.0 ? -1.0 - sc->prob[i] : 0.0;
        pmax = 0.0;
        for (int i = 0; i < keep; i++)
            if (sc->prob[sc->order[i]] > pmax)
                pmax = sc->prob[sc->order[i]];
    }
    if (p->min_p > 0.0f)
        for (int i = 0; i < V; i++)
            if (sc->prob[i] < (double)p->min_p * pmax)
                sc->prob[i] = 0.0;
    sum = 0.0;
    for (int i = 0; i < V; i++)
        sum += sc->prob[i];
    for (int i = 0; i < V; i++)
        sc->prob[i] /= sum;
    return -1;
}

static bool params_ok(const struct sample_params *p)
{
    if (p->n_bias < 0 || p->n_ban < 0 || (p->n_bias && (!p->bias_ids || !p->bias_vals)) ||
        (p->n_ban && !p->ban_ids))
        return false;
    for (int i = 0; i < p->n_bias; i++)
        if (!isfinite(p->bias_vals[i]))
            return false;
    return !isnan(p->temperature) && p->top_p > 0.0f && p->min_p <= 1.0f &&
           p->repetition_penalty > 0.0f && isfinite(p->presence_penalty) &&
           isfinite(p->frequency_penalty);
}

int32_t sample_token(struct sample_ctx *sc, const struct sample_params *p, const float *logits,
                     const int32_t *hist, int n_hist, struct sample_rng *rng)
{
    if (!params_ok(p))
        return ERR_INVAL;
    const int32_t g = build(sc, p, logits, hist, n_hist);
    if (g >= 0)
        return g;
    const double u = sample_rng_uniform(rng);
    double cum = 0.0;
    int32_t last = -1;
    for (int i = 0; i < sc->n_vocab; i++) {
        const double q = sc->prob[i];
        if (q <= 0.0)
            continue;
        cum += q;
        last = i;
        if (u < cum)
            return i;
    }
    return last;               // rounding left cum just below 1
}

int sample_probs(struct sample_ctx *sc, const struct sample_params *p, const float *logits,
                 const int32_t *hist, int n_hist, float *probs)
{
    if (!params_ok(p))
        return ERR_INVAL;
    const int32_t g = build(sc, p, logits, hist, n_hist);
    for (int i = 0; i < sc->n_vocab; i++)
        probs[i] = g >= 0 ? (float)(i == g) : (float)sc->prob[i];
    return 0;
}

/* Speculative decoding with sampling is lossless. (A) the acceptance rule alone: over many
 * seeded trials on fixed logits, the first emitted token is distributed as P_0 and, given that
 * draft 1 was accepted, the second as P_1 (and the bonus as P_2): Pearson goodness of fit
 * against the exact probabilities, p = 0.001 critical values (Wilson-Hilferty). (B) end to end
 * on a tiny checkpoint: the 2nd and 3rd generated tokens of many seeded runs with speculation
 * (bigram-table drafts that are often right, and MTP drafts) against plain sampling: two-sample
 * chi-square. Each part also runs a deliberately wrong rule (the recovered token drawn from P
 * without removing the rejected draft) and checks that its statistic is far above the
 * threshold, so the test can fail. */
#include "common/err.h"
#include "model/forward.h"
#include "model/model_load.h"
#include "model/spec.h"
#include "model/state.h"
#include "spec_util.h"
#include "test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define Z_001 3.09 // upper 0.001 normal quantile

/* The wrong rule: like spec_accept but the recovered token is drawn from P_{i-1} as it is
 * (the rejected draft keeps its mass). Sampling params only (no greedy branch needed here). */
static int wrong_accept(struct sample_ctx *sc, const struct sample_params *p, const float *logits,
                        int n_vocab, const int32_t *drafts, int k, const int32_t *hist, int n_hist,
                        struct sample_rng *rng, float *probs, int32_t *out)
{
    for (int i = 0; i <= k; i++) {
        if (sample_probs(sc, p, logits + (int64_t)i * n_vocab, hist, n_hist + i, probs) < 0)
            return ERR_INVAL;
        if (i < k && sample_rng_uniform(rng) < (double)probs[drafts[i]]) {
            out[i] = drafts[i];
            continue;
        }
        const double u = sample_rng_uniform(rng);
        double cum = 0.0;
        int32_t t = 0;
        for (int v = 0; v < n_vocab; v++) {
            if (probs[v] <= 0.0f)
                continue;
            cum += probs[v];
            t = v;
            if (u < cum)
                break;
        }
        out[i] = t;
        return i + 1;
    }
    return k + 1;
}

// ---- (A) the rule on fixed logits ----

enum { AV = 12, AK = 2, ATRIALS = 200000 };

static void part_a(const struct sample_params *sp, const char *name)
{
    float logits[(AK + 1) * AV], probs[AV], P[AK + 1][AV];
    struct trng_ {
        uint64_t s;
    } r = {7};
    for (int i = 0; i < (AK + 1) * AV; i++) {
        r.s = r.s * 6364136223846793005ull + 1442695040888963407ull;
        logits[i] = (float)((double)(r.s >> 11) / 9007199254740992.0 * 3.0);
    }
    struct sample_ctx *sc = sample_ctx_create(AV);
    int32_t drafts[AK];
    for (int i = 0; i <= AK; i++)
        CHECK_EQ_INT(sample_probs(sc, sp, logits + i * AV, NULL, 0, P[i]), 0);
    // draft 1: the second most likely token of P_0; draft 2: the most likely of P_1
    int best = sample_argmax(P[0], AV), second = best == 0 ? 1 : 0;
    for (int v = 0; v < AV; v++)
        if (v != best && P[0][v] > P[0][second])
            second = v;
    drafts[0] = second;
    drafts[1] = sample_argmax(P[1], AV);
    for (int wrong = 0; wrong < 2; wrong++) {
        int64_t c0[AV] = {0}, c1[AV] = {0}, c2[AV] = {0};
        struct sample_rng rng;
        sample_rng_seed(&rng, 1234 + (uint64_t)wrong);
        int32_t out[AK + 1];
        for (int t = 0; t < ATRIALS; t++) {
            int n = (wrong ? wrong_accept : spec_accept)(sc, sp, logits, AV, drafts, AK, drafts, 0,
                                                         &rng, probs, out);
            CHECK(n >= 1 && n <= AK + 1);
            if (n < 1)
                break;
            c0[out[0]]++;
            if (n >= 2)
                c1[out[1]]++;
            if (n == 3)
                c2[out[2]]++;
        }
        double p0[AV], p1[AV], p2[AV];
        for (int v = 0; v < AV; v++)
            p0[v] = P[0][v], p1[v] = P[1][v], p2[v] = P[2][v];
        int df0, df1, df2;
        const double x0 = su_chi2_gof(c0, p0, AV, &df0);
        const double x1 = su_chi2_gof(c1, p1, AV, &df1);
        const double x2 = su_chi2_gof(c2, p2, AV, &df2);
        const double k0 = su_chi2_crit(df0, Z_001), k1 = su_chi2_crit(df1, Z_001),
                     k2 = su_chi2_crit(df2, Z_001);
        fprintf(stderr,
                "rule %s %s: P0(d1)=%.3f P1(d2)=%.3f  token1 chi2=%.1f (df %d, crit %.1f)  "
                "token2|acc chi2=%.1f (df %d, crit %.1f)  bonus|acc chi2=%.1f (df %d, crit %.1f)\n",
                name, wrong ? "WRONG" : "spec_accept", P[0][drafts[0]], P[1][drafts[1]], x0, df0,
                k0, x1, df1, k1, x2, df2, k2);
        if (!wrong) {
            CHECK(x0 < k0);
            CHECK(x1 < k1);
            CHECK(x2 < k2);
        } else {
            CHECK(x0 > 10.0 * k0); // the wrong rule is caught by a wide margin
        }
    }
    sample_ctx_destroy(sc);
}

// ---- (B) end to end ----

/* 1000 runs per arm (was 2000, for sanitizer builds): the wrong rule still lands far past the
 * threshold checked below (chi2 ~100 vs 2 x 36 and ~190 vs 2 x 71 at these seeds) */
enum { NP = 6, RUNS = 1000, NGEN = 3 };

struct bigram {
    int32_t *next; // (V) most likely token after a one-token context
};

static int bigram_draft(void *user, const int32_t *seq, int n_seq, int k, int32_t *drafts)
{
    const struct bigram *b = user;
    int32_t prev = seq[n_seq - 1];
    for (int j = 0; j < k; j++)
        prev = drafts[j] = b->next[prev];
    return 0;
}

/* drafts = the target's own greedy continuation of the whole sequence (often accepted) */
struct greedy_oracle {
    const struct model *m;
    struct forward_ctx *fc;
    struct seq_state *st;
    float *lg;
};

static int greedy_draft(void *user, const int32_t *seq, int n_seq, int k, int32_t *drafts)
{
    struct greedy_oracle *g = user;
    const int V = g->m->cfg.vocab_size;
    seq_state_reset(g->st);
    int rc = forward_run(g->fc, g->m, g->st, seq, n_seq, g->lg, NULL, 0);
    for (int j = 0; rc == 0 && j < k; j++) {
        drafts[j] = sample_argmax(g->lg, V);
        if (j + 1 < k)
            rc = forward_run(g->fc, g->m, g->st, &drafts[j], 1, g->lg, NULL, 0);
    }
    return rc;
}

static int32_t *bigram_table(const struct model *m)
{
    const int V = m->cfg.vocab_size;
    int32_t *t = malloc(sizeof(int32_t) * (size_t)V);
    float *lg = malloc(sizeof(float) * (size_t)V);
    struct forward_ctx *fc = forward_ctx_create(m, 1, 2, NULL);
    struct seq_state *st = seq_state_create(m, 2);
    for (int32_t v = 0; v < V; v++) {
        seq_state_reset(st);
        CHECK_EQ_INT(forward_run(fc, m, st, &v, 1, lg, NULL, 0), 0);
        t[v] = sample_argmax(lg, V);
    }
    seq_state_destroy(st);
    forward_ctx_destroy(fc);
    free(lg);
    return t;
}

/* counts of gen[1] and gen[2] over RUNS seeded runs (seeds base..) */
static void collect(const struct model *m, const int32_t *prompt, const struct sample_params *sp,
                    const struct spec_dec_opts *o, uint64_t base, int64_t *c1, int64_t *c2,
                    struct spec_stats *sum)
{
    const int V = m->cfg.vocab_size;
    memset(c1, 0, sizeof(int64_t) * (size_t)V);
    memset(c2, 0, sizeof(int64_t) * (size_t)V);
    if (sum)
        spec_stats_reset(sum, o ? o->k : 0);
    for (int r = 0; r < RUNS; r++) {
        int32_t gen[NGEN];
        struct spec_stats s;
        int rc = o ? su_spec(m, NULL, prompt, NP, o, base + (uint64_t)r, NGEN, gen, &s)
                   : su_plain(m, NULL, prompt, NP, NP, sp, base + (uint64_t)r, NGEN, gen);
        CHECK_EQ_INT(rc, 0);
        if (rc < 0)
            return;
        c1[gen[1]]++;
        c2[gen[2]]++;
        if (sum) {
            sum->rounds += s.rounds;
            sum->drafted += s.drafted;
            sum->accepted += s.accepted;
            sum->emitted += s.emitted;
            for (int i = 0; i < s.k; i++)
                sum->accepted_at[i] += s.accepted_at[i];
        }
    }
}

static void part_b(void)
{
    char dir[1024], sub[1100];
    if (su_tmpdir(dir, sizeof(dir)) < 0) {
        CHECK(0);
        return;
    }
    snprintf(sub, sizeof(sub), "%s/m", dir);
    struct model *m = su_tiny(sub, 23, 1, "LFLF", 64);
    CHECK(m != NULL);
    if (!m) {
        su_rmdir(dir);
        return;
    }
    const int V = m->cfg.vocab_size;
    int32_t prompt[NP];
    for (int i = 0; i < NP; i++)
        prompt[i] = (int32_t)((i * 29 + 3) % V);
    struct sample_params sp;
    sample_params_default(&sp); // temperature 1
    sp.top_k = 4;
    struct bigram bg = {bigram_table(m)};
    struct greedy_oracle go = {m, forward_ctx_create(m, 32, 32, NULL), seq_state_create(m, 32),
                               malloc(sizeof(float) * (size_t)V)};
    int64_t *a1 = calloc((size_t)V, sizeof(int64_t)), *a2 = calloc((size_t)V, sizeof(int64_t));
    int64_t *b1 = calloc((size_t)V, sizeof(int64_t)), *b2 = calloc((size_t)V, sizeof(int64_t));
    collect(m, prompt, &sp, NULL, 1, a1, a2, NULL);

    struct spec_dec_opts o;
    spec_dec_opts_default(&o);
    o.sp = sp;
    o.k = 2;
    o.prefill_chunk = NP;
    const char *names[] = {"target-greedy", "bigram", "mtp", "target-greedy+WRONG"};
    const spec_draft_fn fns[] = {greedy_draft, bigram_draft, NULL, greedy_draft};
    void *users[] = {&go, &bg, NULL, &go};
    for (int arm = 0; arm < 4; arm++) {
        o.draft = fns[arm];
        o.draft_user = users[arm];
        o.accept = arm == 3 ? wrong_accept : NULL;
        struct spec_stats s;
        collect(m, prompt, &sp, &o, 100000 + 10000 * (uint64_t)arm, b1, b2, &s);
        int df1, df2;
        const double x1 = su_chi2_two(a1, b1, V, &df1), x2 = su_chi2_two(a2, b2, V, &df2);
        const double k1 = su_chi2_crit(df1, Z_001), k2 = su_chi2_crit(df2, Z_001);
        char line[512];
        spec_stats_format(&s, line, sizeof(line));
        fprintf(stderr,
                "e2e drafts=%s runs=%d: token2 chi2=%.1f (df %d, crit %.1f) token3 chi2=%.1f "
                "(df %d, crit %.1f) %s\n",
                names[arm], RUNS, x1, df1, k1, x2, df2, k2, line);
        if (arm < 3) {
            CHECK(x1 < k1);
            CHECK(x2 < k2);
        } else {
            CHECK(x1 > 2.0 * k1 && x2 > 2.0 * k2);
        }
        if (arm == 0 || arm == 1) // these drafts exercise acceptance and rejection
            CHECK(s.accepted > s.drafted / 10 && s.accepted < s.drafted);
    }
    free(a1);
    free(a2);
    free(b1);
    free(b2);
    free(bg.next);
    free(go.lg);
    seq_state_destroy(go.st);
    forward_ctx_destroy(go.fc);
    model_destroy(m);
    su_rmdir(dir);
}

int main(void)
{
    struct sample_params sp;
    sample_params_default(&sp);
    part_a(&sp, "T=1");
    sp.temperature = 0.7f;
    sp.top_k = 6;
    sp.top_p = 0.95f;
    part_a(&sp, "T=0.7,top-k=6,top-p=0.95");
    part_b();
    return test_result();
}

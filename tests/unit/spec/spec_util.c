/* spec_util: see spec_util.h. */
#include "spec_util.h"

#include "common/tpool.h"
#include "model/forward.h"
#include "model/model_load.h"
#include "model/state.h"
#include "model/tiny.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int su_tmpdir(char *buf, size_t len)
{
    const char *b = getenv("TERN_BUILD_DIR");
    snprintf(buf, len, "%s/spec-test-XXXXXX", b ? b : "/tmp");
    return mkdtemp(buf) ? 0 : -1;
}

void su_rmdir(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", dir);
}

struct model *su_load(const char *dir)
{
    struct model *m = NULL;
    char err[512] = "";
    int rc = model_load(&m, dir, NULL, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "model_load %s: %s\n", dir, err);
        return NULL;
    }
    return m;
}

struct model *su_tiny(const char *dir, uint64_t seed, int mtp, const char *layers, int vocab)
{
    struct tiny_opts o;
    tiny_opts_default(&o);
    o.seed = seed;
    o.mtp = mtp != 0;
    if (layers)
        snprintf(o.layers, sizeof(o.layers), "%s", layers);
    if (vocab > 0)
        o.vocab = vocab;
    int rc = tiny_write(&o, dir);
    if (rc < 0) {
        fprintf(stderr, "tiny_write %s: %d\n", dir, rc);
        return NULL;
    }
    return su_load(dir);
}

int su_plain(const struct model *m, struct tpool *tp, const int32_t *prompt, int np, int chunk,
             const struct sample_params *sp, uint64_t seed, int n_gen, int32_t *gen)
{
    const int V = m->cfg.vocab_size, ctx = np + n_gen + 1;
    struct forward_ctx *fc = forward_ctx_create(m, chunk, ctx, tp);
    struct seq_state *st = seq_state_create(m, ctx);
    struct sample_ctx *sc = sample_ctx_create(V);
    float *lg = malloc(sizeof(float) * (size_t)V);
    int32_t *seq = malloc(sizeof(int32_t) * (size_t)ctx);
    struct sample_rng rng;
    sample_rng_seed(&rng, seed);
    int rc = fc && st && sc && lg && seq ? 0 : -1;
    if (rc == 0)
        memcpy(seq, prompt, sizeof(int32_t) * (size_t)np);
    for (int p = 0; rc == 0 && p < np; p += chunk) {
        const int n = np - p < chunk ? np - p : chunk;
        rc = forward_run(fc, m, st, prompt + p, n, lg, NULL, 0);
    }
    for (int i = 0; rc == 0 && i < n_gen; i++) {
        const int32_t t = sample_token(sc, sp, lg, seq, np + i, &rng);
        if (t < 0) {
            rc = t;
            break;
        }
        seq[np + i] = gen[i] = t;
        if (i + 1 < n_gen)
            rc = forward_run(fc, m, st, &seq[np + i], 1, lg, NULL, 0);
    }
    free(seq);
    free(lg);
    sample_ctx_destroy(sc);
    seq_state_destroy(st);
    forward_ctx_destroy(fc);
    return rc;
}

int su_spec(const struct model *m, struct tpool *tp, const int32_t *prompt, int np,
            const struct spec_dec_opts *o, uint64_t seed, int n_gen, int32_t *gen,
            struct spec_stats *stats)
{
    const int ctx = np + n_gen + o->k + 2;
    const int chunk = o->prefill_chunk > o->k + 1 ? o->prefill_chunk : o->k + 1;
    struct forward_ctx *fc = forward_ctx_create(m, chunk, ctx, tp);
    struct seq_state *st = seq_state_create(m, ctx);
    struct spec_dec *d = fc && st ? spec_dec_create(m, fc, st, o, ctx) : NULL;
    struct sample_rng rng;
    sample_rng_seed(&rng, seed);
    int rc = d ? 0 : -1, n = 0;
    int32_t out[FORWARD_SPEC_MAX + 1];
    if (rc == 0)
        rc = spec_dec_prefill(d, prompt, np, &rng, &gen[n++]);
    while (rc == 0 && n < n_gen) {
        int r = spec_dec_step(d, &rng, out);
        if (r < 0) {
            rc = r;
            break;
        }
        for (int j = 0; j < r && n < n_gen; j++)
            gen[n++] = out[j];
    }
    if (d && stats)
        *stats = *spec_dec_stats(d);
    spec_dec_destroy(d);
    seq_state_destroy(st);
    forward_ctx_destroy(fc);
    return rc;
}

double su_chi2_gof(const int64_t *counts, const double *p, int n, int *df)
{
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        total += counts[i];
    double chi2 = 0.0, pool_e = 0.0, pool_o = 0.0;
    int cells = 0;
    for (int i = 0; i < n; i++) {
        const double e = p[i] * (double)total;
        if (e < 5.0) {
            pool_e += e;
            pool_o += (double)counts[i];
            continue;
        }
        chi2 += ((double)counts[i] - e) * ((double)counts[i] - e) / e;
        cells++;
    }
    if (pool_e > 0.0) {
        chi2 += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
        cells++;
    } else if (pool_o > 0.0) {
        chi2 = INFINITY; // observed tokens the distribution says are impossible
    }
    *df = cells - 1;
    return chi2;
}

double su_chi2_two(const int64_t *a, const int64_t *b, int n, int *df)
{
    double A = 0.0, B = 0.0;
    for (int i = 0; i < n; i++) {
        A += (double)a[i];
        B += (double)b[i];
    }
    const double ka = sqrt(B / A), kb = sqrt(A / B);
    double chi2 = 0.0, pa = 0.0, pb = 0.0;
    int cells = 0;
    for (int i = 0; i < n; i++) {
        if (a[i] + b[i] < 10) {
            pa += (double)a[i];
            pb += (double)b[i];
            continue;
        }
        const double d = ka * (double)a[i] - kb * (double)b[i];
        chi2 += d * d / (double)(a[i] + b[i]);
        cells++;
    }
    if (pa + pb > 0.0) {
        const double d = ka * pa - kb * pb;
        chi2 += d * d / (pa + pb);
        cells++;
    }
    *df = cells - 1;
    return chi2;
}

double su_chi2_crit(int df, double z)
{
    if (df < 1)
        df = 1;
    const double a = 2.0 / (9.0 * df), t = 1.0 - a + z * sqrt(a);
    return df * t * t * t;
}

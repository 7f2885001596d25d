/* MTP speculative decoding on the GPU runner (gpu_model_spec_window / _commit) on two dummy
 * models with an MTP head (seed 7): small_bf16 (head dims 128, 4 layers; its config with
 * mtp_num_hidden_layers = 1, written to a temp dir) and q_bf16's config (which declares the
 * head; GDN head dims 16: the padded path), each with eager launches and with CUDA graphs:
 *   1. drafts: the GPU's k greedy drafts after the prompt equal the CPU's (model/mtp.h over
 *      the same entries), unless the CPU's top-two margin at that draft is < 1e-3 * max|logit|;
 *   2. rollback: a window of k = 3 then commit a = 3 (accept all), 1 (some), 0 (reject all);
 *      the window's (k+1) logits rows, the logits of the next plain step after the commit and
 *      of a second window after that (pending MTP entries from the commit) are compared with
 *      the CPU forward over the same committed tokens (bf16-rounded K/V as the GPU stores them):
 *      rel_err = max|gpu - cpu| / max|cpu| <= 1e-2 per row (test_gpu_model's TOL: fast-math and
 *      accumulation order; a wrong GDN rollback or position gives errors of order 1), or a
 *      row whose CPU pass routed some token at a near-tie (ROUTE_TIE: the random router's
 *      discontinuity, not the runner's);
 *   3. greedy output with speculation (K = 1..3, 64 tokens, acceptance by argmax as the
 *      worker's rule at temperature 0) equals plain greedy decoding on the same runner; a
 *      divergence is accepted only at a near-tie of the plain run (margin < 1e-3 * max).
 * Also: a slot with an open window refuses plain steps (ERR_STATE), commit without a window is
 * ERR_STATE, and spec_k > 0 on a model without an MTP head is ERR_UNSUPPORTED.
 * fp8 K/V (KV_DTYPE_FP8: the main layers and the MTP layer store e4m3): small_bf16+mtp with
 * graphs runs part 3 only (speculative greedy == plain greedy on the same runner, near-tie at
 * TIE_FP8 = 1e-2 of max|logit|), which needs no CPU counterpart of the e4m3 storage.
 * GDN states in the pool (opts.state_in_pool: the MTP layer's K/V as sub-blocks of the same
 * arena, the rollback copying a snapshot into the sequence's chunk): both models, eager and
 * with graphs, parts 1-3.
 *   4. the upkeep after a plain step (bf16 K/V, states in slots): the MTP K/V it stores when it
 *      stops after the K/V stores (the dispatch's default, disp.mtp_upkeep_kv_only) are the
 *      bytes the whole MTP pass stores, and every upkept position is stored (the cache is
 *      filled with 0xff, a bf16 NaN, before each prefill). Part 1 cannot see a missing K/V:
 *      the dummy MTP attention moves the drafts' logits too little. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/file.h"
#include "common/kv_plan.h"
#include "common/xalloc.h"
#include "gpu_internal.h"
#include "gpu_model.h"
#include "model/dtype.h"
#include "model/forward.h"
#include "model/model_load.h"
#include "model/mtp.h"
#include "model/state.h"
#include "test.h"

#define TOL 1e-2
/* A row over TOL passes where the CPU's route of some layer had its k-th and (k+1)-th router
 * logits closer than this: the GPU's hidden states differ from the CPU's by a few 1e-3 relative
 * (the rel_err of the rows that pass), enough to pick the other expert there, and one other
 * expert moves a random-weight model's logits by 0.1-0.4 of their maximum (H200, 2026-12-02:
 * 0.197 at a route gap of 1.9e-3 logits). A wrong rollback or position errs on every row. */
#define ROUTE_TIE 1e-2
#define TIE 1e-3
#define TIE_FP8 1e-2 // e4m3: a K/V element on a rounding boundary moves one e4m3 step (6-12%)
                     // instead of one bf16 step (0.4-0.8%) when the verify pass (k+1 rows)
                     // and the plain pass (1 row) compute it a few ulps apart
#define GEN 64
#define MAX_LEN 160
#define NP 12

static int argmax_m(const float *x, int n, double *margin, double *amax)
{
    int a = 0, b = -1;
    *amax = 0.0;
    for (int i = 0; i < n; i++) {
        *amax = fmax(*amax, fabs(x[i]));
        if (x[i] > x[a])
            a = i;
    }
    for (int i = 0; i < n; i++)
        if (i != a && (b < 0 || x[i] > x[b]))
            b = i;
    *margin = b >= 0 ? (double)x[a] - x[b] : INFINITY;
    return a;
}

static int amax_of(const float *x, int n)
{
    double m, a;
    return argmax_m(x, n, &m, &a);
}

static double rel_err(const float *got, const float *ref, int V)
{
    double amax = 0.0, diff = 0.0;
    for (int v = 0; v < V; v++) {
        amax = fmax(amax, fabs(ref[v]));
        double d = fabs((double)got[v] - ref[v]);
        diff = isnan(d) ? INFINITY : fmax(diff, d);
    }
    return amax > 0 ? diff / amax : diff;
}

/* CPU logits of every position of seq (n tokens), token by token, K/V rounded to bf16; gap[t]:
 * the smallest route margin of position t's pass (forward_route_gap_take). */
static int cpu_logits(const struct model *m, const int32_t *seq, int n, float *out, float *gap)
{
    struct forward_ctx *fc = forward_ctx_create(m, 1, MAX_LEN, NULL);
    struct seq_state *st = seq_state_create(m, MAX_LEN);
    int rc = fc && st ? 0 : ERR_NOMEM;
    if (fc)
        forward_route_track(fc, true);
    for (int t = 0; t < n && rc == 0; t++) {
        rc = forward_run(fc, m, st, &seq[t], 1, out + (size_t)t * m->cfg.vocab_size, NULL, 0);
        gap[t] = forward_route_gap_take(fc);
        for (int l = 0; rc == 0 && l < st->n_layers; l++) {
            if (!st->k[l])
                continue;
            for (int i = 0; i < st->kv_width; i++) {
                float *k = st->k[l] + (size_t)t * st->kv_width + i;
                float *v = st->v[l] + (size_t)t * st->kv_width + i;
                *k = dtype_round_bf16(*k);
                *v = dtype_round_bf16(*v);
            }
        }
    }
    seq_state_destroy(st);
    forward_ctx_destroy(fc);
    return rc;
}

static void check_rows(const char *what, const struct model *m, const float *got,
                       const int32_t *seq, int n, int first, int rows)
{
    const int V = m->cfg.vocab_size;
    float *ref = xmalloc(sizeof(float) * (size_t)n * (size_t)V), gap[MAX_LEN];
    CHECK_EQ_INT(cpu_logits(m, seq, n, ref, gap), 0);
    double worst = 0.0, tie = INFINITY; // tie: the smallest route gap of a row over TOL
    bool ok = true;
    for (int r = 0; r < rows; r++) {
        const double e = rel_err(got + (size_t)r * V, ref + (size_t)(first + r) * V, V);
        worst = fmax(worst, e);
        if (e > TOL) {
            tie = fmin(tie, gap[first + r]);
            ok = ok && gap[first + r] < ROUTE_TIE;
        }
    }
    if (worst <= TOL)
        printf("part=%s rows=%d rel_err=%.3g tol=%.3g ok\n", what, rows, worst, TOL);
    else
        printf("part=%s rows=%d rel_err=%.3g tol=%.3g route_gap=%.3g %s\n", what, rows, worst,
               TOL, tie, ok ? "ok (near-tie route)" : "FAIL");
    CHECK(ok);
    free(ref);
}

/* 1: GPU drafts vs the CPU MTP over the same entries. */
static void check_drafts(const struct model *m, const int32_t *drafts, const int32_t *prompt,
                         int32_t x, int k)
{
    const int H = m->cfg.hidden_size, V = m->cfg.vocab_size;
    struct forward_ctx *fc = forward_ctx_create(m, NP, MAX_LEN, NULL);
    struct seq_state *st = seq_state_create(m, MAX_LEN);
    float *hid = xmalloc(sizeof(float) * NP * (size_t)H), *y = xmalloc(sizeof(float) * (size_t)H);
    float *lg = xmalloc(sizeof(float) * (size_t)V);
    int rc = fc && st ? forward_run(fc, m, st, prompt, NP, lg, hid, 0) : ERR_NOMEM;
    if (rc == 0)
        rc = mtp_run(fc, m, st, prompt + 1, hid, 0, NP - 1, NULL, NULL, 0);
    if (rc == 0)
        rc = mtp_run(fc, m, st, &x, hid + (size_t)(NP - 1) * H, NP - 1, 1, lg, y, 0);
    CHECK_EQ_INT(rc, 0);
    for (int j = 0; j < k && rc == 0; j++) {
        double margin, amax;
        int d = argmax_m(lg, V, &margin, &amax);
        bool ok = d == drafts[j] || margin < TIE * amax;
        printf("part=draft%d cpu=%d gpu=%d cpu_margin=%.3g %s\n", j, d, drafts[j],
               margin / amax, ok ? "ok" : "FAIL");
        CHECK(ok);
        if (d != drafts[j])
            break; // later drafts follow different tokens
        if (j + 1 < k)
            rc = mtp_run(fc, m, st, &d, y, NP - 1 + j + 1, 1, lg, y, 0);
    }
    CHECK_EQ_INT(rc, 0);
    free(hid);
    free(y);
    free(lg);
    seq_state_destroy(st);
    forward_ctx_destroy(fc);
}

/* Prefill slot 0 with the prompt; returns the greedy next token (or -1). With the states in the
 * pool, slot 0's state goes to chunk 1 (not the default chunk 0), so that a rollback that
 * addressed states by slot would write another sequence's chunk. */
static int32_t prefill(struct gpu_model *g, const int32_t *prompt)
{
    int32_t x = -1;
    const int sb = gpu_model_state_blocks(g);
    CHECK_EQ_INT(sb ? gpu_model_seq_open_state(g, 0, (uint32_t)sb) : gpu_model_seq_open(g, 0), 0);
    struct gpu_item it = { .slot = 0, .tokens = prompt, .n = NP, .pos = 0, .argmax = &x };
    CHECK_EQ_INT(gpu_model_step(g, &it, 1), 0);
    CHECK_EQ_INT(it.rc, 0);
    return x;
}

/* 2: window k = 3, commit a, then a plain step and a second window, all against the CPU. */
static void check_rollback(const struct model *m, struct gpu_model *g, const int32_t *prompt,
                           int a)
{
    const int V = m->cfg.vocab_size, k = 3;
    int32_t seq[MAX_LEN], d[GPU_SPEC_MAX], d2[GPU_SPEC_MAX];
    float *lg = xmalloc(sizeof(float) * (size_t)(k + 1) * (size_t)V);
    char what[64];
    memcpy(seq, prompt, sizeof(int32_t) * NP);
    int32_t x = prefill(g, prompt);
    CHECK_EQ_INT(gpu_model_spec_window(g, 0, NP, x, k, NULL, 0, d, lg), 0);
    if (a == k)
        check_drafts(m, d, prompt, x, k);
    seq[NP] = x;
    memcpy(seq + NP + 1, d, sizeof(int32_t) * (size_t)k);
    snprintf(what, sizeof what, "a%d-window", a);
    check_rows(what, m, lg, seq, NP + k + 1, NP, k + 1);
    /* the slot is busy until the commit */
    struct gpu_item busy = { .slot = 0, .tokens = &x, .n = 1, .pos = NP };
    CHECK_EQ_INT(gpu_model_step(g, &busy, 1), 0);
    CHECK_EQ_INT(busy.rc, ERR_STATE);
    CHECK_EQ_INT(gpu_model_spec_commit(g, 0, k + 1), ERR_STATE);
    CHECK_EQ_INT(gpu_model_spec_commit(g, 0, a), 0);
    CHECK_EQ_INT(gpu_model_seq_pos(g, 0), NP + a + 1);
    CHECK_EQ_INT(gpu_model_spec_commit(g, 0, a), ERR_STATE);
    /* a plain step with a token that differs from the rejected draft (when there is one) */
    int32_t y = a < k ? (d[a] + 1) % V : (int32_t)amax_of(lg + (size_t)k * V, V);
    int n = NP + a + 1;
    seq[n] = y;
    struct gpu_item st = { .slot = 0, .tokens = &seq[n], .n = 1, .pos = n, .logits = lg };
    CHECK_EQ_INT(gpu_model_step(g, &st, 1), 0);
    CHECK_EQ_INT(st.rc, 0);
    snprintf(what, sizeof what, "a%d-after_commit", a);
    check_rows(what, m, lg, seq, n + 1, n, 1);
    /* a second window from there (its MTP entries include the commit's pending ones) */
    int32_t x2 = (int32_t)amax_of(lg, V);
    CHECK_EQ_INT(gpu_model_spec_window(g, 0, n + 1, x2, 2, NULL, 0, d2, lg), 0);
    seq[n + 1] = x2;
    memcpy(seq + n + 2, d2, sizeof(int32_t) * 2);
    snprintf(what, sizeof what, "a%d-second_window", a);
    check_rows(what, m, lg, seq, n + 4, n + 1, 3);
    CHECK_EQ_INT(gpu_model_spec_commit(g, 0, 1), 0);
    gpu_model_seq_close(g, 0);
    free(lg);
}

/* 4: the K/V-only upkeep stores the whole pass's MTP K/V, at every upkept position. */
static void check_upkeep(struct gpu_model *g, const int32_t *prompt)
{
    struct gpu_layer *L = gpu_spec_layer(g);
    CHECK(L != NULL);
    if (!L)
        return;
    const size_t n = (size_t)gpu_model_kv_blocks(g) * (size_t)gpu_model_block_tokens(g) *
                     (size_t)g->hkv * (size_t)g->hd; /* bf16 elements of each cache */
    uint16_t *kv[2][2];
    const bool def = g->disp.mtp_upkeep_kv_only;
    for (int mode = 0; mode < 2; mode++) {
        g->disp.mtp_upkeep_kv_only = mode == 1;
        CHECK_EQ_INT(cudaMemset(L->k_cache, 0xff, n * 2), cudaSuccess);
        CHECK_EQ_INT(cudaMemset(L->v_cache, 0xff, n * 2), cudaSuccess);
        prefill(g, prompt);
        for (int c = 0; c < 2; c++) {
            kv[mode][c] = xmalloc(n * 2);
            CHECK_EQ_INT(
                cudaMemcpy(kv[mode][c], c ? L->v_cache : L->k_cache, n * 2, cudaMemcpyDeviceToHost),
                cudaSuccess);
        }
        gpu_model_seq_close(g, 0);
    }
    g->disp.mtp_upkeep_kv_only = def;
    /* the prefill's rows 0 .. NP-2 are upkept (row NP-1's entry waits for its next token) */
    const size_t want = (size_t)(NP - 1) * (size_t)g->hkv * (size_t)g->hd;
    for (int c = 0; c < 2; c++) {
        size_t stored = 0, differ = 0;
        for (size_t i = 0; i < n; i++) {
            stored += kv[1][c][i] != 0xffff;
            differ += kv[1][c][i] != kv[0][c][i];
        }
        printf("part=upkeep cache=%s kv_only_stored=%zu want=%zu differ_from_whole_pass=%zu %s\n",
               c ? "v" : "k", stored, want, differ, stored == want && !differ ? "ok" : "FAIL");
        CHECK(stored == want);
        CHECK(differ == 0);
        free(kv[0][c]);
        free(kv[1][c]);
    }
}

/* 3: greedy with speculation equals plain greedy (a divergence only where the plain run's
 * top-two margin is below tie x max|logit|). */
static void check_greedy(const struct model *m, struct gpu_model *g, const int32_t *prompt,
                         double tie)
{
    const int V = m->cfg.vocab_size;
    int32_t plain[GEN + 1], spec[GEN + GPU_SPEC_MAX + 1], d[GPU_SPEC_MAX];
    double margin[GEN + 1], amx[GEN + 1];
    float *lg = xmalloc(sizeof(float) * (size_t)(GPU_SPEC_MAX + 1) * (size_t)V);
    plain[0] = prefill(g, prompt);
    margin[0] = INFINITY;
    amx[0] = 1.0;
    for (int i = 1; i <= GEN; i++) {
        struct gpu_item it = { .slot = 0, .tokens = &plain[i - 1], .n = 1,
                               .pos = NP + i - 1, .logits = lg };
        CHECK_EQ_INT(gpu_model_step(g, &it, 1), 0);
        CHECK_EQ_INT(it.rc, 0);
        plain[i] = argmax_m(lg, V, &margin[i], &amx[i]);
    }
    gpu_model_seq_close(g, 0);
    for (int K = 1; K <= 3 && K <= gpu_model_spec_k(g); K++) {
        int n = 0, rounds = 0, accepted = 0;
        spec[n++] = prefill(g, prompt);
        while (n <= GEN) {
            const int pos = NP + n - 1; // position of spec[n-1], the token to feed
            CHECK_EQ_INT(gpu_model_spec_window(g, 0, pos, spec[n - 1], K, NULL, 0, d, lg), 0);
            int a = 0;
            while (a < K && d[a] == amax_of(lg + (size_t)a * V, V))
                a++;
            for (int i = 0; i < a; i++)
                spec[n++] = d[i];
            spec[n++] = (int32_t)amax_of(lg + (size_t)a * V, V);
            CHECK_EQ_INT(gpu_model_spec_commit(g, 0, a), 0);
            rounds++;
            accepted += a;
        }
        int first = -1;
        for (int i = 0; i <= GEN && first < 0; i++)
            if (spec[i] != plain[i])
                first = i;
        bool ok = first < 0 || margin[first] < tie * amx[first];
        printf("part=greedy K=%d tokens=%d rounds=%d accepted=%d first_diff=%d margin=%.3g %s\n", K,
               GEN, rounds, accepted, first, first < 0 ? 0.0 : margin[first] / amx[first],
               ok ? "ok" : "FAIL");
        CHECK(ok);
        gpu_model_seq_close(g, 0);
    }
    free(lg);
}

/* small_bf16's config with mtp_num_hidden_layers = 1 in a temp dir; 0 or -1. */
static int make_mtp_dir(const char *src, char *dir, size_t len)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/tests/kernels/model/small_bf16/config.json", src);
    char *txt = file_read(path, NULL);
    if (!txt)
        return -1;
    char *p = strstr(txt, "\"mtp_num_hidden_layers\": 0");
    if (!p) {
        free(txt);
        return -1;
    }
    p[strlen("\"mtp_num_hidden_layers\": ")] = '1';
    snprintf(dir, len, "/tmp/tern_gpu_spec_XXXXXX");
    int rc = mkdtemp(dir) ? 0 : -1;
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = rc == 0 ? fopen(path, "w") : NULL;
    if (!f || fputs(txt, f) < 0)
        rc = -1;
    if (f && fclose(f) != 0)
        rc = -1;
    free(txt);
    return rc;
}

static void run_spec(const char *name, const struct model *m, bool fp8, bool pool)
{
    char err[512];
    int32_t prompt[NP];
    for (int i = 0; i < NP; i++)
        prompt[i] = (int32_t)((i * 7919 + 13) % m->cfg.vocab_size);
    for (int graphs = fp8 ? 1 : 0; graphs <= 1; graphs++) {
        printf("model=%s graphs=%d kv=%s gdn_state=%s\n", name, graphs, fp8 ? "fp8" : "bf16",
               pool ? "pool" : "slots");
        struct gpu_model *g = NULL;
        struct gpu_model_opts o = {.n_slots = 2,
                                   .max_model_len = MAX_LEN,
                                   .block_tokens = 4,
                                   .graphs = graphs,
                                   .spec_k = 4,
                                   .kv_dtype = fp8 ? KV_DTYPE_FP8 : KV_DTYPE_AUTO,
                                   .state_in_pool = pool};
        int rc = gpu_model_create(&g, m, &o, err, sizeof err);
        CHECK_EQ_INT(rc, 0);
        if (rc < 0) {
            printf("gpu_model_create: %s\n", err);
            return;
        }
        gpu_model_log(g);
        CHECK_EQ_INT(gpu_model_spec_k(g), 4);
        CHECK_EQ_INT(gpu_model_kv_dtype(g), fp8 ? KV_DTYPE_FP8 : KV_DTYPE_BF16);
        CHECK_EQ_INT(gpu_model_spec_commit(g, 0, 0), ERR_STATE);
        if (!fp8) {
            check_rollback(m, g, prompt, 3);
            check_rollback(m, g, prompt, 1);
            check_rollback(m, g, prompt, 0);
        }
        check_greedy(m, g, prompt, fp8 ? TIE_FP8 : TIE);
        if (!fp8 && !pool)
            check_upkeep(g, prompt);
        gpu_model_destroy(g);
    }
}

int main(void)
{
    int ndev = 0;
    const char *src = getenv("TERN_SOURCE_DIR");
    if (!src)
        src = ".";
    char dir[256], path[300];
    CHECK_EQ_INT(make_mtp_dir(src, dir, sizeof dir), 0);
    struct model *m = NULL;
    char err[512];
    struct model_load_opts lo = { .dummy = true, .dummy_seed = 7 };
    int rc = model_load(&m, dir, &lo, err, sizeof err);
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    rmdir(dir);
    CHECK_EQ_INT(rc, 0);
    if (rc < 0) {
        printf("model_load: %s\n", err);
        return test_result();
    }
    CHECK(m->has_mtp);
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        fprintf(stderr, "SKIPPED: no CUDA device\n");
        model_destroy(m);
        return test_result() ? test_result() : 77;
    }
    run_spec("small_bf16+mtp", m, false, false);
    run_spec("small_bf16+mtp", m, true, false);
    /* the GDN states and the MTP layer's K/V in the pool (opts.state_in_pool) */
    run_spec("small_bf16+mtp", m, false, true);
    model_destroy(m);
    /* q_bf16's config declares an MTP layer (its checkpoint has none): dummy weights for it, on
     * the padded GDN path (head dims 16) */
    {
        char dq[1100];
        snprintf(dq, sizeof dq, "%s/tests/reference/fixtures/q_bf16", src);
        struct model *mq = NULL;
        CHECK_EQ_INT(model_load(&mq, dq, &lo, err, sizeof err), 0);
        if (mq) {
            CHECK(mq->has_mtp);
            if (mq->has_mtp) {
                run_spec("q_bf16-dummy+mtp", mq, false, false);
                run_spec("q_bf16-dummy+mtp", mq, false, true);
            }
            model_destroy(mq);
        }
    }
    /* no MTP head: speculation refused at create */
    {
        struct model *m0 = NULL;
        char d0[1100];
        snprintf(d0, sizeof d0, "%s/tests/kernels/model/small_bf16", src);
        CHECK_EQ_INT(model_load(&m0, d0, &lo, err, sizeof err), 0);
        struct gpu_model *g = NULL;
        struct gpu_model_opts o = { .n_slots = 1, .max_model_len = 64, .spec_k = 2 };
        if (m0)
            CHECK_EQ_INT(gpu_model_create(&g, m0, &o, err, sizeof err), ERR_UNSUPPORTED);
        gpu_model_destroy(g);
        model_destroy(m0);
    }
    return test_result();
}

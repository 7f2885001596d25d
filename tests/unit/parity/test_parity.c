/* Parity of the CPU forward pass (model/forward.h, model/mtp.h) with transformers.
 * For every fixture in tests/reference/fixtures (made by tests/reference/make_fixtures.py):
 * load the checkpoint with model_load(), prefill the prompt, compare the logits of every
 * position, run the greedy decode steps one token at a time, compare, and compare the MTP
 * logits of the prefill positions (tokens shifted by one, post-norm hidden states).
 *
 * Error measure (also in each fixture's ref.json):
 *   rel_err = max over positions t of ( max_v |ours[t][v] - ref[t][v]| / max_v |ref[t][v]| )
 * must be <= rel_tol (1e-4 for fp32 and weight-only quantized fixtures; 2e-3 for W4A4, where a
 * last-bit difference in an activation can flip one e2m1 rounding).
 * Argmax (tie-aware): at every position argmax(ours) == argmax(ref), or
 *   ref[argmax(ours)] >= max_v ref[t][v] - rel_tol * max_v |ref[t][v]|
 * (the two candidates are tied within the tolerance in the reference itself). */
#include "common/err.h"
#include "common/file.h"
#include "common/tpool.h"
#include "common/xalloc.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/model_load.h"
#include "model/mtp.h"
#include "model/state.h"
#include "test.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cmp {
    double rel_err; // max over positions
    int worst_pos;
    int argmax_bad; // positions whose argmax differs beyond a tie
};

/* Compare n_pos rows of V logits (see the file comment). */
static struct cmp compare_logits(const float *ours, const float *ref, int n_pos, int V, double tol)
{
    struct cmp c = {0.0, -1, 0};
    for (int t = 0; t < n_pos; t++) {
        const float *o = ours + (size_t)t * V, *r = ref + (size_t)t * V;
        double amax = 0.0, diff = 0.0;
        int ao = 0, ar = 0;
        for (int v = 0; v < V; v++) {
            amax = fmax(amax, fabs(r[v]));
            double d = fabs((double)o[v] - r[v]);
            diff = isnan(d) ? INFINITY : fmax(diff, d); /* fmax would drop a NaN */
            if (o[v] > o[ao])
                ao = v;
            if (r[v] > r[ar])
                ar = v;
        }
        double e = amax > 0 ? diff / amax : diff;
        if (!(e <= c.rel_err)) { /* also catches NaN */
            c.rel_err = isnan(e) ? INFINITY : e;
            c.worst_pos = t;
        }
        if (ao != ar && !(r[ao] >= r[ar] - tol * amax))
            c.argmax_bad++;
    }
    return c;
}

static int argmax_row(const float *x, int n)
{
    int a = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[a])
            a = i;
    return a;
}

// ---- fixture files ----

/* Read the float32 file named by ref.json entry `key` ({"file":..,"shape":[rows, cols]}). */
static float *read_f32(const char *dir, const cJSON *ref, const char *key, int *rows, int *cols)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(ref, key);
    if (!e)
        return NULL;
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(e, "file");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    if (!cJSON_IsString(file) || cJSON_GetArraySize(shape) != 2)
        return NULL;
    *rows = cJSON_GetArrayItem(shape, 0)->valueint;
    *cols = cJSON_GetArrayItem(shape, 1)->valueint;
    char path[8400];
    snprintf(path, sizeof(path), "%s/%s", dir, file->valuestring);
    size_t n = (size_t)*rows * (size_t)*cols;
    float *x = xmalloc(n * sizeof(float));
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(x, sizeof(float), n, f) : 0;
    if (f)
        fclose(f);
    if (got != n) {
        free(x);
        return NULL;
    }
    return x;
}

static int32_t *int_array(const cJSON *a, int *n)
{
    *n = cJSON_GetArraySize(a);
    int32_t *v = xmalloc((size_t)(*n > 0 ? *n : 1) * sizeof(int32_t));
    for (int i = 0; i < *n; i++)
        v[i] = (int32_t)cJSON_GetArrayItem(a, i)->valueint;
    return v;
}

// ---- one fixture ----

static void clear_act(struct qweight *w, int *n)
{
    if (w->act_fp4)
        (*n)++;
    w->act_fp4 = false;
}

/* Turn the W4A4 activation emulation off everywhere; returns how many weights had it on. */
static int clear_act_fp4(struct model *m)
{
    int n = 0;
    for (int i = 0; i < m->cfg.n_layers; i++) {
        struct layer_w *l = &m->layers[i];
        if (l->type == LAYER_FULL_ATTN) {
            clear_act(&l->attn.q, &n);
            clear_act(&l->attn.k, &n);
            clear_act(&l->attn.v, &n);
            clear_act(&l->attn.o, &n);
        }
        for (int e = 0; e < m->cfg.n_experts; e++) {
            clear_act(&l->moe.gate[e], &n);
            clear_act(&l->moe.up[e], &n);
            clear_act(&l->moe.down[e], &n);
        }
        clear_act(&l->moe.sh_gate, &n);
        clear_act(&l->moe.sh_up, &n);
        clear_act(&l->moe.sh_down, &n);
    }
    return n;
}

static void report(const char *name, const char *what, struct cmp c, double tol)
{
    printf("fixture=%s part=%s rel_err=%.3g worst_pos=%d argmax_bad=%d tol=%g %s\n", name, what,
           c.rel_err, c.worst_pos, c.argmax_bad, tol,
           c.rel_err <= tol && c.argmax_bad == 0 ? "ok" : "FAIL");
    CHECK(c.rel_err <= tol);
    CHECK_EQ_INT(c.argmax_bad, 0);
}

static void run_fixture(const char *root, const char *name, struct tpool *tp)
{
    char dir[8200], path[8300], err[512];
    snprintf(dir, sizeof(dir), "%s/%s", root, name);
    snprintf(path, sizeof(path), "%s/ref.json", dir);
    char *txt = file_read(path, NULL);
    CHECK(txt != NULL);
    if (!txt)
        return;
    cJSON *ref = cJSON_Parse(txt);
    free(txt);
    CHECK(ref != NULL);
    if (!ref)
        return;
    double tol = cJSON_GetObjectItemCaseSensitive(ref, "rel_tol")->valuedouble;
    int n_prompt, n_dec, n_mtp_tok = 0;
    int32_t *prompt = int_array(cJSON_GetObjectItemCaseSensitive(ref, "prompt"), &n_prompt);
    int32_t *dec_tok = int_array(cJSON_GetObjectItemCaseSensitive(ref, "decode_tokens"), &n_dec);
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(ref, "mtp_tokens");
    int32_t *mtp_tok = mt ? int_array(mt, &n_mtp_tok) : NULL;
    int pr, V, dr, dc, mr = 0, mc = 0;
    float *ref_pre = read_f32(dir, ref, "prefill", &pr, &V);
    float *ref_dec = read_f32(dir, ref, "decode", &dr, &dc);
    float *ref_mtp = mt ? read_f32(dir, ref, "mtp", &mr, &mc) : NULL;
    /* optional parts (fixtures of the second generation): a multi-token continuation on the
     * cached state, and MTP draft step 2 (tok = d1, hid = y1 after mtp.norm, position n) */
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(ref, "cont_tokens");
    int n_cont = 0, cr = 0, cc = 0, m2r = 0, m2c = 0;
    int32_t *cont_tok = ct ? int_array(ct, &n_cont) : NULL;
    float *ref_cont = ct ? read_f32(dir, ref, "cont", &cr, &cc) : NULL;
    const cJSON *m2t = cJSON_GetObjectItemCaseSensitive(ref, "mtp2_token");
    float *ref_mtp2 = m2t ? read_f32(dir, ref, "mtp2", &m2r, &m2c) : NULL;
    CHECK(!ct || (ref_cont && cr == n_cont && cc == V));
    CHECK(!m2t || (ref_mtp2 && m2r == 1 && m2c == V));
    CHECK(ref_pre && ref_dec && pr == n_prompt && dr == n_dec && dc == V);
    CHECK(!mt || (ref_mtp && mr == n_prompt && mc == V));

    struct model *m = NULL;
    int rc = model_load(&m, dir, NULL, err, sizeof(err));
    if (rc < 0)
        fprintf(stderr, "fixture=%s model_load failed: %s: %s\n", name, err_str(rc), err);
    CHECK_EQ_INT(rc, 0);
    if (rc < 0 || !ref_pre || !ref_dec || pr != n_prompt || dc != V)
        goto out;
    CHECK_EQ_INT(m->cfg.vocab_size, V);
    CHECK_EQ_INT(m->has_mtp, mt != NULL);

    int ctx_max = n_prompt + n_dec + n_cont + 1;
    int n_tok_max = n_prompt > n_cont ? n_prompt : n_cont;
    struct forward_ctx *fc = forward_ctx_create(m, n_tok_max, ctx_max, tp);
    struct seq_state *st = seq_state_create(m, ctx_max);
    CHECK(fc != NULL && st != NULL);
    if (!fc || !st)
        goto out_fc;
    int H = m->cfg.hidden_size;
    float *logits = xmalloc((size_t)n_prompt * V * sizeof(float));
    float *hidden = xmalloc((size_t)n_prompt * H * sizeof(float));
    rc = forward_run(fc, m, st, prompt, n_prompt, logits, hidden, FORWARD_LOGITS_ALL);
    CHECK_EQ_INT(rc, 0);
    if (rc == 0) {
        report(name, "prefill", compare_logits(logits, ref_pre, n_prompt, V, tol), tol);
        /* the reference's first decode token is the argmax of the last prefill position */
        int a = argmax_row(logits + (size_t)(n_prompt - 1) * V, V);
        const float *r = ref_pre + (size_t)(n_prompt - 1) * V;
        CHECK(a == dec_tok[0] || r[a] >= r[dec_tok[0]] - tol * fabs(r[dec_tok[0]]));
    }
    if (rc == 0 && mt && m->has_mtp) {
        float *ml = xmalloc((size_t)n_prompt * V * sizeof(float));
        float *y = xmalloc((size_t)n_prompt * H * sizeof(float));
        rc = mtp_run(fc, m, st, mtp_tok, hidden, 0, n_mtp_tok, ml, y, FORWARD_LOGITS_ALL);
        CHECK_EQ_INT(rc, 0);
        if (rc == 0)
            report(name, "mtp", compare_logits(ml, ref_mtp, n_prompt, V, tol), tol);
        if (rc == 0 && m2t && ref_mtp2) {
            int32_t d1 = (int32_t)m2t->valueint;
            int a = argmax_row(ml + (size_t)(n_prompt - 1) * V, V);
            const float *r = ref_mtp + (size_t)(n_prompt - 1) * V;
            CHECK(a == d1 || r[a] >= r[d1] - tol * fabs(r[d1]));
            rc = mtp_run(fc, m, st, &d1, y + (size_t)(n_prompt - 1) * H, n_prompt, 1, ml, NULL, 0);
            CHECK_EQ_INT(rc, 0);
            if (rc == 0)
                report(name, "mtp-step2", compare_logits(ml, ref_mtp2, 1, V, tol), tol);
        }
        free(y);
        free(ml);
    }
    if (rc == 0) {
        float *dl = xmalloc((size_t)n_dec * V * sizeof(float));
        for (int i = 0; i < n_dec && rc == 0; i++) {
            rc = forward_run(fc, m, st, &dec_tok[i], 1, dl + (size_t)i * V, NULL, 0);
            CHECK_EQ_INT(rc, 0);
        }
        if (rc == 0)
            report(name, "decode", compare_logits(dl, ref_dec, n_dec, V, tol), tol);
        free(dl);
    }
    if (rc == 0 && ct && ref_cont) {
        float *cl = xmalloc((size_t)n_cont * V * sizeof(float));
        rc = forward_run(fc, m, st, cont_tok, n_cont, cl, NULL, FORWARD_LOGITS_ALL);
        CHECK_EQ_INT(rc, 0);
        if (rc == 0)
            report(name, "continuation", compare_logits(cl, ref_cont, n_cont, V, tol), tol);
        free(cl);
    }
    const cJSON *w4 = cJSON_GetObjectItemCaseSensitive(ref, "w4a4");
    if (rc == 0 && cJSON_IsTrue(w4)) {
        /* sensitivity: without the activation emulation the tolerance must see the difference */
        int n_act = clear_act_fp4(m);
        CHECK(n_act > 0);
        seq_state_reset(st);
        rc = forward_run(fc, m, st, prompt, n_prompt, logits, NULL, FORWARD_LOGITS_ALL);
        CHECK_EQ_INT(rc, 0);
        struct cmp c = compare_logits(logits, ref_pre, n_prompt, V, tol);
        printf("fixture=%s part=prefill-without-w4a4 weights=%d rel_err=%.3g (must exceed %g)\n",
               name, n_act, c.rel_err, tol);
        CHECK(c.rel_err > tol);
    }
    free(logits);
    free(hidden);
out_fc:
    seq_state_destroy(st);
    forward_ctx_destroy(fc);
out:
    model_destroy(m);
    free(ref_pre);
    free(ref_dec);
    free(ref_mtp);
    free(ref_cont);
    free(ref_mtp2);
    free(cont_tok);
    free(prompt);
    free(dec_tok);
    free(mtp_tok);
    cJSON_Delete(ref);
}

// ---- the comparison itself ----

static void test_compare_self(void)
{
    enum { V = 8 };
    float ref[2 * V], ours[2 * V];
    for (int i = 0; i < 2 * V; i++)
        ref[i] = ours[i] = (float)((i * 37) % 11) - 5.0f;
    struct cmp c = compare_logits(ours, ref, 2, V, 1e-4);
    CHECK(c.rel_err == 0.0 && c.argmax_bad == 0);
    ours[V + 3] += 1e-3f; /* |ref| max is 5: rel 2e-4 > 1e-4 */
    c = compare_logits(ours, ref, 2, V, 1e-4);
    CHECK(c.rel_err > 1e-4 && c.worst_pos == 1);
    /* a near-tie that flips the argmax within tolerance is accepted, a real flip is not */
    float r2[V] = {0, 1, 2, 3.0f, 3.0f - 1e-5f, 0, 0, 0};
    float o2[V] = {0, 1, 2, 3.0f - 1e-5f, 3.0f, 0, 0, 0};
    CHECK_EQ_INT(compare_logits(o2, r2, 1, V, 1e-4).argmax_bad, 0);
    float o3[V] = {0, 1, 4.0f, 3.0f, 3.0f, 0, 0, 0};
    CHECK_EQ_INT(compare_logits(o3, r2, 1, V, 1e-4).argmax_bad, 1);
    float o4[V] = {NAN, 1, 2, 3, 3, 0, 0, 0};
    CHECK(compare_logits(o4, r2, 1, V, 1e-4).rel_err > 1.0);
}

int main(void)
{
    test_compare_self();
    const char *src = getenv("TERN_SOURCE_DIR");
    char root[4096], path[4200];
    snprintf(root, sizeof(root), "%s/tests/reference/fixtures", src ? src : ".");
    snprintf(path, sizeof(path), "%s/manifest.json", root);
    char *txt = file_read(path, NULL);
    if (!txt)
        TEST_SKIP("no tests/reference/fixtures/manifest.json");
    cJSON *man = cJSON_Parse(txt);
    free(txt);
    CHECK(man != NULL);
    const cJSON *fx = man ? cJSON_GetObjectItemCaseSensitive(man, "fixtures") : NULL;
    const cJSON *failed = man ? cJSON_GetObjectItemCaseSensitive(man, "failed") : NULL;
    CHECK(cJSON_GetArraySize(fx) > 0);
    CHECK_EQ_INT(cJSON_GetArraySize(failed), 0);
    const char *only = getenv("TERN_PARITY_ONLY"); /* optional: one fixture name */
    struct tpool *tp = tpool_create(2);
    const cJSON *it;
    cJSON_ArrayForEach(it, fx)
    {
        if (!cJSON_IsString(it) || (only && strcmp(only, it->valuestring) != 0))
            continue;
        run_fixture(root, it->valuestring, tp);
    }
    tpool_destroy(tp);
    cJSON_Delete(man);
    return test_result();
}

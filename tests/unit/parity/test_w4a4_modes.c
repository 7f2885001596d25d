/* The two W4A4 semantics of the CPU forward pass on the W4A4 fixtures (q_nvfp4: compressed-tensors,
 * q_modelopt_nvfp4: ModelOpt), prefill logits of every prompt position:
 *   - FORWARD_W4A4_WEIGHT_ONLY (what a GPU without FP4 tensor cores runs) equals, bit for bit, the
 *     default pass of the same checkpoint with every W4A4 weight replaced by its fp32
 *     dequantization (no activation quantization anywhere);
 *   - it differs from the activation-quantized default by a plausible amount: more than the
 *     fixtures' 2e-3 parity tolerance (the e2m1 rounding of the activations is what the W4A4
 *     reference contains), less than W4A4_MAX_DIFF of max|logit| (a wrong scale or a dropped
 *     product gives order 1);
 *   - on the weight-only fixture q_nvfp4a16 the flag changes nothing.
 * The distances to the activation-quantized pass and to the transformers logits are printed as
 * figures (ktest_gpu_model prints the same two for the GPU on sm_90). Measured (2026-12-01):
 * weight-only vs activation-quantized 0.0447 (q_nvfp4) and 0.0299 (q_modelopt_nvfp4), the same
 * against transformers (which quantizes activations: 3e-7 from the default pass); the H200's
 * 0.019-0.045 failures of issue 18 are this difference. */
#include "common/err.h"
#include "common/file.h"
#include "common/xalloc.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/model_load.h"
#include "model/qweight.h"
#include "model/state.h"
#include "test.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define W4A4_MIN_DIFF 2e-3 // the W4A4 fixtures' parity tolerance (ref.json rel_tol)
#define W4A4_MAX_DIFF 0.15

/* max over rows of max_v |a - b| / max_v |b| */
static double rel_err(const float *a, const float *b, int n, int V)
{
    double worst = 0.0;
    for (int t = 0; t < n; t++) {
        double amax = 0.0, d = 0.0;
        for (int v = 0; v < V; v++) {
            amax = fmax(amax, fabs(b[(size_t)t * V + v]));
            const double e = fabs((double)a[(size_t)t * V + v] - b[(size_t)t * V + v]);
            d = isnan(e) ? INFINITY : fmax(d, e);
        }
        const double r = amax > 0 ? d / amax : d;
        worst = isnan(r) || r > worst ? r : worst;
    }
    return worst;
}

/* Prefill logits of every position (n, V). */
static int prefill(const struct model *m, const int32_t *tok, int n, float *out, int flags)
{
    struct forward_ctx *fc = forward_ctx_create(m, n, n, NULL);
    struct seq_state *st = seq_state_create(m, n);
    int rc = fc && st ? forward_run(fc, m, st, tok, n, out, NULL, flags | FORWARD_LOGITS_ALL)
                      : ERR_NOMEM;
    seq_state_destroy(st);
    forward_ctx_destroy(fc);
    return rc;
}

// ---- W4A4 weights -> fp32 dequantized copies ----

struct dq {
    float *buf[4096];
    int n;
};

static void dq_one(struct qweight *w, void *ctx)
{
    struct dq *d = ctx;
    if (w->fmt != QW_NVFP4 || !w->act_fp4 || !w->data || d->n == 4096)
        return;
    float *c = xmalloc(sizeof(float) * (size_t)(w->rows * w->cols));
    for (int64_t r = 0; r < w->rows; r++)
        qweight_dequant_row(w, r, c + r * w->cols);
    d->buf[d->n++] = c;
    w->fmt = QW_F32;
    w->data = c;
    w->row_stride = w->cols;
    w->act_fp4 = false;
}

// ---- one fixture ----

static void run_fixture(const char *root, const char *name, bool w4a4)
{
    char dir[4300], path[4400], err[512];
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    snprintf(path, sizeof path, "%s/ref.json", dir);
    char *txt = file_read(path, NULL);
    cJSON *ref = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    CHECK(ref != NULL);
    if (!ref)
        return;
    const cJSON *pr = cJSON_GetObjectItemCaseSensitive(ref, "prompt");
    const int n = cJSON_GetArraySize(pr);
    int32_t *tok = xmalloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; i++)
        tok[i] = (int32_t)cJSON_GetArrayItem(pr, i)->valueint;
    struct model *m = NULL, *mdq = NULL;
    int rc = model_load(&m, dir, NULL, err, sizeof err);
    CHECK_EQ_INT(rc, 0);
    if (rc == 0) {
        rc = model_load(&mdq, dir, NULL, err, sizeof err);
        CHECK_EQ_INT(rc, 0);
    }
    if (rc < 0 || n < 1) {
        printf("fixture=%s: %s\n", name, err);
        goto out;
    }
    const int V = m->cfg.vocab_size;
    const size_t nv = (size_t)n * (size_t)V;
    float *aq = xmalloc(sizeof(float) * nv), *wo = xmalloc(sizeof(float) * nv);
    float *dql = xmalloc(sizeof(float) * nv), *tf = xmalloc(sizeof(float) * nv);
    CHECK_EQ_INT(prefill(m, tok, n, aq, 0), 0);
    CHECK_EQ_INT(prefill(m, tok, n, wo, FORWARD_W4A4_WEIGHT_ONLY), 0);
    static struct dq d;
    d.n = 0;
    model_for_each_linear(mdq, dq_one, &d); /* every W4A4 weight -> fp32 */
    const int n_dq = d.n;
    CHECK_EQ_INT(prefill(mdq, tok, n, dql, 0), 0);
    const cJSON *pf = cJSON_GetObjectItemCaseSensitive(ref, "prefill");
    const cJSON *file = pf ? cJSON_GetObjectItemCaseSensitive(pf, "file") : NULL;
    snprintf(path, sizeof path, "%s/%s", dir, cJSON_IsString(file) ? file->valuestring : "-");
    FILE *f = fopen(path, "rb");
    const bool have_tf = f && fread(tf, sizeof(float), nv, f) == nv;
    if (f)
        fclose(f);
    CHECK(have_tf);

    const double d_mode = rel_err(wo, aq, n, V), d_dq = rel_err(wo, dql, n, V);
    const bool same = memcmp(wo, dql, sizeof(float) * nv) == 0;
    printf("fixture=%s w4a4_weights=%d weight_only-vs-fp32_dequantized rel_err=%.3g bitwise=%s\n",
           name, n_dq, d_dq, same ? "yes" : "no");
    printf("fixture=%s figure weight_only-vs-act_quantized rel_err=%.3g\n", name, d_mode);
    if (have_tf)
        printf("fixture=%s figure weight_only-vs-transformers rel_err=%.3g "
               "act_quantized-vs-transformers rel_err=%.3g\n",
               name, rel_err(wo, tf, n, V), rel_err(aq, tf, n, V));
    CHECK(same);
    if (w4a4) {
        CHECK(n_dq > 0);
        CHECK(d_mode > W4A4_MIN_DIFF);
        CHECK(d_mode < W4A4_MAX_DIFF);
    } else {
        CHECK_EQ_INT(n_dq, 0);
        CHECK(memcmp(wo, aq, sizeof(float) * nv) == 0);
    }
    for (int i = 0; i < d.n; i++)
        free(d.buf[i]);
    d.n = 0;
    free(aq), free(wo), free(dql), free(tf);
out:
    model_destroy(m);
    model_destroy(mdq);
    free(tok);
    cJSON_Delete(ref);
}

int main(void)
{
    const char *src = getenv("TERN_SOURCE_DIR");
    char root[4096], path[4200];
    snprintf(root, sizeof root, "%s/tests/reference/fixtures", src ? src : ".");
    snprintf(path, sizeof path, "%s/q_nvfp4/ref.json", root);
    char *probe = file_read(path, NULL);
    if (!probe)
        TEST_SKIP("no tests/reference/fixtures/q_nvfp4");
    free(probe);
    run_fixture(root, "q_nvfp4", true);
    run_fixture(root, "q_modelopt_nvfp4", true);
    run_fixture(root, "q_nvfp4a16", false);
    return test_result();
}

/* The GPU model runner (services/worker/gpu) against the CPU forward pass (model/forward.h)
 * and the transformers logits of tests/reference/fixtures, plus two dummy-weight models with
 * real head dims (128: the unpadded GDN path, and NVFP4 W4A16 on the tensor-core path).
 *
 * Per fixture, four sequences share every step (batching, slots, block tables; each step is
 * one pass over all rows, so chunks run next to other sequences' decode rows):
 *   slot 0: prompt ++ decode_tokens ++ cont_tokens, one token per step, logits every position;
 *   slot 1: the same stream as chunks [prompt] [d0] .. [d3] [cont] (the whole prompt as ONE
 *           chunk), logits at each chunk end;
 *   slot 2: the stream reversed, starting 5 steps later, one token per step;
 *   slot 3: the same stream in irregular chunks (3, 1, 5, 2, 7, 4, ...) with all_logits: the
 *           logits of every row of every chunk (causal attention and GDN order inside a chunk).
 * Each logits row is compared as rel_err = max_v |gpu - ref| / max_v |ref| (per row, max over
 * rows), with the argmax required to agree unless the reference's own top two are within
 * 1e-2 * max|ref|:
 *   - against the CPU pass run with the GPU's storage precision (K/V rows rounded to bf16 as
 *     the paged cache stores them; fp32 checkpoint weights rounded to bf16 as uploaded):
 *     <= 1e-2. What is left is arithmetic: fast-math exp/rsqrt, accumulation order, and on the
 *     NVFP4 tensor path activations rounded to fp16 (2^-11 relative) -- ~1e-3 at most on these
 *     models, while a wrong head order, gate or scale gives errors of order 1;
 *   - against the plain CPU pass (fp32 K/V and weights) and the transformers logits (fp32):
 *     <= max(1e-2, 2 x the error the storage rounding alone causes in the CPU pass), measured
 *     on the same tokens (the tiny fp32 models amplify bf16 weight rounding to a few %).
 * W4A4 fixtures (q_nvfp4, q_modelopt_nvfp4): every CPU pass above runs the W4A4 semantics of the
 * runner's own plan (backend_plan_w4a4_weight_only(gpu_model_plan()), the data behind its
 * gpu_backend lines). Weight-only (sm_90 has no FP4 tensor cores; sm_120/121 while the runner
 * does not dispatch mma_w4a4): FORWARD_W4A4_WEIGHT_ONLY at the usual tolerances, and the
 * distances to the activation-quantized CPU pass and to transformers (which quantizes
 * activations) are printed as "figure" lines, not checked (CPU weight-only vs activation-
 * quantized: 0.045 on q_nvfp4, 0.030 on q_modelopt_nvfp4, test_w4a4_modes). A plan that
 * quantizes activations is checked against the activation-quantized pass and transformers.
 * GDN states in the K/V pool (opts.state_in_pool, "+pool"): q_bf16 and hf_b eager and with
 * graphs, q_bf16 with fp8 K/V, at the same tolerances (the layout moves no arithmetic); and
 * hf_b's 64 short sequences on a pool of exactly their states and blocks (many_pool): the same
 * tokens and logits, bit for bit, as with states in slots.
 * The runner launches eagerly by default; q_bf16, hf_b and small_nvfp4 run again replaying
 * CUDA graphs ("+graphs").
 * fp8 K/V (opts.kv_dtype = KV_DTYPE_FP8, e4m3 with scale 1 as vLLM's --kv-cache-dtype fp8):
 * q_bf16 once more, eager and with graphs ("+fp8kv"), the CPU pass storing K/V rows as e4m3
 * instead of bf16, at TOL_FP8 = 2e-2 instead of TOL: on top of the arithmetic, a K/V element
 * whose GPU and CPU values straddle an e4m3 rounding boundary lands one e4m3 step (6-12%) apart,
 * against 0.4-0.8% for bf16. Measured on the CPU (q_bf16, hf_b): relative noise of 1e-3 on K/V
 * before the e4m3 rounding moves the logits by <= 1.7e-3 of max|logit|, while e4m3 storage as a
 * whole costs 5e-3 (q_bf16) .. 1.1e-2 (hf_b) against bf16; a wrong scale, byte layout or dtype
 * path gives errors of order 1. Its greedy check accepts a divergence at a CPU margin below
 * 2e-2 of max|logit| (the CPU runs fp32 K/V; e4m3 storage moves two logits apart by up to twice
 * its cost, 2 x 5e-3 on q_bf16: 2x headroom);
 * likewise its comparisons against fp32 K/V (CPU, transformers) let the argmax differ where the
 * reference's top two are within that comparison's tolerance (e4m3 storage alone moves two
 * logits apart by up to 2 x 5e-3 of max|logit| on q_bf16, the edge of TOL).
 * Then greedy generation of 64 tokens after the prompt (argmax on the device) must equal the
 * CPU's greedy tokens; a divergence is accepted only on a near-tie, where the CPU's top-two
 * margin at that step is below 1e-3 * max|logit| (bf16 fixtures) or 1e-2 (quantized ones).
 * A fixture whose shapes the kernels cannot take (NVFP4 with hidden 48: cols % 32) is reported
 * as skipped by name; the bf16 fixtures may not be skipped. */
#include <cjson/cJSON.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/file.h"
#include "common/kv_plan.h"
#include "common/xalloc.h"
#include "gpu_model.h"
#include "model/backend.h"
#include "model/forward.h"
#include "model/dtype.h"
#include "model/model_load.h"
#include "model/state.h"
#include "test.h"

#define TOL 1e-2
#define TOL_FP8 2e-2
/* "+gemm" (the many-row paths on every row, the chunked GDN recurrence on every item of the
 * main passes without snapshots): activations rounded to bf16 (2^-9 relative, 4x the
 * fp16 rounding of the NVFP4 GEMV) before every dense GEMM and grouped expert GEMM; measured
 * 1.2-1.4e-2 on the random-weight small_nvfp4 on the H200, below 1e-2 on the fixtures run so.
 * A wrong tile, chunk or scale gives errors of order 1. (The router GEMM is fp32.) */
#define TOL_GEMM 2e-2
#define GEN 64
#define MAX_LEN 160

static int graphs; /* 1: the runner replays CUDA graphs (second pass over three models) */
static int kv_fp8; /* 1: the runner stores K/V as e4m3 (KV_DTYPE_FP8), the CPU pass too */
/* 0: the default dispatch (gpu_dispatch.c: GEMV / moe_expert below the measured row thresholds,
 * tensor-core GEMMs from them, attn_prefill for items of several rows); 1: the many-row paths
 * from one row ("+gemm"); -1: the few-row paths at every row count ("+gemv") */
static int dispatch;
/* 1: dense layers and experts on the few-row kernels (GEMV, moe_expert: fp32 activations) at
 * every row count, attention as dispatched; for the random-weight small_nvfp4 (run_dummy) */
static int few_linear;
/* 1: the GDN states are blocks of the K/V pool (opts.state_in_pool: one arena, block ids times
 * the sub-blocks per block, states at a chunk stride), "+pool" */
static int pool;

/* Append the rows of ref.json entry key ({"file", "shape": [rows, V]}) to dst; rows read. */
static int read_rows(const char *dir, const cJSON *ref, const char *key, int V, float *dst)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(ref, key);
    const cJSON *file = e ? cJSON_GetObjectItemCaseSensitive(e, "file") : NULL;
    const cJSON *shape = e ? cJSON_GetObjectItemCaseSensitive(e, "shape") : NULL;
    if (!cJSON_IsString(file) || cJSON_GetArraySize(shape) != 2 ||
        cJSON_GetArrayItem(shape, 1)->valueint != V)
        return -1;
    int rows = cJSON_GetArrayItem(shape, 0)->valueint;
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, file->valuestring);
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(dst, sizeof(float), (size_t)rows * (size_t)V, f) : 0;
    if (f)
        fclose(f);
    return got == (size_t)rows * (size_t)V ? rows : -1;
}

static int append_ints(const cJSON *a, int32_t *dst)
{
    int n = cJSON_GetArraySize(a);
    for (int i = 0; i < n; i++)
        dst[i] = (int32_t)cJSON_GetArrayItem(a, i)->valueint;
    return n;
}

struct cmp {
    double rel_err;
    int worst;
    int argmax_bad;
};

/* Rows where have[t] is set. The argmax may differ where the reference's top two are within
 * tie x max|ref| (TOL; with fp8 K/V the comparison's own tolerance, see the file comment). */
static struct cmp compare_tie(const float *got, const float *ref, const bool *have, int n, int V,
                              double tie)
{
    struct cmp c = { 0.0, -1, 0 };
    for (int t = 0; t < n; t++) {
        if (!have[t])
            continue;
        const float *o = got + (size_t)t * V, *r = ref + (size_t)t * V;
        double amax = 0.0, diff = 0.0;
        int ao = 0, ar = 0;
        for (int v = 0; v < V; v++) {
            amax = fmax(amax, fabs(r[v]));
            double d = fabs((double)o[v] - r[v]);
            diff = isnan(d) ? INFINITY : fmax(diff, d);
            if (o[v] > o[ao])
                ao = v;
            if (r[v] > r[ar])
                ar = v;
        }
        double e = amax > 0 ? diff / amax : diff;
        if (!(e <= c.rel_err)) {
            c.rel_err = isnan(e) ? INFINITY : e;
            c.worst = t;
        }
        if (ao != ar && !(r[ao] >= r[ar] - tie * amax))
            c.argmax_bad++;
    }
    return c;
}

static struct cmp compare(const float *got, const float *ref, const bool *have, int n, int V)
{
    return compare_tie(got, ref, have, n, V, TOL);
}

static void report(const char *name, const char *what, struct cmp c, double tol)
{
    bool ok = c.rel_err <= tol && c.argmax_bad == 0;
    printf("fixture=%s part=%s rel_err=%.3g worst_pos=%d argmax_bad=%d tol=%.3g %s\n", name,
           what, c.rel_err, c.worst, c.argmax_bad, tol, ok ? "ok" : "FAIL");
    CHECK(ok);
}

/* K/V storage of the CPU pass: fp32 (the CPU backend's own), or rounded as the GPU cache stores
 * it: bf16, or e4m3 with scale 1 (RNE, saturating at +-448, as kv_write's fp8 path). */
enum kv_store { STORE_F32, STORE_BF16, STORE_E4M3 };

static float store_round(float x, enum kv_store how)
{
    return how == STORE_BF16 ? dtype_round_bf16(x)
                             : how == STORE_E4M3 ? dtype_e4m3_to_f32(dtype_f32_to_e4m3(x)) : x;
}

/* CPU logits of every position of seq (n tokens), one token at a time. round_kv: round each
 * new K/V row as the GPU's cache stores it (same storage precision, CPU arithmetic). flags:
 * forward flags (FORWARD_W4A4_WEIGHT_ONLY: the runner's W4A4 semantics, see run_model). */
static int cpu_logits(const struct model *m, const int32_t *seq, int n, float *out,
                      enum kv_store round_kv, int flags)
{
    struct forward_ctx *fc = forward_ctx_create(m, 1, MAX_LEN, NULL);
    struct seq_state *st = seq_state_create(m, MAX_LEN);
    int rc = fc && st ? 0 : ERR_NOMEM;
    for (int t = 0; t < n && rc == 0; t++) {
        rc = forward_run(fc, m, st, &seq[t], 1, out + (size_t)t * m->cfg.vocab_size, NULL,
                         flags);
        for (int l = 0; round_kv != STORE_F32 && rc == 0 && l < st->n_layers; l++) {
            if (!st->k[l])
                continue;
            for (int i = 0; i < st->kv_width; i++) {
                float *k = st->k[l] + (size_t)t * st->kv_width + i;
                float *v = st->v[l] + (size_t)t * st->kv_width + i;
                *k = store_round(*k, round_kv);
                *v = store_round(*v, round_kv);
            }
        }
    }
    seq_state_destroy(st);
    forward_ctx_destroy(fc);
    return rc;
}

/* The GPU holds fp32 checkpoint weights as bf16 (the GEMVs read bf16/fp8/nvfp4). To measure
 * the arithmetic alone the CPU pass can run on the same bf16-rounded weights: every fp32
 * qweight's data is swapped for a rounded copy, and swapped back by the restore call. */
struct swap {
    struct qweight *w[4096];
    const void *orig[4096];
    float *copy[4096];
    int n;
};

static void swap_one(struct qweight *w, void *ctx)
{
    struct swap *sw = ctx;
    if (w->fmt != QW_F32 || !w->data || sw->n == 4096)
        return;
    float *c = xmalloc(sizeof(float) * (size_t)(w->rows * w->cols));
    for (int64_t r = 0; r < w->rows; r++)
        for (int64_t k = 0; k < w->cols; k++)
            c[r * w->cols + k] = dtype_round_bf16(((const float *)w->data)[r * w->row_stride + k]);
    sw->w[sw->n] = w;
    sw->orig[sw->n] = w->data;
    sw->copy[sw->n++] = c;
    w->data = c;
    w->row_stride = w->cols;
}

static void round_weights(struct model *m, struct swap *sw)
{
    sw->n = 0;
    swap_one(&m->embed, sw);
    model_for_each_linear(m, swap_one, sw);
}

static void restore_weights(struct swap *sw)
{
    for (int i = 0; i < sw->n; i++) {
        sw->w[i]->data = sw->orig[i];
        sw->w[i]->row_stride = sw->w[i]->cols; /* fp32 checkpoint tensors are contiguous */
        free(sw->copy[i]);
    }
    sw->n = 0;
}

static int argmax_margin(const float *x, int n, double *margin, double *amax)
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

/* Greedy GEN tokens after prompt on CPU and GPU (slot 0, reopened). */
static void check_greedy(const char *name, const struct model *m, struct gpu_model *g,
                         const int32_t *prompt, int n_prompt, double tie_tol, int flags)
{
    const int V = m->cfg.vocab_size;
    struct forward_ctx *fc = forward_ctx_create(m, n_prompt, MAX_LEN, NULL);
    struct seq_state *st = seq_state_create(m, MAX_LEN);
    float *lg = xmalloc(sizeof(float) * (size_t)V);
    int32_t cpu[GEN], gpu[GEN];
    double margin[GEN], amax[GEN];
    int rc = forward_run(fc, m, st, prompt, n_prompt, lg, NULL, flags);
    for (int i = 0; i < GEN && rc == 0; i++) {
        cpu[i] = argmax_margin(lg, V, &margin[i], &amax[i]);
        rc = forward_run(fc, m, st, &cpu[i], 1, lg, NULL, flags);
    }
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(gpu_model_seq_open(g, 0), 0);
    struct gpu_item it = { .slot = 0, .tokens = prompt, .n = n_prompt, .pos = 0 };
    it.argmax = &gpu[0];
    CHECK_EQ_INT(gpu_model_step(g, &it, 1), 0);
    CHECK_EQ_INT(it.rc, 0);
    for (int i = 1; i < GEN && it.rc == 0; i++) {
        struct gpu_item nx = { .slot = 0, .tokens = &gpu[i - 1], .n = 1, .pos = n_prompt + i - 1,
                               .argmax = &gpu[i] };
        CHECK_EQ_INT(gpu_model_step(g, &nx, 1), 0);
        it.rc = nx.rc;
    }
    CHECK_EQ_INT(it.rc, 0);
    int first = -1;
    for (int i = 0; i < GEN && first < 0; i++)
        if (cpu[i] != gpu[i])
            first = i;
    if (first < 0) {
        printf("fixture=%s part=greedy%d identical=yes ok\n", name, GEN);
    } else {
        bool tie = margin[first] <= tie_tol * amax[first];
        printf("fixture=%s part=greedy%d identical=no first_diff=%d cpu=%d gpu=%d "
               "cpu_margin=%.3g (%.3g of max) %s\n", name, GEN, first, cpu[first], gpu[first],
               margin[first], margin[first] / amax[first], tie ? "ok (near-tie)" : "FAIL");
        CHECK(tie);
    }
    gpu_model_seq_close(g, 0);
    free(lg);
    seq_state_destroy(st);
    forward_ctx_destroy(fc);
}

/* Tokens drawn on the device (gpu_item.sample) against sample_token on the same step's logits
 * copied to the host: slots 0 and 1 run the same prompt, then 16 decode steps in which slot 1
 * copies its logits and slot 0 samples on the device with a copy of slot 1's rng, greedy and at
 * temperature 0.8 / top_p 0.9 / top_k 40 with a repetition penalty. Both rows go through the
 * same kernels (two decode rows), so the logits agree and so must the tokens, except on a
 * floating-point near-tie between the kernel's and the host's cumulative sums (at most one of
 * the 32 draws allowed). */
static void check_device_sampling(const char *name, const struct model *m, struct gpu_model *g,
                                  const int32_t *prompt, int n_prompt)
{
    if (!gpu_model_can_sample(g)) {
        printf("fixture=%s part=device_sampling FAIL: no device sampler\n", name);
        CHECK(0);
        return;
    }
    const int V = m->cfg.vocab_size, STEPS = 16;
    float *lg = xmalloc(sizeof(float) * (size_t)V);
    struct sample_ctx *sc = sample_ctx_create(V);
    int32_t hist[MAX_LEN];
    int bad = 0, n = 0;
    for (int mode = 0; mode < 2; mode++) {
        struct sample_params sp;
        sample_params_default(&sp);
        if (mode == 0) {
            sp.temperature = 0.0f;
        } else {
            sp.temperature = 0.8f;
            sp.top_p = 0.9f;
            sp.top_k = 40;
            sp.repetition_penalty = 1.1f;
        }
        struct sample_rng r_dev, r_chk;
        sample_rng_seed(&r_dev, 1234 + mode);
        CHECK_EQ_INT(gpu_model_seq_open(g, 0), 0);
        CHECK_EQ_INT(gpu_model_seq_open(g, 1), 0);
        memcpy(hist, prompt, sizeof(int32_t) * (size_t)n_prompt);
        int nh = n_prompt;
        struct gpu_item pre[2] = { { .slot = 0, .tokens = prompt, .n = n_prompt, .pos = 0 },
                                   { .slot = 1, .tokens = prompt, .n = n_prompt, .pos = 0,
                                     .logits = lg } };
        CHECK_EQ_INT(gpu_model_step(g, pre, 2), 0);
        hist[nh++] = sample_argmax(lg, V);
        for (int i = 0; i < STEPS && nh < MAX_LEN; i++) {
            r_chk = r_dev; /* the state the device draws with */
            int32_t dev_tok = -1;
            struct gpu_sample_req rq = { &sp, hist, nh, &r_dev };
            struct gpu_item st[2] = {
                { .slot = 0, .tokens = &hist[nh - 1], .n = 1, .pos = nh - 1, .sample = &rq,
                  .token = &dev_tok },
                { .slot = 1, .tokens = &hist[nh - 1], .n = 1, .pos = nh - 1, .logits = lg } };
            CHECK_EQ_INT(gpu_model_step(g, st, 2), 0);
            const int32_t want = sample_token(sc, &sp, lg, hist, nh, &r_chk);
            bad += dev_tok != want;
            n++;
            hist[nh++] = want;
        }
        gpu_model_seq_close(g, 0);
        gpu_model_seq_close(g, 1);
    }
    printf("fixture=%s part=device_sampling draws=%d differ=%d %s\n", name, n, bad,
           bad <= 1 ? "ok" : "FAIL");
    CHECK(bad <= 1);
    sample_ctx_destroy(sc);
    free(lg);
}

struct slot_plan {
    const int32_t *seq;
    int n;
    const int *chunks;      // chunk sizes, summing to n
    int n_chunks;
    bool all;               // all_logits: every row of each chunk
    int start_step;
    int next;               // next chunk
    int pos;
    float *logits;          // (n, V) rows at chunk ends
    bool *have;             // (n)
};

/* Run a model: three slots as in the file comment. ref may be NULL (dummy models). */
static void run_model(const char *name, struct model *m, const int32_t *seq, int n,
                      const float *ref, const int *chunks1, int n_chunks1, int n_prompt,
                      bool strict)
{
    const int V = m->cfg.vocab_size;
    char err[512];
    struct gpu_model *g = NULL;
    struct gpu_model_opts o = {.n_slots = 4,
                               .max_model_len = MAX_LEN,
                               .block_tokens = 4,
                               .graphs = graphs,
                               .max_rows = 3 * MAX_LEN,
                               .kv_dtype = kv_fp8 ? KV_DTYPE_FP8 : KV_DTYPE_AUTO,
                               .gemm_min_rows = few_linear ? -1 : dispatch,
                               .grouped_min_rows = few_linear ? -1 : dispatch,
                               .prefill_attn = dispatch < 0 ? -1 : 0,
                               .gdn_chunk = dispatch,
                               .state_in_pool = pool};
    const enum kv_store store = kv_fp8 ? STORE_E4M3 : STORE_BF16;
    const double tol = kv_fp8 ? TOL_FP8 : dispatch > 0 ? TOL_GEMM : TOL;
    int rc = gpu_model_create(&g, m, &o, err, sizeof err);
    if (rc == ERR_UNSUPPORTED || rc == ERR_INVAL) {
        printf("fixture=%s SKIPPED: %s (%s)\n", name, err, err_str(rc));
        CHECK(!strict);
        return;
    }
    CHECK_EQ_INT(rc, 0);
    if (rc < 0) {
        printf("fixture=%s gpu_model_create: %s\n", name, err);
        return;
    }
    gpu_model_log(g);
    CHECK_EQ_INT(gpu_model_kv_dtype(g), kv_fp8 ? KV_DTYPE_FP8 : KV_DTYPE_BF16);
    /* the W4A4 semantics the runner's plan runs (its gpu_backend lines) are the CPU's too */
    const bool w4a4_wonly = backend_plan_w4a4_weight_only(gpu_model_plan(g));
    const int flags = w4a4_wonly ? FORWARD_W4A4_WEIGHT_ONLY : 0;
    bool w4a4 = false;
    for (int c = 0; c < BACKEND_CLASS_COUNT; c++)
        w4a4 = w4a4 || gpu_model_plan(g)->cls[c].w4a4;
    if (w4a4)
        printf("fixture=%s w4a4=%s sm=%d: the CPU reference runs %s\n", name,
               w4a4_wonly ? "weight_only" : "act_quant", gpu_model_plan(g)->sm,
               w4a4_wonly
                   ? "FORWARD_W4A4_WEIGHT_ONLY (weights dequantized, activations unquantized)"
                   : "with activations quantized per 16 (CHECKPOINTS.md 1.5)");
    int32_t *rev = xmalloc(sizeof(int32_t) * (size_t)n);
    for (int i = 0; i < n; i++)
        rev[i] = seq[n - 1 - i];
    int *ones = xmalloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++)
        ones[i] = 1;
    static const int pattern[] = { 3, 1, 5, 2, 7, 4 };
    int *irr = xmalloc(sizeof(int) * (size_t)n), n_irr = 0;
    for (int left = n; left > 0; n_irr++) {
        int c = pattern[n_irr % 6];
        irr[n_irr] = c < left ? c : left;
        left -= irr[n_irr];
    }
    struct slot_plan sp[4] = {
        { seq, n, ones, n, false, 0, 0, 0, NULL, NULL },
        { seq, n, chunks1, n_chunks1, false, 0, 0, 0, NULL, NULL },
        { rev, n, ones, n, false, 5, 0, 0, NULL, NULL },
        { seq, n, irr, n_irr, true, 1, 0, 0, NULL, NULL },
    };
    /* states in the pool: placed as the scheduler does, the states in the low chunks (slot s
     * in chunk 3 - s), every slot's K/V blocks from the top of the pool down, interleaved (block
     * b of slot s at kv_blocks - 1 - 4b - s), so that any mix-up of a layer's sub-block, a
     * chunk or a block id reads another sequence's data */
    const int bps = (MAX_LEN + 3) / 4, sb = gpu_model_state_blocks(g);
    uint32_t *tables = xcalloc((size_t)4 * (size_t)bps, sizeof(uint32_t));
    CHECK_EQ_INT(sb > 0, pool != 0);
    if (pool) {
        CHECK_EQ_INT(gpu_model_kv_blocks(g), 4 * (bps + sb)); /* the default: room for 4 */
        for (int s = 0; s < 4; s++)
            for (int b = 0; b < bps; b++)
                tables[s * bps + b] = (uint32_t)(gpu_model_kv_blocks(g) - 1 - 4 * b - s);
        CHECK_EQ_INT(gpu_model_seq_open_state(g, 0, 1), ERR_RANGE); /* not a chunk's first */
    }
    for (int s = 0; s < 4; s++) {
        sp[s].logits = xcalloc((size_t)n * (size_t)V, sizeof(float));
        sp[s].have = xcalloc((size_t)n, sizeof(bool));
        CHECK_EQ_INT(pool ? gpu_model_seq_open_state(g, s, (uint32_t)((3 - s) * sb))
                          : gpu_model_seq_open(g, s),
                     0);
    }
    struct gpu_item items[4];
    int order[4];
    for (int step = 0; rc == 0; step++) {
        int ni = 0;
        for (int k = 0; k < 4; k++) {
            const int s = (step + k) % 4; /* rotate the item order: slots are not rows */
            struct slot_plan *p = &sp[s];
            if (step < p->start_step || p->next >= p->n_chunks)
                continue;
            const int c = p->chunks[p->next];
            const size_t first = (size_t)(p->all ? p->pos : p->pos + c - 1);
            items[ni] = (struct gpu_item){.slot = s,
                                          .tokens = p->seq + p->pos,
                                          .n = c,
                                          .pos = p->pos,
                                          .logits = p->logits + first * V,
                                          .all_logits = p->all,
                                          .blocks = pool ? tables + s * bps : NULL,
                                          .n_blocks = pool ? bps : 0};
            order[ni++] = s;
        }
        if (ni == 0)
            break;
        rc = gpu_model_step(g, items, ni);
        CHECK_EQ_INT(rc, 0);
        for (int i = 0; i < ni; i++) {
            struct slot_plan *p = &sp[order[i]];
            CHECK_EQ_INT(items[i].rc, 0);
            if (items[i].rc != 0) {
                rc = items[i].rc;
                break;
            }
            for (int t = p->all ? 0 : items[i].n - 1; t < items[i].n; t++)
                p->have[p->pos + t] = true;
            p->pos += items[i].n;
            p->next++;
            CHECK_EQ_INT(gpu_model_seq_pos(g, order[i]), p->pos);
        }
    }
    /* a wrong position is refused without touching the slot */
    {
        struct gpu_item bad = { .slot = 0, .tokens = seq, .n = 1, .pos = 3 };
        CHECK_EQ_INT(gpu_model_step(g, &bad, 1), 0);
        CHECK_EQ_INT(bad.rc, ERR_STATE);
    }
    const size_t nv = (size_t)n * (size_t)V;
    float *cpu = xmalloc(sizeof(float) * nv), *cpu16 = xmalloc(sizeof(float) * nv);
    float *rev16 = xmalloc(sizeof(float) * nv);
    bool *all = xmalloc(sizeof(bool) * (size_t)n);
    for (int i = 0; i < n; i++)
        all[i] = true;
    CHECK_EQ_INT(cpu_logits(m, seq, n, cpu, STORE_F32, flags), 0);
    static struct swap sw;
    round_weights(m, &sw);
    const int n_rounded = sw.n;
    CHECK_EQ_INT(cpu_logits(m, seq, n, cpu16, store, flags), 0);
    CHECK_EQ_INT(cpu_logits(m, rev, n, rev16, store, flags), 0);
    restore_weights(&sw);
    /* the arithmetic: against the CPU with the same storage (bf16 or e4m3 K/V; bf16 copies of
     * fp32 checkpoint weights), at TOL (TOL_FP8 for e4m3 K/V) */
    const char *sn = kv_fp8 ? "fp8store" : "bf16store";
    char part[96];
    const struct cmp c0 = compare(sp[0].logits, cpu16, sp[0].have, n, V);
    const struct cmp c1 = compare(sp[1].logits, cpu16, sp[1].have, n, V);
    const double arith = fmax(c0.rel_err, c1.rel_err); /* measured, each checked <= tol */
    snprintf(part, sizeof part, "slot0-vs-cpu_%s", sn);
    report(name, part, c0, tol);
    snprintf(part, sizeof part, "slot1-chunked-vs-cpu_%s", sn);
    report(name, part, c1, tol);
    snprintf(part, sizeof part, "slot2-reversed-vs-cpu_%s", sn);
    report(name, part, compare(sp[2].logits, rev16, sp[2].have, n, V), tol);
    snprintf(part, sizeof part, "slot3-irregular-all_logits-vs-cpu_%s", sn);
    report(name, part, compare(sp[3].logits, cpu16, sp[3].have, n, V), tol);
    CHECK(sp[3].have[0] && sp[3].have[n - 1]);
    /* against fp32 K/V (CPU backend, transformers): what bf16 storage costs on this model,
     * measured by the CPU pass with rounded K/V, may be added (x2) to TOL; and by the triangle
     * inequality (per element, rows normalised by nearly the same max|ref|: 1% slack) the error
     * can reach the measured arithmetic error against the rounded CPU pass plus that cost (hf_a
     * on the H200: 0.0095 + 0.0038 at its first position, whose step runs bf16 GEMMs) */
    struct cmp kv = compare(cpu16, cpu, all, n, V);
    const double tol_kv = fmax(fmax(tol, 2.0 * kv.rel_err), 1.01 * (arith + kv.rel_err));
    printf("fixture=%s storage_cost rel_err=%.3g (cpu with %s K/V and %d fp32 weights rounded "
           "to bf16, vs cpu) -> tol %.3g\n", name, kv.rel_err, kv_fp8 ? "e4m3" : "bf16", n_rounded,
           tol_kv);
    const double tie_kv = kv_fp8 ? tol_kv : TOL;
    report(name, "slot0-vs-cpu", compare_tie(sp[0].logits, cpu, sp[0].have, n, V, tie_kv), tol_kv);
    if (w4a4_wonly) {
        /* figures, not checks: what weight-only costs against the activation-quantized CPU
         * pass and against transformers (which quantizes activations too) */
        float *aq = xmalloc(sizeof(float) * nv);
        CHECK_EQ_INT(cpu_logits(m, seq, n, aq, STORE_F32, 0), 0);
        printf("fixture=%s figure w4a4 weight_only_vs_act_quant: gpu_slot0 rel_err=%.3g "
               "cpu rel_err=%.3g (CPU pass with activations quantized, fp32 K/V)\n", name,
               compare(sp[0].logits, aq, sp[0].have, n, V).rel_err,
               compare(cpu, aq, all, n, V).rel_err);
        if (ref)
            printf("fixture=%s figure w4a4 vs_transformers: gpu_slot0 rel_err=%.3g gpu_slot1 "
                   "rel_err=%.3g cpu_weight_only rel_err=%.3g cpu_act_quant rel_err=%.3g\n",
                   name, compare(sp[0].logits, ref, sp[0].have, n, V).rel_err,
                   compare(sp[1].logits, ref, sp[1].have, n, V).rel_err,
                   compare(cpu, ref, all, n, V).rel_err, compare(aq, ref, all, n, V).rel_err);
        free(aq);
    } else if (ref) {
        struct cmp kr = compare(cpu16, ref, all, n, V);
        const double tol_r = fmax(fmax(tol, 2.0 * kr.rel_err), 1.01 * (arith + kr.rel_err));
        const double tie_r = kv_fp8 ? tol_r : TOL;
        report(name, "slot0-vs-transformers",
               compare_tie(sp[0].logits, ref, sp[0].have, n, V, tie_r), tol_r);
        report(name, "slot1-vs-transformers",
               compare_tie(sp[1].logits, ref, sp[1].have, n, V, tie_r), tol_r);
    }
    for (int s = 0; s < 4; s++)
        gpu_model_seq_close(g, s);
    check_greedy(name, m, g, seq, n_prompt, kv_fp8 ? TOL_FP8 : strict ? 1e-3 : 1e-2, flags);
    if (dispatch == 0 && !kv_fp8 && !graphs)
        check_device_sampling(name, m, g, seq, n_prompt);
    for (int s = 0; s < 4; s++) {
        free(sp[s].logits);
        free(sp[s].have);
    }
    free(irr);
    free(cpu);
    free(cpu16);
    free(rev16);
    free(all);
    free(rev);
    free(tables);
    free(ones);
    gpu_model_destroy(g);
}

static void run_fixture(const char *src, const char *name, bool strict)
{
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/tests/reference/fixtures/%s", src, name);
    char label[64];
    snprintf(label, sizeof label, "%s%s%s%s%s", name, graphs ? "+graphs" : "",
             kv_fp8 ? "+fp8kv" : "",
             dispatch > 0   ? "+gemm"
             : dispatch < 0 ? "+gemv"
                            : "",
             pool ? "+pool" : "");
    snprintf(path, sizeof path, "%s/ref.json", dir);
    char *txt = file_read(path, NULL);
    cJSON *ref = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    CHECK(ref != NULL);
    if (!ref)
        return;
    struct model *m = NULL;
    char err[512];
    int rc = model_load(&m, dir, NULL, err, sizeof err);
    CHECK_EQ_INT(rc, 0);
    if (rc < 0) {
        printf("fixture=%s model_load: %s\n", name, err);
        cJSON_Delete(ref);
        return;
    }
    const int V = m->cfg.vocab_size;
    int32_t seq[MAX_LEN];
    int np = append_ints(cJSON_GetObjectItemCaseSensitive(ref, "prompt"), seq);
    int nd = append_ints(cJSON_GetObjectItemCaseSensitive(ref, "decode_tokens"), seq + np);
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(ref, "cont_tokens");
    int nc = ct ? append_ints(ct, seq + np + nd) : 0;
    const int n = np + nd + nc;
    float *rl = xmalloc(sizeof(float) * (size_t)n * (size_t)V);
    int r0 = read_rows(dir, ref, "prefill", V, rl);
    int r1 = read_rows(dir, ref, "decode", V, rl + (size_t)np * V);
    int r2 = nc ? read_rows(dir, ref, "cont", V, rl + (size_t)(np + nd) * V) : 0;
    CHECK(r0 == np && r1 == nd && r2 == nc);
    int chunks[16], n_chunks = 0;
    chunks[n_chunks++] = np;
    for (int i = 0; i < nd; i++)
        chunks[n_chunks++] = 1;
    if (nc)
        chunks[n_chunks++] = nc;
    if (r0 == np && r1 == nd && r2 == nc)
        run_model(label, m, seq, n, rl, chunks, n_chunks, np, strict);
    free(rl);
    cJSON_Delete(ref);
    model_destroy(m);
}

/* 64 short sequences on a small pool (issue 19's GPU test): n_seq sequences of PL prompt tokens
 * (each its own) and GEN greedy tokens (argmax on the device), all in every step (the prompts
 * as one chunk each in the first step, then one token each), with the states in a pool that
 * holds exactly their states and blocks, placed as the scheduler would (states in the chunks
 * in reverse slot order, the blocks from the top down interleaved), and again with states in
 * slots and default tables. The layout moves no arithmetic: every token and every last-row
 * logit must be bit for bit the same. Returns the tokens compared. */
#define MANY_SEQ 64
#define MANY_PL 9
#define MANY_GEN 6
#define MANY_LEN (MANY_PL + MANY_GEN)
static int many_pool(struct model *m, bool graphs_on, const char *name)
{
    const int bt = 4, len = MANY_LEN, bps = (len + bt - 1) / bt, V = m->cfg.vocab_size;
    static int32_t toks[2][MANY_SEQ][MANY_LEN];
    float *last[2];
    int compared = 0;
    for (int mode = 0; mode < 2; mode++) { /* 0: slots, 1: pool */
        char err[512];
        struct gpu_model *g = NULL;
        struct gpu_model_opts o = { .n_slots = MANY_SEQ, .max_model_len = len, .block_tokens = bt,
                                    .graphs = graphs_on, .max_rows = MANY_SEQ * MANY_PL,
                                    .state_in_pool = mode };
        if (mode == 1) {
            /* room for exactly the 64 states and tables: the default, stated */
            struct gpu_model *probe = NULL;
            struct gpu_model_opts po = o;
            po.n_slots = 1;
            po.graphs = 0;
            CHECK_EQ_INT(gpu_model_create(&probe, m, &po, err, sizeof err), 0);
            const int sb = probe ? gpu_model_state_blocks(probe) : 1;
            gpu_model_destroy(probe);
            o.kv_blocks = MANY_SEQ * (sb + bps);
        }
        int rc = gpu_model_create(&g, m, &o, err, sizeof err);
        CHECK_EQ_INT(rc, 0);
        if (rc < 0) {
            printf("many_pool %s: %s\n", name, err);
            return 0;
        }
        const int sb = gpu_model_state_blocks(g), kvb = gpu_model_kv_blocks(g);
        CHECK_EQ_INT(sb > 0, mode == 1);
        uint32_t *tables = xcalloc((size_t)MANY_SEQ * bps, sizeof(uint32_t));
        for (int s = 0; s < MANY_SEQ; s++) {
            for (int b = 0; b < bps; b++)
                tables[s * bps + b] = (uint32_t)(kvb - 1 - MANY_SEQ * b - s);
            rc = mode ? gpu_model_seq_open_state(g, s, (uint32_t)((MANY_SEQ - 1 - s) * sb))
                      : gpu_model_seq_open(g, s);
            CHECK_EQ_INT(rc, 0);
            for (int i = 0; i < MANY_PL; i++)
                toks[mode][s][i] = (int32_t)((s * 131 + i * 17 + 5) % V);
        }
        last[mode] = xcalloc((size_t)MANY_SEQ * V, sizeof(float));
        struct gpu_item items[MANY_SEQ];
        int32_t am[MANY_SEQ];
        for (int step = 0, pos = 0; step <= MANY_GEN && rc == 0; step++) {
            const int n = step == 0 ? MANY_PL : 1;
            for (int s = 0; s < MANY_SEQ; s++)
                items[s] = (struct gpu_item){ .slot = s, .tokens = &toks[mode][s][pos], .n = n,
                                              .pos = pos, .argmax = &am[s],
                                              .logits = step == MANY_GEN ? last[mode] + (size_t)s * V
                                                                         : NULL,
                                              .blocks = mode ? tables + s * bps : NULL,
                                              .n_blocks = mode ? bps : 0 };
            if (step == MANY_GEN) /* the last step: logits instead of a token */
                for (int s = 0; s < MANY_SEQ; s++)
                    items[s].argmax = NULL;
            rc = gpu_model_step(g, items, MANY_SEQ);
            CHECK_EQ_INT(rc, 0);
            for (int s = 0; s < MANY_SEQ; s++) {
                CHECK_EQ_INT(items[s].rc, 0);
                if (step < MANY_GEN)
                    toks[mode][s][pos + n] = am[s];
            }
            pos += n;
        }
        free(tables);
        gpu_model_destroy(g);
    }
    for (int s = 0; s < MANY_SEQ; s++)
        for (int i = MANY_PL; i < len; i++, compared++)
            CHECK_EQ_INT(toks[1][s][i], toks[0][s][i]);
    const bool same = memcmp(last[0], last[1], sizeof(float) * (size_t)MANY_SEQ * V) == 0;
    CHECK(same);
    printf("fixture=%s part=many_pool seqs=%d prompt=%d gen=%d graphs=%d tokens_compared=%d "
           "last_logits_identical=%s %s\n", name, MANY_SEQ, MANY_PL, MANY_GEN, graphs_on ? 1 : 0,
           compared, same ? "yes" : "no", same && !test_failures_ ? "ok" : "FAIL");
    free(last[0]);
    free(last[1]);
    return compared;
}

static void run_many_pool(const char *src, const char *name)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/reference/fixtures/%s", src, name);
    struct model *m = NULL;
    char err[512];
    int rc = model_load(&m, dir, NULL, err, sizeof err);
    CHECK_EQ_INT(rc, 0);
    if (rc < 0) {
        printf("fixture=%s model_load: %s\n", name, err);
        return;
    }
    CHECK(many_pool(m, false, name) == MANY_SEQ * MANY_GEN);
    CHECK(many_pool(m, true, name) == MANY_SEQ * MANY_GEN);
    model_destroy(m);
}

static void run_dummy(const char *src, const char *name)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/kernels/model/%s", src, name);
    struct model *m = NULL;
    char err[512];
    struct model_load_opts lo = { .dummy = true, .dummy_seed = 7 };
    int rc = model_load(&m, dir, &lo, err, sizeof err);
    CHECK_EQ_INT(rc, 0);
    if (rc < 0) {
        printf("model=%s model_load: %s\n", name, err);
        return;
    }
    int32_t seq[40];
    for (int i = 0; i < 40; i++)
        seq[i] = (int32_t)((i * 7919 + 13) % m->cfg.vocab_size);
    const int chunks[] = { 16, 1, 1, 1, 1, 20 };
    char label[64];
    snprintf(label, sizeof label, "%s%s%s", name, graphs ? "+graphs" : "",
             dispatch > 0 ? "+gemm" : dispatch < 0 ? "+gemv" : "");
    /* Its random router meets near-tie expert choices, so the many-row paths' bf16 activations
     * (every grouped expert GEMM from 9 rows on) flip a route: on the H200 (2026-12-01) slot 0
     * gave a 0.356 logit error at one position, and 0.012 elsewhere, when its mixed steps of
     * 17-40 rows took them; the trained fixtures, which have no such ties, check those paths at
     * the default dispatch and forced on every row, and ktest_moe_grouped / ktest_linear check
     * the kernels against their references. Here the few-row kernels run every step. */
    few_linear = 1;
    printf("fixture=%s note: dense layers and experts on the few-row kernels at every row count "
           "(random router: near-tie routes)\n", label);
    run_model(label, m, seq, 40, NULL, chunks, 6, 16, false);
    few_linear = 0;
    model_destroy(m);
}

/* --load-format dummy on the device (model_load_opts.dummy_device): a runner built from the
 * model whose large weights it writes itself (dummy_fill, the loader's stream) gives the same
 * logits, bit for bit, as one built from the host-filled model, over a prefill and a decode step;
 * the CPU pass refuses the device-only model. */
static void run_dummy_device(const char *src, const char *where, const char *name)
{
    char dir[1024], err[512];
    snprintf(dir, sizeof dir, "%s/%s/%s", src, where, name);
    struct model *mh = NULL, *md = NULL;
    struct model_load_opts lh = {.dummy = true, .dummy_seed = 7}, ld = lh;
    ld.dummy_device = true;
    int rc = model_load(&mh, dir, &lh, err, sizeof err);
    if (rc == 0)
        rc = model_load(&md, dir, &ld, err, sizeof err);
    CHECK_EQ_INT(rc, 0);
    if (rc < 0) {
        printf("fixture=%s+dummy_device model_load: %s FAIL\n", name, err);
        model_destroy(mh);
        return;
    }
    CHECK(md->device_only && !mh->device_only);
    CHECK(forward_ctx_create(md, 1, 16, NULL) == NULL);
    const int V = mh->cfg.vocab_size;
    enum { NP = 9 };
    int32_t tok[NP + 1];
    for (int i = 0; i <= NP; i++)
        tok[i] = (int32_t)((i * 7919 + 13) % V);
    float *lg[2] = {xcalloc(2 * (size_t)V, sizeof(float)), xcalloc(2 * (size_t)V, sizeof(float))};
    for (int k = 0; k < 2 && rc == 0; k++) {
        struct gpu_model *g = NULL;
        struct gpu_model_opts o = {.n_slots = 1, .max_model_len = 32, .block_tokens = 4};
        rc = gpu_model_create(&g, k ? md : mh, &o, err, sizeof err);
        CHECK_EQ_INT(rc, 0);
        if (rc < 0) {
            printf("fixture=%s+dummy_device gpu_model_create: %s FAIL\n", name, err);
            break;
        }
        CHECK_EQ_INT(gpu_model_seq_open(g, 0), 0);
        struct gpu_item it = {.slot = 0, .tokens = tok, .n = NP, .pos = 0, .logits = lg[k]};
        CHECK_EQ_INT(gpu_model_step(g, &it, 1), 0);
        CHECK_EQ_INT(it.rc, 0);
        struct gpu_item dec = {
            .slot = 0, .tokens = &tok[NP], .n = 1, .pos = NP, .logits = lg[k] + V};
        CHECK_EQ_INT(gpu_model_step(g, &dec, 1), 0);
        CHECK_EQ_INT(dec.rc, 0);
        gpu_model_destroy(g);
    }
    if (rc == 0) {
        const bool same = memcmp(lg[0], lg[1], sizeof(float) * 2 * (size_t)V) == 0;
        bool finite = true;
        for (size_t i = 0; i < 2 * (size_t)V; i++)
            finite = finite && isfinite(lg[1][i]);
        printf("fixture=%s+dummy_device check=device_fill rows=2 identical=%d finite=%d %s\n", name,
               same, finite, same && finite ? "ok" : "FAIL");
        CHECK(same && finite);
    }
    free(lg[0]);
    free(lg[1]);
    model_destroy(md);
    model_destroy(mh);
}

/* KTEST_GPU_MODEL_ONLY=a,b limits the run to those models (the memcheck pass uses it). */
static bool selected(const char *name)
{
    const char *only = getenv("KTEST_GPU_MODEL_ONLY");
    if (!only || !*only)
        return true;
    const size_t n = strlen(name);
    for (const char *p = only; (p = strstr(p, name)) != NULL; p += n)
        if ((p == only || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return true;
    return false;
}

int main(void)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        fprintf(stderr, "SKIPPED: no CUDA device\n");
        return 77;
    }
    const char *src = getenv("TERN_SOURCE_DIR");
    if (!src)
        src = ".";
    static const char *const strict[] = { "q_bf16", "hf_a", "hf_b", "hf_c" };
    static const char *const lax[] = { "q_fp8", "q_fp8_tensor", "q_fp8_block", "q_nvfp4a16",
                                       "q_nvfp4", "q_modelopt_nvfp4" };
    for (size_t i = 0; i < sizeof strict / sizeof strict[0]; i++)
        if (selected(strict[i]))
            run_fixture(src, strict[i], true);
    for (size_t i = 0; i < sizeof lax / sizeof lax[0]; i++)
        if (selected(lax[i]))
            run_fixture(src, lax[i], false);
    if (selected("small_bf16"))
        run_dummy(src, "small_bf16");
    if (selected("small_nvfp4"))
        run_dummy(src, "small_nvfp4");
    /* dummy weights written on the device: bf16, nvfp4 and fp8 (block scales) formats */
    if (selected("small_bf16"))
        run_dummy_device(src, "tests/kernels/model", "small_bf16");
    if (selected("small_nvfp4"))
        run_dummy_device(src, "tests/kernels/model", "small_nvfp4");
    if (selected("q_fp8_block")) /* its config with dummy weights */
        run_dummy_device(src, "tests/reference/fixtures", "q_fp8_block");
    /* the same runner replaying CUDA graphs (the default launches eagerly) */
    graphs = 1;
    if (selected("q_bf16"))
        run_fixture(src, "q_bf16", true);
    if (selected("hf_b"))
        run_fixture(src, "hf_b", true);
    if (selected("small_nvfp4"))
        run_dummy(src, "small_nvfp4");
    /* fp8 K/V (e4m3, scale 1): one bf16 fixture, eager and with graphs */
    kv_fp8 = 1;
    for (graphs = 0; graphs <= 1; graphs++)
        if (selected("q_bf16"))
            run_fixture(src, "q_bf16", true);
    /* the many-row paths on every step, then the few-row paths on every step (eager and with
     * graphs: the captured graphs of n rows take the GEMM path too when forced). Not on the
     * random-weight small_nvfp4: with bf16 activations everywhere its random router meets
     * near-tie expert choices that flip (a 0.31 logit error from one flipped route, H200
     * 2026-12-01), which says nothing about the kernels; the trained fixtures have no such ties. */
    kv_fp8 = 0;
    static const char *const forced[] = { "q_bf16", "hf_b", "q_fp8_block", "q_nvfp4a16" };
    for (dispatch = 1; dispatch >= -1; dispatch -= 2)
        for (graphs = 0; graphs <= 1; graphs++)
            for (size_t i = 0; i < sizeof forced / sizeof forced[0]; i++)
                if (selected(forced[i]))
                    run_fixture(src, forced[i], i < 2);
    /* GDN states in the K/V pool (the layout docs/KV.md describes): two fixtures eager and with
     * graphs, one with fp8 K/V (a block of half the bytes) */
    dispatch = 0;
    pool = 1;
    for (graphs = 0; graphs <= 1; graphs++) {
        if (selected("q_bf16"))
            run_fixture(src, "q_bf16", true);
        if (selected("hf_b"))
            run_fixture(src, "hf_b", true);
    }
    kv_fp8 = 1;
    graphs = 0;
    if (selected("q_bf16"))
        run_fixture(src, "q_bf16", true);
    kv_fp8 = 0;
    if (selected("hf_b"))
        run_many_pool(src, "hf_b");
    return test_result();
}

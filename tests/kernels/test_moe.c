/* moe_route and moe_expert: GPU vs reference. Routing is compared tie-aware: a different expert is
 * accepted only when its reference probability equals (within 1e-6) the one it replaced. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "gemv.h"
#include "ktest.h"
#include "kweights.h"
#include "moe_expert.h"
#include "moe_route.h"
#include "test.h"

static void test_route(int n_tok, int n_exp, int k, int quantize)
{
    size_t n = (size_t)n_tok * n_exp;
    float *l = malloc(n * 4), *rw = malloc((size_t)n_tok * k * 4),
          *gw = malloc((size_t)n_tok * k * 4);
    int32_t *ri = malloc((size_t)n_tok * k * 4), *gi = malloc((size_t)n_tok * k * 4);
    ktest_fill(l, n, -4, 4);
    if (quantize) /* few distinct values: many exact ties, which must go to the lower id */
        for (size_t i = 0; i < n; i++)
            l[i] = floorf(l[i]);
    float *dl = ktest_dev_from(l, n * 4), *dw = ktest_dev_poison((size_t)n_tok * k);
    int32_t *di = ktest_dev_alloc((size_t)n_tok * k * 4);
    CHECK_EQ_INT(moe_route_ref(ri, rw, l, n_tok, n_exp, k), 0);
    CHECK_EQ_INT(moe_route_cuda(di, dw, dl, n_tok, n_exp, k, 0), 0);
    ktest_to_host(gi, di, (size_t)n_tok * k * 4);
    ktest_to_host(gw, dw, (size_t)n_tok * k * 4);
    int bad = 0;
    for (int t = 0; t < n_tok; t++)
        for (int j = 0; j < k; j++) {
            int a = gi[t * k + j], b = ri[t * k + j];
            if (a != b) {
                /* tie-aware: accept only equal logits (the softmax is monotone) */
                if (quantize || a < 0 || a >= n_exp ||
                    fabsf(l[(size_t)t * n_exp + a] - l[(size_t)t * n_exp + b]) > 1e-6f) {
                    if (bad++ < 5)
                        fprintf(stderr, "  route t=%d j=%d got %d ref %d\n", t, j, a, b);
                }
            }
        }
    CHECK(bad == 0);
    CHECK(ktest_compare("moe_route weights", gw, rw, (size_t)n_tok * k, 1e-6, 1e-4) == 0);
    fprintf(stderr, "moe_route tok=%d E=%d k=%d quant=%d: id mismatches=%d\n", n_tok, n_exp, k,
            quantize, bad);
    ktest_free(dl), ktest_free(dw), ktest_free(di);
    free(l), free(rw), free(gw), free(ri), free(gi);
}

/* moe_route_shared: the top-k as moe_route, then the folded shared expert's slot (expert
 * n_exp, sigmoid of its gate logit read at pitch 2) */
static void test_route_shared(int n_tok, int n_exp, int k)
{
    const size_t n = (size_t)n_tok * n_exp, ns = (size_t)n_tok * (k + 1);
    float *l = malloc(n * 4), *sh = malloc((size_t)n_tok * 2 * 4), *rw = malloc(ns * 4),
          *gw = malloc(ns * 4);
    int32_t *ri = malloc(ns * 4), *gi = malloc(ns * 4);
    ktest_fill(l, n, -4, 4);
    ktest_fill(sh, (size_t)n_tok * 2, -30, 30); /* far into both tails of the sigmoid */
    float *dl = ktest_dev_from(l, n * 4), *dsh = ktest_dev_from(sh, (size_t)n_tok * 2 * 4),
          *dw = ktest_dev_poison(ns);
    int32_t *di = ktest_dev_alloc(ns * 4);
    CHECK_EQ_INT(moe_route_shared_ref(ri, rw, l, sh, 2, n_tok, n_exp, k), 0);
    CHECK_EQ_INT(moe_route_shared_cuda(di, dw, dl, dsh, 2, n_tok, n_exp, k, 0), 0);
    ktest_to_host(gi, di, ns * 4);
    ktest_to_host(gw, dw, ns * 4);
    int bad = 0;
    for (int t = 0; t < n_tok; t++)
        for (int j = 0; j <= k; j++) {
            const int a = gi[t * (k + 1) + j], b = ri[t * (k + 1) + j];
            if (a != b && (j == k || a < 0 || a >= n_exp ||
                           fabsf(l[(size_t)t * n_exp + a] - l[(size_t)t * n_exp + b]) > 1e-6f) &&
                bad++ < 5)
                fprintf(stderr, "  route_shared t=%d j=%d got %d ref %d\n", t, j, a, b);
        }
    CHECK(bad == 0);
    CHECK(ktest_compare("moe_route_shared weights", gw, rw, ns, 1e-6, 1e-4) == 0);
    fprintf(stderr, "moe_route_shared tok=%d E=%d k=%d: id mismatches=%d\n", n_tok, n_exp, k,
            bad);
    CHECK_EQ_INT(moe_route_shared_cuda(di, dw, dl, NULL, 2, n_tok, n_exp, k, 0), ERR_INVAL);
    CHECK_EQ_INT(moe_route_shared_cuda(di, dw, dl, dsh, 0, n_tok, n_exp, k, 0), ERR_INVAL);
    ktest_free(dl), ktest_free(dsh), ktest_free(dw), ktest_free(di);
    free(l), free(sh), free(rw), free(gw), free(ri), free(gi);
}

/* moe_router: router GEMV (+ the shared gate) and routing in one launch vs moe_router_ref,
 * twice (the counter must be back at 0); logits at the GEMV cores tolerance, ids tie-aware as
 * test_route, weights 1e-5 */
static void test_router(int fmt, int E, int k, int H, int n_tok, int shared)
{
    struct kw_pair r, sg;
    kw_pair_make(&r, fmt, 0, 1, E, H);
    kw_pair_make(&sg, fmt, 0, 1, 2, H);
    const int stride = k + (shared ? 1 : 0);
    const size_t ns = (size_t)n_tok * stride;
    float *x = malloc((size_t)n_tok * H * 4), *rl = malloc((size_t)n_tok * E * 4),
          *rs = malloc((size_t)n_tok * 2 * 4), *rw = malloc(ns * 4), *gw = malloc(ns * 4),
          *gl = malloc((size_t)n_tok * E * 4);
    int32_t *ri = malloc(ns * 4), *gi = malloc(ns * 4);
    ktest_fill(x, (size_t)n_tok * H, -1, 1);
    float *dx = ktest_dev_from(x, (size_t)n_tok * H * 4), *dl = ktest_dev_poison((size_t)n_tok * E),
          *ds = ktest_dev_poison((size_t)n_tok * 2), *dw = ktest_dev_poison(ns);
    int32_t *di = ktest_dev_alloc(ns * 4);
    unsigned zero = 0, hc = 1, *dc = ktest_dev_from(&zero, 4);
    CHECK_EQ_INT(moe_router_ref(ri, rw, rl, rs, x, &r.host, shared ? &sg.host : NULL, n_tok, k), 0);
    double amax = 0;
    for (int i = 0; i < n_tok * E; i++)
        amax = fabs(rl[i]) > amax ? fabs(rl[i]) : amax;
    for (int rep = 0; rep < 2; rep++) {
        CHECK_EQ_INT(moe_router_cuda(di, dw, dl, ds, dc, dx, &r.dev, shared ? &sg.dev : NULL,
                                     n_tok, k, 0),
                     0);
        ktest_to_host(gi, di, ns * 4);
        ktest_to_host(gw, dw, ns * 4);
        ktest_to_host(gl, dl, (size_t)n_tok * E * 4);
        ktest_to_host(&hc, dc, 4);
        CHECK(hc == 0);
        CHECK(ktest_compare("moe_router logits", gl, rl, (size_t)n_tok * E, 1e-5 * amax, 1e-4) ==
              0);
        int bad = 0;
        for (int t = 0; t < n_tok; t++)
            for (int j = 0; j < stride; j++) {
                const int a = gi[t * stride + j], b = ri[t * stride + j];
                if (a != b && (j == k || a < 0 || a >= E ||
                               fabsf(rl[(size_t)t * E + a] - rl[(size_t)t * E + b]) > 1e-5f))
                    bad++;
            }
        CHECK(bad == 0);
        CHECK(ktest_compare("moe_router weights", gw, rw, ns, 1e-5, 1e-4) == 0);
        fprintf(stderr, "moe_router fmt=%d E=%d k=%d H=%d tok=%d shared=%d rep=%d: id mismatches=%d\n",
                fmt, E, k, H, n_tok, shared, rep, bad);
    }
    ktest_free(dx), ktest_free(dl), ktest_free(ds), ktest_free(dw), ktest_free(di), ktest_free(dc);
    kw_pair_free(&r);
    kw_pair_free(&sg);
    free(x), free(rl), free(rs), free(rw), free(gw), free(gl), free(ri), free(gi);
}

/* One expert-weight set (gate_up with per-channel scales, down with 128x128 block scales for
 * fp8), then for each run {n_tok, accumulate}: fresh inputs, the reference once, and every path
 * that applies to the format against it (the weights are the costly part to make; the reference
 * does not depend on the path). */
struct erun {
    int n_tok;
    int accumulate;
};

/* moe_expert_sh_cuda: with the last slot of every token made expert n_exp - 1 (a folded shared
 * expert), computed before the PDL wait, bit for bit what moe_expert_cuda_path gives on the same
 * ids (each with its own NaN-filled scratch: a slot the launch skips cannot pass on the other's
 * values); then its refusals. ids: the run's (host), copied. */
static void test_expert_sh(int path, int n_tok, int k, int n_exp, const struct kw_pair *gu,
                           const struct kw_pair *dn, const float *dx, const float *dw, float *dh,
                           const int32_t *ids, const float *init, int accumulate)
{
    const int hidden = dn->host.rows, sh = n_exp - 1;
    float *dh2 = ktest_dev_poison(moe_expert_ws_floats(n_tok, k, dn->host.cols, hidden));
    const size_t nx = (size_t)n_tok * hidden, ns = (size_t)n_tok * k;
    int32_t *ids2 = malloc(ns * 4);
    float *a = malloc(nx * 4), *b = malloc(nx * 4);
    memcpy(ids2, ids, ns * 4);
    for (int t = 0; t < n_tok; t++)
        ids2[t * k + k - 1] = sh;
    int32_t *di = ktest_dev_from(ids2, ns * 4);
    float *da = ktest_dev_from(init, nx * 4), *db = ktest_dev_from(init, nx * 4);
    CHECK_EQ_INT(moe_expert_cuda_path(da, dh, dx, di, dw, n_tok, k, n_exp, &gu->dev, &dn->dev,
                                      accumulate, path, 0),
                 0);
    ktest_to_host(a, da, nx * 4);
    CHECK_EQ_INT(moe_expert_sh_cuda(db, dh2, dx, di, dw, n_tok, k, n_exp, &gu->dev, &dn->dev,
                                    accumulate, sh, path, 0),
                 0);
    ktest_to_host(b, db, nx * 4);
    const int same = memcmp(a, b, nx * 4) == 0;
    CHECK(same);
    CHECK_EQ_INT(moe_expert_sh_cuda(db, dh, dx, di, dw, n_tok, k, n_exp, &gu->dev, &dn->dev,
                                    accumulate, n_exp, path, 0),
                 ERR_INVAL);
    CHECK_EQ_INT(moe_expert_sh_cuda(db, dh, dx, di, dw, n_tok, k, n_exp, &gu->dev, &dn->dev,
                                    accumulate, -2, path, 0),
                 ERR_INVAL);
    fprintf(stderr, "moe_expert_sh path=%d tok=%d E=%d k=%d acc=%d: bit-identical=%d\n", path,
            n_tok, n_exp, k, accumulate, same);
    ktest_free(di), ktest_free(da), ktest_free(db), ktest_free(dh2);
    free(ids2), free(a), free(b);
}

static void test_expert(int fmt, int n_exp, int k, int hidden, int inter, const struct erun *runs,
                        int n_runs)
{
    struct kw_pair gu, dn;
    char what[112];
    kw_pair_make(&gu, fmt, KW_SCALE_CHANNEL, n_exp, 2 * inter, hidden);
    kw_pair_make(&dn, fmt, KW_SCALE_BLOCK, n_exp, hidden, inter);
    int paths[4], n_paths = 0;
    paths[n_paths++] = GEMV_PATH_CORES;
    if (fmt == KW_FMT_NVFP4 && hidden % 128 == 0 && inter % 128 == 0)
        paths[n_paths++] = GEMV_PATH_TENSOR;
    /* any token count: the stream path loops over tokens in the grid (fp8 too; AUTO takes it up
     * to 8 tokens where moe_expert.cu's MOE_STREAM_FP8_AUTO is 1, its default) */
    if (fmt == KW_FMT_NVFP4 || fmt == KW_FMT_FP8)
        paths[n_paths++] = GEMV_PATH_STREAM;
    paths[n_paths++] = GEMV_PATH_AUTO;
    for (int r = 0; r < n_runs; r++) {
        const int n_tok = runs[r].n_tok, accumulate = runs[r].accumulate;
        size_t nx = (size_t)n_tok * hidden, ns = (size_t)n_tok * k;
        float *x = malloc(nx * 4), *w = malloc(ns * 4), *init = malloc(nx * 4),
              *ref = malloc(nx * 4), *got = malloc(nx * 4), *hb = malloc(ns * inter * 4);
        int32_t *ids = malloc(ns * 4);
        ktest_fill(x, nx, -1, 1);
        ktest_fill(w, ns, 0, 1);
        ktest_fill(init, nx, -1, 1);
        memcpy(ref, init, nx * 4); /* initial contents for accumulate */
        for (size_t i = 0; i < ns; i++)
            ids[i] = (int32_t)(ktest_u32() % (uint32_t)n_exp);
        if (ns > 3)
            ids[3] = -1; /* an empty slot */
        float *dx = ktest_dev_from(x, nx * 4), *dw = ktest_dev_from(w, ns * 4);
        float *dh = ktest_dev_alloc(moe_expert_ws_floats(n_tok, k, inter, hidden) * 4);
        int32_t *di = ktest_dev_from(ids, ns * 4);
        CHECK_EQ_INT(
            moe_expert_ref(ref, hb, x, ids, w, n_tok, k, n_exp, &gu.host, &dn.host, accumulate), 0);
        double amax = 0;
        for (size_t i = 0; i < nx; i++)
            amax = fabs(ref[i]) > amax ? fabs(ref[i]) : amax;
        for (int p = 0; p < n_paths; p++) {
            const int path = paths[p];
            float *dout = ktest_dev_from(init, nx * 4);
            CHECK_EQ_INT(moe_expert_cuda_path(dout, dh, dx, di, dw, n_tok, k, n_exp, &gu.dev,
                                              &dn.dev, accumulate, path, 0),
                         0);
            ktest_to_host(got, dout, nx * 4);
            ktest_free(dout);
            snprintf(what, sizeof(what),
                     "moe_expert fmt=%d tok=%d E=%d k=%d H=%d I=%d acc=%d path=%d", fmt, n_tok,
                     n_exp, k, hidden, inter, accumulate, path);
            /* the tensor-core and stream paths round activations (x and silu(g)*u) to fp16;
             * AUTO takes one of them for nvfp4, and the stream one for fp8 at 2..8 tokens
             * (these fp8 weights: channel-scaled gate_up, block-scaled down); fp8 at one token
             * runs on the CUDA cores (fp32: the tight tolerance) */
            if (path == GEMV_PATH_TENSOR || path == GEMV_PATH_STREAM ||
                (path == GEMV_PATH_AUTO &&
                 (fmt == KW_FMT_NVFP4 || (fmt == KW_FMT_FP8 && n_tok >= 2 && n_tok <= 8))))
                CHECK(ktest_compare(what, got, ref, nx, 2e-3 * amax, 2e-3) == 0);
            else
                CHECK(ktest_compare(what, got, ref, nx, 1e-5 * amax, 1e-4) == 0);
            if (k >= 2)
                test_expert_sh(path, n_tok, k, n_exp, &gu, &dn, dx, dw, dh, ids, init, accumulate);
        }
        ktest_free(dx), ktest_free(dw), ktest_free(dh), ktest_free(di);
        free(x), free(w), free(init), free(ref), free(got), free(hb), free(ids);
    }
    kw_pair_free(&gu);
    kw_pair_free(&dn);
}

/* the runs argument pair of test_expert: an array literal and its length */
#define RUNS(...)                                                                                  \
    (const struct erun[]){__VA_ARGS__},                                                            \
        (int)(sizeof((const struct erun[]){__VA_ARGS__}) / sizeof(struct erun))

int main(void)
{
    ktest_require_gpu();
    ktest_seed(11);
    test_route(1, 256, 8, 0);
    test_route(37, 256, 8, 0);
    test_route(64, 256, 8, 1);
    test_route(5, 12, 3, 1);
    test_route(3, 1000, 32, 0);
    test_route_shared(1, 256, 8);
    test_route_shared(8, 256, 8);
    test_route_shared(5, 12, 3);
    test_router(KW_FMT_BF16, 256, 8, 2048, 1, 1); /* the model's router + shared gate */
    test_router(KW_FMT_BF16, 256, 8, 2048, 8, 1);
    test_router(KW_FMT_BF16, 40, 4, 264, 3, 0);
    test_router(KW_FMT_BF16, 40, 4, 264, 1, 0);  /* one token: the block-wide routing */
    test_router(KW_FMT_BF16, 300, 8, 256, 1, 1); /* more experts than threads */
    test_router(KW_FMT_BF16, 64, 32, 128, 1, 0); /* top_k 32 */
    test_router(KW_FMT_NVFP4, 48, 6, 256, 2, 1);
    test_router(KW_FMT_BF16, 40, 4, 5008, 1, 1); /* one token past the chunks loaded early */
    /* 2-8 tokens (MOE_ROUTER_RB rows a block): E not a multiple of the rows, E over 256 */
    test_router(KW_FMT_BF16, 41, 4, 2056, 4, 1);
    test_router(KW_FMT_BF16, 300, 8, 256, 5, 1);
    test_router(KW_FMT_BF16, 256, 8, 2048, 4, 1); /* a k = 3 verify window's rows */
    test_expert(KW_FMT_NVFP4, 16, 8, 256, 64, RUNS({1, 0}));
    test_expert(KW_FMT_NVFP4, 16, 8, 512, 96, RUNS({5, 1}));
    test_expert(KW_FMT_BF16, 8, 4, 264, 40, RUNS({3, 0}));
    test_expert(KW_FMT_FP8, 6, 2, 272, 48, RUNS({2, 1}));
    test_expert(KW_FMT_NVFP4, 16, 8, 384, 128, RUNS({3, 1}));
    test_expert(KW_FMT_NVFP4, 32, 4, 256, 384, RUNS({9, 0}));
    /* K % 32 == 16 for both stages (hidden 272, inter 48 / 80), 1..8 tokens, top-1 */
    test_expert(KW_FMT_NVFP4, 8, 8, 272, 48, RUNS({1, 0}));
    test_expert(KW_FMT_NVFP4, 8, 8, 272, 80, RUNS({4, 1}));
    test_expert(KW_FMT_NVFP4, 16, 8, 2064, 144, RUNS({8, 0}));
    test_expert(KW_FMT_NVFP4, 1, 1, 256, 64, RUNS({3, 1})); /* the shared-expert form */
    /* top-8 + a folded shared expert's slot (9 slots per token) */
    test_expert(KW_FMT_NVFP4, 17, 9, 256, 64, RUNS({1, 0}, {8, 0}));
    test_expert(KW_FMT_BF16, 9, 9, 264, 40, RUNS({2, 0}, {9, 1})); /* 9 tokens: the looping down */
    test_expert(KW_FMT_BF16, 20, 16, 264, 40, RUNS({1, 1}));       /* top_k beyond the slots form */
    /* full-size shapes at 1, 2 and 8 tokens (32 experts of 1024x2048 + 2048x512), one set */
    test_expert(KW_FMT_NVFP4, 32, 8, 2048, 512, RUNS({1, 0}, {2, 0}, {8, 1}));
    test_expert(KW_FMT_FP8, 16, 9, 2048, 512, RUNS({1, 0}, {8, 1})); /* fp8 stream, full size */
    test_expert(KW_FMT_BF16, 16, 9, 2048, 512, RUNS({1, 0}, {8, 1})); /* bf16 slots form */
    {
        /* the stream path refuses top_k * inter beyond its shared memory */
        struct kw_pair gu, dn;
        float *d = ktest_dev_alloc(4096 * 4);
        int32_t *di = ktest_dev_alloc(64 * 4);
        kw_pair_make(&gu, KW_FMT_NVFP4, 0, 2, 2 * 4608, 64);
        kw_pair_make(&dn, KW_FMT_NVFP4, 0, 2, 64, 4608);
        CHECK_EQ_INT(
            moe_expert_cuda_path(d, d, d, di, d, 1, 8, 2, &gu.dev, &dn.dev, 0, GEMV_PATH_STREAM, 0),
            ERR_UNSUPPORTED);
        /* a folded shared expert needs a routed slot beside it */
        CHECK_EQ_INT(
            moe_expert_sh_cuda(d, d, d, di, d, 1, 1, 2, &gu.dev, &dn.dev, 0, 1, GEMV_PATH_AUTO, 0),
            ERR_INVAL);
        kw_pair_free(&gu);
        kw_pair_free(&dn);
        ktest_free(d);
        ktest_free(di);
    }
    CHECK_EQ_INT(moe_route_cuda(NULL, NULL, NULL, 1, 2000, 8, 0), ERR_INVAL);
    ktest_sync();
    return test_result();
}

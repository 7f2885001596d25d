/* moe_grouped (prefill MoE as grouped bf16 tensor-core GEMMs) vs moe_expert_ref.
 * Tolerance: the GPU rounds x, the dequantized weights and h = silu(g)*u to bf16 (relative error
 * <= 2^-9 each) and accumulates in fp32; the reference is fp32 throughout. A CPU emulation of
 * exactly these roundings (nvfp4 weights, H=2048, I=512) gives a relative RMS error of 4.1e-3
 * and a max error of 3.7e-3 * max|ref|, so we require RMS(err) <= 1.2e-2 * RMS(ref) and per
 * element |err| <= 2e-2 * max|ref| + 2e-2 * |ref|. Indexing, permutation or scale errors give
 * O(1) relative errors and fail both. Unwritten outputs stay NaN (poisoned buffers) and fail.
 * Determinism: a second run must match bit for bit. Every case runs with every tile mode
 * (MOE_GROUPED_TILE_ROWS 64, with MOE_GROUPED_PIPE64, with MOE_GROUPED_PIPE64 |
 * MOE_GROUPED_PIPE64_COLS, and MOE_GROUPED_TILE_ROWS_SMALL 16) on the same inputs and one
 * reference; the three 64-row modes give the same bits (the CPU reference of the model-size cases is most of this
 * test's time). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "ktest.h"
#include "kweights.h"
#include "moe_grouped.h"
#include "test.h"

/* cases whose 16-row gate_up / down ran the pipelined NVFP4 kernel */
static int g_piped_gu, g_piped_dn;

/* one case: inputs, weights and the CPU reference made once, then both tile shapes
 * (MOE_GROUPED_TILE_ROWS, MOE_GROUPED_TILE_ROWS_SMALL) against them, each run twice (bitwise) */
static void test_grouped(int fmt, int gu_scale, int dn_scale, int n_tok, int n_exp, int k,
                         int hidden, int inter, int accumulate, int skew)
{
    struct kw_pair gu, dn;
    char what[128];
    kw_pair_make(&gu, fmt, gu_scale, n_exp, 2 * inter, hidden);
    kw_pair_make(&dn, fmt, dn_scale, n_exp, hidden, inter);
    g_piped_gu += moe_grouped_small_pipelined(&gu.dev);
    g_piped_dn += moe_grouped_small_pipelined(&dn.dev);
    size_t nx = (size_t)n_tok * hidden, ns = (size_t)n_tok * k;
    float *x = malloc(nx * 4), *w = malloc(ns * 4), *init = malloc(nx * 4), *ref = malloc(nx * 4),
          *got = malloc(nx * 4), *got2 = malloc(nx * 4);
    int32_t *ids = malloc(ns * 4);
    ktest_fill(x, nx, -1, 1);
    ktest_fill(w, ns, 0, 1);
    ktest_fill(init, nx, -1, 1);
    memcpy(ref, init, nx * 4);
    for (size_t i = 0; i < ns; i++) /* skew: most slots on experts 0 and 1 (multi-tile experts) */
        ids[i] = (int32_t)(ktest_u32() % (uint32_t)(skew && (i % 5) ? 2 : n_exp));
    if (ns > 3)
        ids[3] = -1; /* an empty slot */
    if (ns > 6)
        ids[6] = n_exp; /* out of range: contributes nothing */
    size_t wsf = moe_grouped_ws_floats(n_tok, k, n_exp, inter, hidden);
    float *dx = ktest_dev_from(x, nx * 4), *dw = ktest_dev_from(w, ns * 4);
    int32_t *di = ktest_dev_from(ids, ns * 4);
    CHECK_EQ_INT(moe_grouped_ref(ref, x, ids, w, n_tok, k, n_exp, &gu.host, &dn.host, accumulate),
                 0);
    double amax = 0, sr = 0;
    for (size_t i = 0; i < nx; i++) {
        amax = fabs(ref[i]) > amax ? fabs(ref[i]) : amax;
        sr += (double)ref[i] * ref[i];
    }
    const int shapes[4] = { MOE_GROUPED_TILE_ROWS, MOE_GROUPED_TILE_ROWS_SMALL,
                            MOE_GROUPED_TILE_ROWS | MOE_GROUPED_PIPE64,
                            MOE_GROUPED_TILE_ROWS | MOE_GROUPED_PIPE64 | MOE_GROUPED_PIPE64_COLS };
    float *got64 = malloc(nx * 4 + 4);
    for (int t = 0; t < 4; t++) {
        const int bm = shapes[t];
        float *dout = accumulate ? ktest_dev_from(init, nx * 4) : ktest_dev_poison(nx);
        float *dws = ktest_dev_poison(wsf);
        CHECK_EQ_INT(moe_grouped_cuda_tiles(dout, dws, dx, di, dw, n_tok, k, n_exp, &gu.dev,
                                            &dn.dev, accumulate, bm, 0),
                     0);
        ktest_to_host(got, dout, nx * 4);
        double se = 0;
        for (size_t i = 0; i < nx; i++)
            se += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
        double rel_rms = sr > 0 ? sqrt(se / sr) : sqrt(se);
        snprintf(what, sizeof(what),
                 "moe_grouped bm=%d%s fmt=%d sc=%d/%d tok=%d E=%d k=%d H=%d I=%d acc=%d%s",
                 bm & 0xff,
                 bm == MOE_GROUPED_TILE_ROWS || !moe_grouped_small_pipelined(&gu.dev) ? ""
                 : bm & MOE_GROUPED_PIPE64_COLS                                      ? " piped 1x4"
                                                                                     : " piped",
                 fmt, gu_scale, dn_scale, n_tok, n_exp, k, hidden, inter, accumulate,
                 skew ? " skew" : "");
        fprintf(stderr, "%s: rel_rms_err=%.2e max|ref|=%.3g\n", what, rel_rms, amax);
        CHECK(ktest_compare(what, got, ref, nx, 2e-2 * amax, 2e-2) == 0);
        CHECK(rel_rms <= 1.2e-2);
        /* determinism: same inputs, same bits */
        if (accumulate) {
            ktest_free(dout);
            dout = ktest_dev_from(init, nx * 4);
        }
        CHECK_EQ_INT(moe_grouped_cuda_tiles(dout, dws, dx, di, dw, n_tok, k, n_exp, &gu.dev,
                                            &dn.dev, accumulate, bm, 0),
                     0);
        ktest_to_host(got2, dout, nx * 4);
        CHECK(memcmp(got, got2, nx * 4) == 0);
        /* the 64-row modes (plain, pipelined, pipelined with 1 x 4 warps): the same bits */
        if (t == 0)
            memcpy(got64, got, nx * 4);
        else if (t >= 2)
            CHECK(memcmp(got, got64, nx * 4) == 0);
        ktest_free(dout), ktest_free(dws);
    }
    ktest_free(dx), ktest_free(dw), ktest_free(di);
    kw_pair_free(&gu);
    kw_pair_free(&dn);
    free(x), free(w), free(init), free(ref), free(got), free(got2), free(got64), free(ids);
}

int main(void)
{
    ktest_require_gpu();
    ktest_seed(23);
    /* KTEST_SMALL (tests/gpu/run.sh sets it for racecheck, whose shared-memory tracking makes
     * the model-size cases take minutes): the two model-size cases are left out; every kernel
     * and tile mode still runs on the smaller ones */
    const bool small = getenv("KTEST_SMALL") != NULL;
    /* bf16: I multiple of 8, fp8: of 16, nvfp4: of 32 (format chunk); none a multiple of 32/64
     * tiles where the format allows, H not a multiple of 64 */
    test_grouped(KW_FMT_BF16, 0, 0, 1, 8, 2, 264, 40, 0, 0);
    test_grouped(KW_FMT_BF16, 0, 0, 5, 16, 4, 264, 72, 1, 0);
    test_grouped(KW_FMT_BF16, 0, 0, 64, 8, 8, 136, 40, 0, 0);
    test_grouped(KW_FMT_BF16, 0, 0, 257, 8, 3, 264, 72, 1, 1);
    test_grouped(KW_FMT_FP8, KW_SCALE_CHANNEL, KW_SCALE_BLOCK, 1, 8, 2, 272, 48, 0, 0);
    test_grouped(KW_FMT_FP8, KW_SCALE_TENSOR, KW_SCALE_CHANNEL, 5, 32, 8, 272, 48, 1, 0);
    test_grouped(KW_FMT_FP8, KW_SCALE_BLOCK, KW_SCALE_BLOCK, 64, 16, 4, 400, 144, 0, 0);
    test_grouped(KW_FMT_FP8, KW_SCALE_CHANNEL, KW_SCALE_TENSOR, 129, 64, 8, 272, 80, 0, 1);
    test_grouped(KW_FMT_NVFP4, 0, 0, 1, 8, 8, 288, 96, 0, 0);
    test_grouped(KW_FMT_NVFP4, 0, 0, 5, 64, 8, 256, 160, 1, 0);
    test_grouped(KW_FMT_NVFP4, 0, 0, 64, 16, 4, 288, 96, 0, 0);
    /* skewed: ~300 slots on experts 0 and 1 (5 row tiles, the last partial), I not a multiple
     * of the 64-column tile */
    test_grouped(KW_FMT_NVFP4, 0, 0, 97, 32, 8, 512, 224, 1, 1);
    /* the model's H=2048, I=512 (64 K-steps in gate_up; the tolerance above is derived for it) */
    if (!small)
        test_grouped(KW_FMT_NVFP4, 0, 0, 33, 4, 2, 2048, 512, 0, 0);
    /* nvfp4 rows of 16-element multiples (not 32: odd scale-row strides) */
    test_grouped(KW_FMT_NVFP4, 0, 0, 64, 8, 4, 272, 48, 1, 0);
    /* a 64-sequence decode step of the model's experts: 512 slots over 256 experts */
    if (!small)
        test_grouped(KW_FMT_NVFP4, 0, 0, 64, 256, 8, 2048, 512, 1, 0);
    /* the pipelined NVFP4 16-row kernel (moe_grouped_small_pipelined): K % 128 == 64 in both
     * GEMMs, gate_up only with a partial column tile, skewed multi-tile experts */
    test_grouped(KW_FMT_NVFP4, 0, 0, 13, 8, 4, 320, 192, 1, 0);
    test_grouped(KW_FMT_NVFP4, 0, 0, 40, 4, 4, 256, 208, 0, 1);
    /* the pipelined kernel ran where the shapes allow (hidden or inter % 64 == 0): gate_up for
     * H = 256, 512, 2048 (twice), 320 and 256; down for I = 512 (twice) and 192 (small: not
     * the two H = 2048, I = 512 cases) */
    CHECK_EQ_INT(g_piped_gu, small ? 4 : 6);
    CHECK_EQ_INT(g_piped_dn, small ? 1 : 3);
    /* argument checks */
    {
        struct kw_pair gu, dn;
        kw_pair_make(&gu, KW_FMT_BF16, 0, 4, 2 * 40, 64);
        kw_pair_make(&dn, KW_FMT_BF16, 0, 4, 64, 40);
        float *d = ktest_dev_alloc(1 << 20);
        int32_t *di = ktest_dev_alloc(64);
        CHECK_EQ_INT(moe_grouped_cuda(d, d, d, di, d, 2, 2, 4096, &gu.dev, &dn.dev, 0, 0),
                     ERR_INVAL); /* too many experts */
        CHECK_EQ_INT(moe_grouped_cuda(d, d, d, di, d, 2, 2, 4, &dn.dev, &gu.dev, 0, 0),
                     ERR_INVAL); /* swapped weights: shape mismatch */
        CHECK_EQ_INT(moe_grouped_cuda(d, d + 1, d, di, d, 2, 2, 4, &gu.dev, &dn.dev, 0, 0),
                     ERR_INVAL); /* misaligned scratch */
        CHECK_EQ_INT(moe_grouped_cuda(d, d, d, di, d, 0, 2, 4, &gu.dev, &dn.dev, 0, 0), 0);
        CHECK_EQ_INT(moe_grouped_cuda_tiles(d, d, d, di, d, 2, 2, 4, &gu.dev, &dn.dev, 0, 32, 0),
                     ERR_INVAL); /* tile rows neither 64 nor 16 */
        ktest_free(d), ktest_free(di);
        kw_pair_free(&gu);
        kw_pair_free(&dn);
    }
    ktest_sync();
    return test_result();
}

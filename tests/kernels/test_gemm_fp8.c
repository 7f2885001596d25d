/* gemm_fp8 (cuBLASLt fp8 with per-token activation scales; bf16 for 128x128 block-scaled weights)
 * vs gemm_fp8_ref, which applies the same activation quantization (e4m3 per token, or bf16) and
 * accumulates in double. Remaining differences: fp32 accumulation order inside cuBLASLt, the
 * rare e4m3/bf16 rounding tie of an activation that the GPU rounds differently, and fp32
 * products of the scales. Expected relative RMS error ~1e-6; we require RMS(err) <= 1e-3 *
 * RMS(ref) and per element |err| <= 5e-3 * max|ref| + 5e-3 * |ref|. A missing activation
 * quantization alone gives ~2e-2 relative RMS error, a wrong scale O(1); both fail. Calls where
 * cuBLASLt had no fp8 algorithm (bf16 fallback, same products) are counted and printed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/err.h"
#include "gemm_fp8.h"
#include "ktest.h"
#include "kweights.h"
#include "test.h"

#define MAX_ROWS 300
#define MAX_N 1024
#define MAX_K 2048

static void test_fp8(struct gemm_fp8 *g, int rows, int n, int k, int scale_kind, int n_exp,
                     int expert, int acc)
{
    struct kw_pair w;
    char what[128];
    kw_pair_make(&w, KW_FMT_FP8, scale_kind, n_exp, n, k);
    size_t nx = (size_t)rows * k, ny = (size_t)rows * n;
    float *x = malloc(nx * 4), *ref = malloc(ny * 4), *got = malloc(ny * 4);
    ktest_fill(x, nx, -2, 2);
    if (rows > 2) /* a row of zeros (scale 0) and a row with one outlier */
        for (int c = 0; c < k; c++)
            x[(size_t)1 * k + c] = 0.0f;
    if (rows > 3)
        x[(size_t)2 * k + 5] = 100.0f;
    ktest_fill(ref, ny, -1, 1);
    float *dx = ktest_dev_from(x, nx * 4);
    float *dy = acc ? ktest_dev_from(ref, ny * 4) : ktest_dev_poison(ny);
    CHECK_EQ_INT(gemm_fp8_ref(ref, x, rows, &w.host, expert, acc), 0);
    int rc = gemm_fp8_cuda(g, dy, dx, rows, &w.dev, expert, acc, 0);
    CHECK_EQ_INT(rc, 0);
    ktest_to_host(got, dy, ny * 4);
    double amax = 0, se = 0, sr = 0;
    for (size_t i = 0; i < ny; i++) {
        amax = fabs(ref[i]) > amax ? fabs(ref[i]) : amax;
        se += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
        sr += (double)ref[i] * ref[i];
    }
    const double rel_rms = sr > 0 ? sqrt(se / sr) : sqrt(se);
    snprintf(what, sizeof(what), "gemm_fp8 rows=%d n=%d k=%d scale=%d E=%d e=%d acc=%d", rows, n, k,
             scale_kind, n_exp, expert, acc);
    fprintf(stderr, "%s: rc=%d rel_rms_err=%.2e max|ref|=%.3g bf16_fallbacks=%d\n", what, rc,
            rel_rms, amax, gemm_fp8_fallbacks(g));
    CHECK(ktest_compare(what, got, ref, ny, 5e-3 * amax, 5e-3) == 0);
    CHECK(rel_rms <= 1e-3);
    ktest_free(dx), ktest_free(dy);
    kw_pair_free(&w);
    free(x), free(ref), free(got);
}

int main(void)
{
    struct gemm_fp8 *g = NULL;
    ktest_require_gpu();
    ktest_seed(31);
    CHECK_EQ_INT(gemm_fp8_create(&g, MAX_ROWS, MAX_N, MAX_K, 32u << 20), 0);
    if (!g)
        return test_result();
    const int kinds[3] = {KW_SCALE_TENSOR, KW_SCALE_CHANNEL, KW_SCALE_BLOCK};
    for (int i = 0; i < 3; i++) {
        const int sk = kinds[i];
        test_fp8(g, 1, 16, 16, sk, 1, 0, 0);
        test_fp8(g, 7, 48, 64, sk, 1, 0, 1);
        test_fp8(g, 33, 272, 528, sk, 1, 0, 0);
        test_fp8(g, 17, MAX_N, MAX_K, sk, 1, 0, 1);   /* the largest weight the plan takes */
        test_fp8(g, 130, 208, 1040, sk, 1, 0, 1);     /* rows > 128, K % 128 == 16 */
        test_fp8(g, MAX_ROWS, 208, 528, sk, 1, 0, 0); /* the most rows, K % 128 == 16 */
        test_fp8(g, 1 + (int)(ktest_u32() % MAX_ROWS), 16 * (1 + (int)(ktest_u32() % 32)),
                 16 * (1 + (int)(ktest_u32() % 64)), sk, 2, 1, (int)(ktest_u32() & 1));
    }
    /* constraints */
    {
        struct kw_pair w;
        kw_pair_make(&w, KW_FMT_FP8, KW_SCALE_TENSOR, 1, 32, 48);
        float *d = ktest_dev_alloc(1 << 20);
        CHECK_EQ_INT(gemm_fp8_cuda(g, d, d, MAX_ROWS + 1, &w.dev, 0, 0, 0), ERR_INVAL);
        CHECK_EQ_INT(gemm_fp8_cuda(g, d, d + 1, 4, &w.dev, 0, 0, 0), ERR_INVAL); /* x align */
        w.dev.cols = 40; /* not a multiple of 16 */
        CHECK_EQ_INT(gemm_fp8_cuda(g, d, d, 4, &w.dev, 0, 0, 0), ERR_INVAL);
        w.dev.cols = 48;
        w.dev.rows = 24;
        CHECK_EQ_INT(gemm_fp8_cuda(g, d, d, 4, &w.dev, 0, 0, 0), ERR_INVAL);
        w.dev.rows = 32;
        w.dev.fmt = KW_FMT_BF16;
        CHECK_EQ_INT(gemm_fp8_cuda(g, d, d, 4, &w.dev, 0, 0, 0), ERR_INVAL);
        w.dev.fmt = KW_FMT_FP8;
        CHECK_EQ_INT(gemm_fp8_cuda(g, d, d, 0, &w.dev, 0, 0, 0), 0);
        ktest_free(d);
        kw_pair_free(&w);
    }
    /* the fp8 cuBLASLt path itself: a fallback passes the checks above (same math in bf16) but
     * means the fp8 GEMM never ran; reported here, not failed */
    fprintf(stderr, "gemm_fp8: calls that took the bf16 fallback: %d (0 = cuBLASLt fp8 ran)\n",
            gemm_fp8_fallbacks(g));
    gemm_fp8_destroy(g);
    ktest_sync();
    return test_result();
}

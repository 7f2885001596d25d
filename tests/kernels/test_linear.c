/* linear (kernels/linear.h): the runner's dense-layer dispatch target at 1, 8, 9, 64, 65 and 512 rows
 * in every weight format, both paths, against the CPU references:
 *   - GEMV path vs gemv_ref (exact weights, fp32 activations; the tolerances of test_gemv);
 *   - GEMM path vs linear_gemm_ref (the same bf16 roundings of x and W, double accumulation):
 *     atol 1e-4 sqrt(k) * max|y|, rtol 1e-3 (only the fp32 accumulation order differs);
 *   - GEMM path vs gemv_ref: what the bf16 roundings cost, printed, and bounded by 2e-2 of
 *     max|y| (x and W each carry 2^-9 relative rounding; a wrong scale, tile or chunk gives
 *     errors of order 1);
 *   - the split GEMM (x as two bf16 parts) vs gemv_ref: bf16 weights at the GEMV's tolerance,
 *     decoded weights within the 2e-2 bound;
 *   - the tiles path (nvfp4 only: the pipelined W4A16 tiles, 16-row up to 64 rows, 64-row above)
 *     vs linear_gemm_ref at the GEMM path's tolerance; refused (ERR_INVAL) for other formats and
 *     for widths that are not a multiple of 64;
 *   - the decoded bf16 rows vs linear_dequant_bf16_ref within one bf16 step (2^-8 relative:
 *     the device multiplies the nvfp4 scales in another order);
 * with a scratch small enough that fp8/nvfp4 weights are decoded in several row chunks (the
 * last one partial). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/err.h"
#include "gemv.h"
#include "kdtype.h"
#include "ktest.h"
#include "kweights.h"
#include "linear.h"
#include "test.h"

static double max_abs(const float *y, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)y[i]));
    return m;
}

static void one(struct linear_ctx *c, const char *fname, int fmt, int sk, int rows, int cols,
                int n)
{
    struct kw_pair w;
    char what[128];
    kw_pair_make(&w, fmt, sk, 1, rows, cols);
    const size_t ny = (size_t)n * rows;
    float *x = malloc(sizeof(float) * (size_t)n * cols), *ref = malloc(sizeof(float) * ny);
    float *refg = malloc(sizeof(float) * ny), *got = malloc(sizeof(float) * ny);
    ktest_fill(x, (size_t)n * cols, -1, 1);
    float *dx = ktest_dev_from(x, sizeof(float) * (size_t)n * cols);
    float *dy = ktest_dev_poison(ny);
    CHECK_EQ_INT(gemv_ref(ref, &w.host, 0, x, n), 0);
    CHECK_EQ_INT(linear_gemm_ref(refg, &w.host, 0, x, n), 0);
    const double amax = max_abs(ref, ny);
    /* GEMV path */
    CHECK_EQ_INT(linear_cuda(c, dy, &w.dev, 0, dx, n, LINEAR_PATH_GEMV, 0), 0);
    ktest_to_host(got, dy, sizeof(float) * ny);
    snprintf(what, sizeof what, "linear gemv %s %dx%d n=%d", fname, rows, cols, n);
    CHECK(ktest_compare(what, got, ref, ny, 2e-4 * sqrt((double)cols) * amax, 2e-3) == 0);
    /* GEMM path */
    ktest_free(dy);
    dy = ktest_dev_poison(ny);
    CHECK_EQ_INT(linear_cuda(c, dy, &w.dev, 0, dx, n, LINEAR_PATH_GEMM, 0), 0);
    ktest_to_host(got, dy, sizeof(float) * ny);
    snprintf(what, sizeof what, "linear gemm %s %dx%d n=%d vs gemm_ref", fname, rows, cols, n);
    CHECK(ktest_compare(what, got, refg, ny, 1e-4 * sqrt((double)cols) * amax, 1e-3) == 0);
    double worst = 0;
    for (size_t i = 0; i < ny; i++)
        worst = fmax(worst, fabs((double)got[i] - ref[i]));
    printf("linear gemm %s %dx%d n=%d: max|gemm - exact| = %.3g of max|y| %.3g\n", fname, rows,
           cols, n, worst / amax, amax);
    CHECK(worst <= 2e-2 * amax);
    /* split GEMM (the lm_head's): x to ~16 bits, so a bf16 weight matches the exact product at
     * the GEMV's tolerance; decoded fp8/nvfp4 weights keep their bf16 rounding (2e-2 bound) */
    ktest_free(dy);
    dy = ktest_dev_poison(ny);
    CHECK_EQ_INT(linear_cuda(c, dy, &w.dev, 0, dx, n, LINEAR_PATH_GEMM_SPLIT, 0), 0);
    ktest_to_host(got, dy, sizeof(float) * ny);
    snprintf(what, sizeof what, "linear gemm_split %s %dx%d n=%d vs exact", fname, rows, cols, n);
    if (fmt == KW_FMT_BF16) {
        CHECK(ktest_compare(what, got, ref, ny, 2e-4 * sqrt((double)cols) * amax, 2e-3) == 0);
    } else {
        double ws = 0;
        for (size_t i = 0; i < ny; i++)
            ws = fmax(ws, fabs((double)got[i] - ref[i]));
        printf("%s: max|split - exact| = %.3g of max|y|\n", what, ws / amax);
        CHECK(ws <= 2e-2 * amax);
    }
    /* tiles path: nvfp4 with cols % 64 == 0 only */
    ktest_free(dy);
    dy = ktest_dev_poison(ny);
    const int trc = linear_cuda(c, dy, &w.dev, 0, dx, n, LINEAR_PATH_TILES, 0);
    CHECK_EQ_INT(linear_tiles_ok(&w.dev), fmt == KW_FMT_NVFP4 && cols % 64 == 0);
    if (linear_tiles_ok(&w.dev)) {
        CHECK_EQ_INT(trc, 0);
        ktest_to_host(got, dy, sizeof(float) * ny);
        snprintf(what, sizeof what, "linear tiles %s %dx%d n=%d vs gemm_ref", fname, rows, cols, n);
        CHECK(ktest_compare(what, got, refg, ny, 1e-4 * sqrt((double)cols) * amax, 1e-3) == 0);
        /* no context needed */
        CHECK_EQ_INT(linear_cuda(NULL, dy, &w.dev, 0, dx, n, LINEAR_PATH_TILES, 0), 0);
    } else {
        CHECK_EQ_INT(trc, ERR_INVAL);
    }
    ktest_free(dx);
    ktest_free(dy);
    free(x), free(ref), free(refg), free(got);
    kw_pair_free(&w);
}

static void dequant(const char *fname, int fmt, int sk, int rows, int cols, int r0, int nr)
{
    struct kw_pair w;
    kw_pair_make(&w, fmt, sk, 2, rows, cols);
    const size_t ne = (size_t)nr * cols;
    uint16_t *ref = malloc(2 * ne), *got = malloc(2 * ne);
    float *fr = malloc(4 * ne), *fg = malloc(4 * ne);
    uint16_t *d = ktest_dev_alloc(2 * ne);
    CHECK_EQ_INT(linear_dequant_bf16_ref(ref, &w.host, 1, r0, nr), 0);
    CHECK_EQ_INT(linear_dequant_bf16_cuda(d, &w.dev, 1, r0, nr, 0), 0);
    ktest_to_host(got, d, 2 * ne);
    for (size_t i = 0; i < ne; i++) {
        fr[i] = kdtype_bf16_to_f32(ref[i]);
        fg[i] = kdtype_bf16_to_f32(got[i]);
    }
    char what[96];
    snprintf(what, sizeof what, "linear_dequant %s rows %d..%d", fname, r0, r0 + nr - 1);
    CHECK(ktest_compare(what, fg, fr, ne, 0, 1.0 / 256) == 0);
    ktest_free(d);
    free(ref), free(got), free(fr), free(fg);
    kw_pair_free(&w);
}

int main(void)
{
    ktest_require_gpu();
    ktest_seed(17);
    static const struct {
        const char *name;
        int fmt, sk;
    } F[] = {
        { "bf16", KW_FMT_BF16, KW_SCALE_NONE },
        { "fp8-tensor", KW_FMT_FP8, KW_SCALE_TENSOR },
        { "fp8-channel", KW_FMT_FP8, KW_SCALE_CHANNEL },
        { "fp8-block", KW_FMT_FP8, KW_SCALE_BLOCK },
        { "nvfp4", KW_FMT_NVFP4, KW_SCALE_NONE },
    };
    static const int N[] = { 1, 8, 9, 64, 65, 512 };
    /* scratch of 48 rows of 1024 columns: a 200-row fp8/nvfp4 weight goes in 5 chunks */
    struct linear_ctx *c = NULL;
    CHECK_EQ_INT(linear_ctx_create(&c, 512, 1024, 48 * 1024, 8u << 20), 0);
    if (!c)
        return test_result();
    for (size_t f = 0; f < sizeof F / sizeof F[0]; f++) {
        for (size_t i = 0; i < sizeof N / sizeof N[0]; i++)
            one(c, F[f].name, F[f].fmt, F[f].sk, 200, 1024, N[i]);
        one(c, F[f].name, F[f].fmt, F[f].sk, 48, 272, 33); /* odd width (K % 32 = 16) */
        dequant(F[f].name, F[f].fmt, F[f].sk, 200, 1024, 37, 100);
    }
    /* refusals: too many rows, too wide, a path that does not exist */
    {
        struct kw_pair w;
        kw_pair_make(&w, KW_FMT_BF16, KW_SCALE_NONE, 1, 16, 2048);
        float *d = ktest_dev_alloc(4 * 600 * 2048);
        CHECK_EQ_INT(linear_cuda(c, d, &w.dev, 0, d, 4, LINEAR_PATH_GEMM, 0), ERR_INVAL);
        kw_pair_free(&w);
        kw_pair_make(&w, KW_FMT_BF16, KW_SCALE_NONE, 1, 16, 512);
        CHECK_EQ_INT(linear_cuda(c, d, &w.dev, 0, d, 513, LINEAR_PATH_GEMM, 0), ERR_INVAL);
        CHECK_EQ_INT(linear_cuda(c, d, &w.dev, 0, d, 513, LINEAR_PATH_GEMM_SPLIT, 0), ERR_INVAL);
        CHECK_EQ_INT(linear_cuda(c, d, &w.dev, 0, d, 4, 7, 0), ERR_INVAL);
        CHECK_EQ_INT(linear_cuda(NULL, d, &w.dev, 0, d, 4, LINEAR_PATH_GEMM, 0), ERR_INVAL);
        kw_pair_free(&w);
        ktest_free(d);
    }
    linear_ctx_destroy(c);
    ktest_sync();
    return test_result();
}

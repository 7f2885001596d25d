/* gemv: GPU vs reference for bf16, fp8 (tensor/channel/block 128x128) and nvfp4 weights, odd
 * row counts, several token counts (tile tails), an expert inside a stack, and bad arguments. */
#include <stdio.h>
#include <stdlib.h>

#include "common/err.h"
#include "gemv.h"
#include "ktest.h"
#include "kweights.h"
#include "test.h"

static void run_path(int fmt, int scale_kind, int n_experts, int expert, int rows, int cols,
                     int n_tok, int path)
{
    struct kw_pair w;
    char what[128];
    float *x = malloc(sizeof(float) * (size_t)n_tok * cols);
    float *ref = malloc(sizeof(float) * (size_t)n_tok * rows);
    float *got = malloc(sizeof(float) * (size_t)n_tok * rows);
    float *dx, *dy;
    double amax = 0;
    kw_pair_make(&w, fmt, scale_kind, n_experts, rows, cols);
    ktest_fill(x, (size_t)n_tok * cols, -2.0f, 2.0f);
    dx = ktest_dev_from(x, sizeof(float) * (size_t)n_tok * cols);
    dy = ktest_dev_poison((size_t)n_tok * rows);
    CHECK_EQ_INT(gemv_ref(ref, &w.host, expert, x, n_tok), 0);
    CHECK_EQ_INT(gemv_cuda_path(dy, &w.dev, expert, dx, n_tok, path, 0), 0);
    ktest_to_host(got, dy, sizeof(float) * (size_t)n_tok * rows);
    for (int i = 0; i < n_tok * rows; i++)
        amax = fabs(ref[i]) > amax ? fabs(ref[i]) : amax;
    snprintf(what, sizeof(what), "gemv fmt=%d scale=%d e=%d/%d rows=%d cols=%d tok=%d path=%d", fmt,
             scale_kind, expert, n_experts, rows, cols, n_tok, path);
    /* the tensor-core path rounds activations to fp16 (2^-11 relative) */
    if (path == GEMV_PATH_TENSOR ||
        (path == GEMV_PATH_AUTO && fmt == KW_FMT_NVFP4 && cols % 128 == 0))
        CHECK(ktest_compare(what, got, ref, (size_t)n_tok * rows, 1e-3 * amax, 1e-3) == 0);
    else
        CHECK(ktest_compare(what, got, ref, (size_t)n_tok * rows, 1e-5 * amax, 1e-4) == 0);
    ktest_free(dx);
    ktest_free(dy);
    kw_pair_free(&w);
    free(x);
    free(ref);
    free(got);
}

static void run_case(int fmt, int scale_kind, int n_experts, int expert, int rows, int cols,
                     int n_tok)
{
    run_path(fmt, scale_kind, n_experts, expert, rows, cols, n_tok, GEMV_PATH_CORES);
    if (fmt == KW_FMT_NVFP4 && cols % 128 == 0)
        run_path(fmt, scale_kind, n_experts, expert, rows, cols, n_tok, GEMV_PATH_TENSOR);
}

int main(void)
{
    static const int toks[] = {1, 3, 4, 9};
    ktest_require_gpu();
    ktest_seed(42);
    for (size_t i = 0; i < sizeof(toks) / sizeof(toks[0]); i++) {
        int t = toks[i];
        run_case(KW_FMT_BF16, 0, 1, 0, 37, 64, t);
        run_case(KW_FMT_BF16, 0, 1, 0, 301, 2056, t);
        run_case(KW_FMT_FP8, KW_SCALE_TENSOR, 1, 0, 133, 272, t);
        run_case(KW_FMT_FP8, KW_SCALE_CHANNEL, 1, 0, 70, 1024, t);
        run_case(KW_FMT_FP8, KW_SCALE_BLOCK, 1, 0, 259, 400, t);
        run_case(KW_FMT_NVFP4, 0, 1, 0, 45, 96, t);
        run_case(KW_FMT_NVFP4, 0, 1, 0, 517, 2048, t);
        run_case(KW_FMT_NVFP4, 0, 1, 0, 255, 512, t);
    }
    run_case(KW_FMT_NVFP4, 0, 3, 2, 130, 512, 2);
    run_case(KW_FMT_BF16, 0, 3, 1, 33, 256, 1);
    run_case(KW_FMT_FP8, KW_SCALE_BLOCK, 2, 1, 200, 384, 5);
    run_case(KW_FMT_NVFP4, 0, 1, 0, 1000, 4096, 64);
    run_case(KW_FMT_NVFP4, 0, 1, 0, 77, 640, 13);
    run_case(KW_FMT_NVFP4, 0, 2, 1, 40, 2048, 71); /* two token groups of 64 */
    run_path(KW_FMT_NVFP4, 0, 1, 0, 33, 256, 5, GEMV_PATH_AUTO);
    run_path(KW_FMT_NVFP4, 0, 1, 0, 33, 256, 1, GEMV_PATH_AUTO);
    run_path(KW_FMT_BF16, 0, 1, 0, 33, 256, 2, GEMV_PATH_AUTO);

    /* bad arguments */
    {
        struct kw_pair w;
        float *d = ktest_dev_alloc(4096);
        kw_pair_make(&w, KW_FMT_NVFP4, 0, 1, 8, 64);
        w.dev.cols = 48; /* not a multiple of 32 */
        CHECK_EQ_INT(gemv_cuda(d, &w.dev, 0, d, 1, 0), ERR_INVAL);
        w.dev.cols = 64;
        CHECK_EQ_INT(gemv_cuda(d, &w.dev, 0, d + 1, 1, 0), ERR_INVAL); /* misaligned x */
        CHECK_EQ_INT(gemv_cuda(d, &w.dev, 0, d, 0, 0), ERR_INVAL);
        CHECK_EQ_INT(gemv_cuda_path(d, &w.dev, 0, d, 1, GEMV_PATH_TENSOR, 0), ERR_UNSUPPORTED);
        ktest_free(d);
        kw_pair_free(&w);
    }
    ktest_sync();
    return test_result();
}

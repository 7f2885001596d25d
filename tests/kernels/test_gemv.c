/* gemv: GPU vs reference for bf16, fp8 (tensor/channel/block 128x128) and nvfp4 weights, odd
 * row counts, several token counts (tile tails), an expert inside a stack, and bad arguments.
 * nvfp4 also on K % 32 == 16 (48, 208, 2064 columns), on views with padded row strides (8-byte
 * aligned rows), and through every path: CUDA cores, tensor (mma), stream (1..8 tokens; also
 * fp8). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "gemv.h"
#include "ktest.h"
#include "kweights.h"
#include "test.h"

/* The stream kernel's limits: 1..8 tokens whose fp16 rows fit its 68 KB of shared memory
 * (NVS_MAX_DYN_SMEM). */
static int stream_fits(int cols, int n_tok)
{
    return n_tok <= 8 && (size_t)n_tok * ((cols + 127) / 128 * 128 + 32) * 2 + 16 <= 68 * 1024;
}

/* cols_alloc > cols: the weight is a view of the first cols columns of a wider one (row_stride =
 * cols_alloc), as a checkpoint with padded rows would give. */
static void run_path_view(int fmt, int scale_kind, int n_experts, int expert, int rows, int cols,
                          int cols_alloc, int n_tok, int path)
{
    struct kw_pair w;
    char what[128];
    float *x = malloc(sizeof(float) * (size_t)n_tok * cols);
    float *ref = malloc(sizeof(float) * (size_t)n_tok * rows);
    float *got = malloc(sizeof(float) * (size_t)n_tok * rows);
    float *dx, *dy;
    double amax = 0;
    kw_pair_make(&w, fmt, scale_kind, n_experts, rows, cols_alloc);
    w.host.cols = w.dev.cols = cols;
    ktest_fill(x, (size_t)n_tok * cols, -2.0f, 2.0f);
    dx = ktest_dev_from(x, sizeof(float) * (size_t)n_tok * cols);
    dy = ktest_dev_poison((size_t)n_tok * rows);
    CHECK_EQ_INT(gemv_ref(ref, &w.host, expert, x, n_tok), 0);
    CHECK_EQ_INT(gemv_cuda_path(dy, &w.dev, expert, dx, n_tok, path, 0), 0);
    ktest_to_host(got, dy, sizeof(float) * (size_t)n_tok * rows);
    for (int i = 0; i < n_tok * rows; i++)
        amax = fabs(ref[i]) > amax ? fabs(ref[i]) : amax;
    snprintf(what, sizeof(what), "gemv fmt=%d scale=%d e=%d/%d rows=%d cols=%d/%d tok=%d path=%d",
             fmt, scale_kind, expert, n_experts, rows, cols, cols_alloc, n_tok, path);
    /* the tensor-core and stream paths round activations to fp16 (2^-11 relative, random signs:
     * the error of a dot is ~1e-4 of the largest output); weights are exact in fp16 */
    if (path == GEMV_PATH_TENSOR || path == GEMV_PATH_STREAM ||
        (path == GEMV_PATH_AUTO &&
         (fmt == KW_FMT_NVFP4 || (fmt == KW_FMT_FP8 && stream_fits(cols, n_tok)))))
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

static void run_path(int fmt, int scale_kind, int n_experts, int expert, int rows, int cols,
                     int n_tok, int path)
{
    run_path_view(fmt, scale_kind, n_experts, expert, rows, cols, cols, n_tok, path);
}

/* Every path that accepts the shape. The tensor path needs cols % 128 and 16-byte aligned rows,
 * the stream path 1..8 tokens and staged activations within its shared memory (checked below
 * with an explicit ERR_UNSUPPORTED case). */
static void run_view(int fmt, int scale_kind, int n_experts, int expert, int rows, int cols,
                     int cols_alloc, int n_tok)
{
    run_path_view(fmt, scale_kind, n_experts, expert, rows, cols, cols_alloc, n_tok,
                  GEMV_PATH_CORES);
    if (fmt != KW_FMT_NVFP4 && n_tok == 1 &&
        (fmt == KW_FMT_BF16 || scale_kind != KW_SCALE_BLOCK || cols % 16 == 0)) /* the row kernel */
        run_path_view(fmt, scale_kind, n_experts, expert, rows, cols, cols_alloc, n_tok,
                      GEMV_PATH_ROWS);
    if (fmt == KW_FMT_BF16)
        run_path_view(fmt, scale_kind, n_experts, expert, rows, cols, cols_alloc, n_tok,
                      GEMV_PATH_AUTO);
    if (fmt == KW_FMT_FP8 && stream_fits(cols, n_tok)) /* fixtures: 128x128 blocks */
        run_path_view(fmt, scale_kind, n_experts, expert, rows, cols, cols_alloc, n_tok,
                      GEMV_PATH_STREAM);
    if (fmt != KW_FMT_NVFP4)
        return;
    if (cols % 128 == 0 && cols_alloc % 128 == 0) /* also 8-byte aligned scale rows */
        run_path_view(fmt, scale_kind, n_experts, expert, rows, cols, cols_alloc, n_tok,
                      GEMV_PATH_TENSOR);
    if (stream_fits(cols, n_tok))
        run_path_view(fmt, scale_kind, n_experts, expert, rows, cols, cols_alloc, n_tok,
                      GEMV_PATH_STREAM);
    run_path_view(fmt, scale_kind, n_experts, expert, rows, cols, cols_alloc, n_tok,
                  GEMV_PATH_AUTO);
}

static void run_case(int fmt, int scale_kind, int n_experts, int expert, int rows, int cols,
                     int n_tok)
{
    run_view(fmt, scale_kind, n_experts, expert, rows, cols, cols, n_tok);
}

/* gemv_multi_cuda: n weights (bf16, then the formats in fmts) of the same cols in one launch vs
 * gemv_ref of each, at the CUDA-core tolerance (the wide kernel is fp32 on the cores) */
static void run_multi_kind(int n, const int *fmts, const int *rows, int cols, int n_tok, int same_e,
                           int want_kind)
{
    struct kw_pair w[GEMV_MULTI_MAX];
    struct gemv_out o[GEMV_MULTI_MAX];
    float *x = malloc(sizeof(float) * (size_t)n_tok * cols);
    ktest_fill(x, (size_t)n_tok * cols, -2.0f, 2.0f);
    float *dx = ktest_dev_from(x, sizeof(float) * (size_t)n_tok * cols);
    for (int i = 0; i < n; i++) {
        kw_pair_make(&w[i], fmts[i], fmts[i] == KW_FMT_FP8 ? KW_SCALE_CHANNEL : 0, 2, rows[i],
                     cols);
        o[i] = (struct gemv_out){ &w[i].dev, same_e ? 1 : i % 2,
                                  ktest_dev_poison((size_t)n_tok * rows[i]) };
    }
    CHECK_EQ_INT(gemv_multi_cuda(o, n, dx, n_tok, 0), 0);
    /* 2..3 nvfp4 (or fp8) weights with one expert index run the stream kernel (fp16
     * activations), also when bf16 weights follow them (those a warp per row, fp32) */
    const int kind = gemv_multi_kind(o, n, n_tok);
    if (want_kind >= 0)
        CHECK_EQ_INT(kind, want_kind);
    for (int i = 0; i < n; i++) {
        const bool f16 = (kind == GEMV_MULTI_STREAM || kind == GEMV_MULTI_STREAM_WIDE) &&
                         (fmts[i] == KW_FMT_NVFP4 || fmts[i] == KW_FMT_FP8);
        const size_t ny = (size_t)n_tok * rows[i];
        float *ref = malloc(sizeof(float) * ny), *got = malloc(sizeof(float) * ny);
        double amax = 0;
        char what[96];
        CHECK_EQ_INT(gemv_ref(ref, &w[i].host, o[i].expert, x, n_tok), 0);
        ktest_to_host(got, o[i].y, sizeof(float) * ny);
        for (size_t j = 0; j < ny; j++)
            amax = fabs(ref[j]) > amax ? fabs(ref[j]) : amax;
        snprintf(what, sizeof what, "gemv_multi %d/%d fmt=%d rows=%d cols=%d tok=%d", i, n,
                 fmts[i], rows[i], cols, n_tok);
        CHECK(ktest_compare(what, got, ref, ny, (f16 ? 1e-3 : 1e-5) * amax, f16 ? 1e-3 : 1e-4) ==
              0);
        if (f16) {
            /* what gemv_cuda computes for this weight alone: the same products, bit for bit
             * where that launch is the 8-warp form (dev/cuda/emu/emu_gemv.cpp checks it); a
             * grid of at most one block an SM (every shape here) takes the 16-warp form, whose
             * K-split warps add them in another order: fp32 rounding apart */
            float *dy1 = ktest_dev_poison(ny), *one = malloc(sizeof(float) * ny);
            CHECK_EQ_INT(gemv_cuda(dy1, &w[i].dev, o[i].expert, dx, n_tok, 0), 0);
            ktest_to_host(one, dy1, sizeof(float) * ny);
            snprintf(what, sizeof what, "gemv_multi %d/%d vs its own launch", i, n);
            CHECK(ktest_compare(what, got, one, ny, 1e-5 * amax, 1e-5) == 0);
            ktest_free(dy1);
            free(one);
        }
        if (kind == GEMV_MULTI_ROWS) {
            /* the row kernel on this weight alone: the same sums in the same order, bit for bit */
            float *dy1 = ktest_dev_poison(ny), *one = malloc(sizeof(float) * ny);
            CHECK_EQ_INT(gemv_cuda_path(dy1, &w[i].dev, o[i].expert, dx, n_tok, GEMV_PATH_ROWS, 0),
                         0);
            ktest_to_host(one, dy1, sizeof(float) * ny);
            snprintf(what, sizeof what, "gemv_multi %d/%d vs its own row launch", i, n);
            CHECK(ktest_compare(what, got, one, ny, 0.0, 0.0) == 0);
            ktest_free(dy1);
            free(one);
        }
        ktest_free(o[i].y);
        kw_pair_free(&w[i]);
        free(ref);
        free(got);
    }
    ktest_free(dx);
    free(x);
}

static void run_multi(int n, const int *fmts, const int *rows, int cols, int n_tok, int same_e)
{
    run_multi_kind(n, fmts, rows, cols, n_tok, same_e, -1);
}

int main(void)
{
    static const int toks[] = {1, 2, 3, 4, 8, 9};
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
        /* K % 32 == 16: 8-byte aligned rows, partial last chunk */
        run_case(KW_FMT_NVFP4, 0, 1, 0, 45, 48, t);
        run_case(KW_FMT_NVFP4, 0, 1, 0, 133, 208, t);
        run_case(KW_FMT_NVFP4, 0, 1, 0, 70, 2064, t);
        run_case(KW_FMT_NVFP4, 0, 3, 1, 29, 80, t); /* expert stride % 32 == 16 */
        /* padded views: stride % 32 == 16 with cols % 32 == 0, and 16-byte strides > cols */
        run_view(KW_FMT_NVFP4, 0, 1, 0, 97, 512, 528, t);
        run_view(KW_FMT_NVFP4, 0, 2, 1, 33, 256, 288, t);
        run_view(KW_FMT_NVFP4, 0, 1, 0, 50, 96, 112, t);
    }
    /* stream kernel: one row, long K (two rounds of 4 chunks per warp), 8 K-splits */
    run_case(KW_FMT_NVFP4, 0, 1, 0, 1, 48, 1);
    run_case(KW_FMT_NVFP4, 0, 1, 0, 300, 8192, 1);
    run_case(KW_FMT_NVFP4, 0, 1, 0, 300, 8192, 2);
    run_case(KW_FMT_NVFP4, 0, 1, 0, 1000, 4096, 4);
    run_case(KW_FMT_NVFP4, 0, 1, 0, 2048, 512, 1);
    run_case(KW_FMT_NVFP4, 0, 1, 0, 1024, 2048, 1);
    run_case(KW_FMT_NVFP4, 0, 4, 3, 1024, 2048, 8);
    run_case(KW_FMT_NVFP4, 0, 1, 0, 64, 8192, 5); /* stream does not fit: AUTO falls back */
    /* staged activations past the 48 KB default (the launch opts in): the out projections'
     * shape at 8 tokens (16-warp form), 5 tokens over more row blocks than SMs (8-warp form) */
    run_case(KW_FMT_NVFP4, 0, 1, 0, 2048, 4096, 8);
    run_case(KW_FMT_NVFP4, 0, 1, 0, 2200, 4096, 5);
    /* more row blocks than an H200 has SMs: the 8-warp form (the shapes above take the 16-warp
     * one, nvfp4_stream.cuh) */
    run_case(KW_FMT_NVFP4, 0, 1, 0, 4500, 2048, 2);
    /* fp8 stream: K % 128 != 0 with block scales, a stack, long K, 8 tokens */
    run_case(KW_FMT_FP8, KW_SCALE_BLOCK, 1, 0, 300, 1040, 8);
    run_case(KW_FMT_FP8, KW_SCALE_CHANNEL, 3, 2, 129, 2048, 2);
    run_case(KW_FMT_FP8, KW_SCALE_TENSOR, 1, 0, 77, 8192, 1);
    run_case(KW_FMT_FP8, KW_SCALE_BLOCK, 2, 1, 1000, 4096, 4);
    run_case(KW_FMT_NVFP4, 0, 3, 2, 130, 512, 2);
    run_case(KW_FMT_BF16, 0, 3, 1, 33, 256, 1);
    /* the bf16 row kernel: model shapes (out projection 2048 x 4096: two warps a row), a row
     * of four warps, two rounds of eight (K = 20000), a stack, padded rows, odd row counts */
    run_case(KW_FMT_BF16, 0, 1, 0, 2048, 4096, 1);
    run_case(KW_FMT_BF16, 0, 1, 0, 1031, 2048, 1);
    run_case(KW_FMT_BF16, 0, 1, 0, 515, 8200, 1);
    run_case(KW_FMT_BF16, 0, 1, 0, 37, 20000, 1);
    run_case(KW_FMT_BF16, 0, 1, 0, 9001, 2048, 1); /* more blocks than an SM count holds at once */
    run_case(KW_FMT_BF16, 0, 3, 2, 600, 520, 1);
    run_view(KW_FMT_BF16, 0, 2, 1, 700, 1000, 1008, 1);
    /* the fp8 row kernel: 128 x 128 block scales (the FP8 model's), channel, a stack */
    run_case(KW_FMT_FP8, KW_SCALE_BLOCK, 1, 0, 2048, 4096, 1);
    run_case(KW_FMT_FP8, KW_SCALE_BLOCK, 3, 2, 1031, 2048, 1);
    run_case(KW_FMT_FP8, KW_SCALE_CHANNEL, 2, 1, 600, 8208, 1);
    run_case(KW_FMT_FP8, KW_SCALE_TENSOR, 1, 0, 777, 20000, 1);
    run_case(KW_FMT_FP8, KW_SCALE_BLOCK, 2, 1, 200, 384, 5);
    run_case(KW_FMT_NVFP4, 0, 1, 0, 1000, 4096, 64);
    run_case(KW_FMT_NVFP4, 0, 1, 0, 77, 640, 13);
    run_case(KW_FMT_NVFP4, 0, 2, 1, 40, 2048, 71); /* two token groups of 64 */
    run_path(KW_FMT_NVFP4, 0, 1, 0, 33, 256, 5, GEMV_PATH_AUTO);
    run_path(KW_FMT_NVFP4, 0, 1, 0, 33, 256, 1, GEMV_PATH_AUTO);
    run_path(KW_FMT_BF16, 0, 1, 0, 33, 256, 2, GEMV_PATH_AUTO);
    run_path(KW_FMT_FP8, KW_SCALE_CHANNEL, 1, 0, 33, 256, 3, GEMV_PATH_AUTO);
    run_path(KW_FMT_FP8, KW_SCALE_BLOCK, 1, 0, 33, 256, 12, GEMV_PATH_AUTO);

    {
        const int bb[2] = { KW_FMT_BF16, KW_FMT_BF16 }, mix[4] = { KW_FMT_BF16, KW_FMT_FP8,
                                                                    KW_FMT_NVFP4, KW_FMT_NVFP4 };
        const int ba[2] = { 32, 32 }, rg[2] = { 256, 2 }, r4[4] = { 17, 40, 5, 512 };
        const int nn[3] = { KW_FMT_NVFP4, KW_FMT_NVFP4, KW_FMT_NVFP4 };
        const int qz[2] = { 1024, 512 }, qkv[3] = { 512, 64, 64 }, odd[3] = { 33, 70, 17 };
        run_multi(2, bb, ba, 2048, 1, 0); /* the GDN b + a */
        run_multi(2, bb, rg, 2048, 4, 0); /* router + shared-expert gate */
        run_multi(4, mix, r4, 208, 8, 0); /* formats mixed, narrow nvfp4, the row limit */
        run_multi(4, mix, r4, 256, 3, 0);
        /* nvfp4: the stream kernel, one launch (qkv + z, q + k + v), K % 32 == 16 too */
        run_multi(2, nn, qz, 2048, 1, 1);
        run_multi(3, nn, qkv, 2048, 2, 1);
        run_multi(3, nn, odd, 208, 8, 1);
        run_multi(2, nn, odd, 256, 1, 0); /* experts differ: the wide kernel */
        /* nvfp4 then bf16 (the GDN qkv, z, b, a): one stream launch, the bf16 rows a warp each */
        const int nnbb[4] = {KW_FMT_NVFP4, KW_FMT_NVFP4, KW_FMT_BF16, KW_FMT_BF16};
        const int nnnb[4] = {KW_FMT_NVFP4, KW_FMT_NVFP4, KW_FMT_NVFP4, KW_FMT_BF16};
        const int qzba[4] = {1024, 512, 32, 32}, odd4[4] = {33, 70, 17, 13};
        run_multi_kind(4, nnbb, qzba, 2048, 1, 1, GEMV_MULTI_STREAM_WIDE);
        run_multi_kind(4, nnbb, qzba, 2048, 3, 1, GEMV_MULTI_STREAM_WIDE);
        run_multi_kind(3, nnbb, odd4, 208, 8, 1, GEMV_MULTI_STREAM_WIDE); /* 8-byte loads */
        run_multi_kind(4, nnnb, odd4, 256, 2, 1, GEMV_MULTI_STREAM_WIDE);
        /* fp8 (channel scales): the same, the stream kernel's fp8 form in one launch */
        const int ff[3] = {KW_FMT_FP8, KW_FMT_FP8, KW_FMT_FP8};
        const int ffbb[4] = {KW_FMT_FP8, KW_FMT_FP8, KW_FMT_BF16, KW_FMT_BF16};
        run_multi_kind(2, ff, qz, 2048, 2, 1, GEMV_MULTI_STREAM);
        run_multi_kind(3, ff, qkv, 2048, 2, 1, GEMV_MULTI_STREAM);
        run_multi_kind(3, ff, odd, 208, 8, 1, GEMV_MULTI_STREAM); /* K % 128 != 0 */
        run_multi_kind(4, ffbb, qzba, 2048, 3, 1, GEMV_MULTI_STREAM_WIDE);
        run_multi_kind(4, ffbb, odd4, 208, 3, 1, GEMV_MULTI_STREAM_WIDE);
        /* ... at one token with a weight past GEMV_WIDE_MAX_ROWS: the row kernel where AUTO
         * takes it for fp8 (GEMV_FP8_ROWS_AUTO), fp8 and bf16 blocks in one launch (the FP8
         * model's GDN qkv, z, b, a) */
        run_multi_kind(2, ff, qz, 2048, 1, 1,
                       GEMV_FP8_ROWS_AUTO ? GEMV_MULTI_ROWS : GEMV_MULTI_STREAM);
        run_multi_kind(4, ffbb, qzba, 2048, 1, 1,
                       GEMV_FP8_ROWS_AUTO ? GEMV_MULTI_ROWS : GEMV_MULTI_STREAM_WIDE);
        run_multi_kind(3, ff, odd, 208, 1, 1, GEMV_MULTI_STREAM); /* no weight past the wide rows */
        /* bf16 at one token with a weight past GEMV_WIDE_MAX_ROWS: the row kernel, one launch
         * (the BF16 model's GDN qkv, z, b, a; attention q, k, v; two experts; K of 2 warps) */
        const int b4[4] = {KW_FMT_BF16, KW_FMT_BF16, KW_FMT_BF16, KW_FMT_BF16};
        const int gdn4[4] = {2048, 1024, 32, 32}, att3[3] = {1024, 128, 128}, od3[3] = {17, 600, 3};
        run_multi_kind(4, b4, gdn4, 2048, 1, 1, GEMV_MULTI_ROWS);
        run_multi_kind(3, b4, att3, 2048, 1, 0, GEMV_MULTI_ROWS);
        run_multi_kind(3, b4, od3, 4104, 1, 0, GEMV_MULTI_ROWS);
        const int big[4] = {64, 64, 513, 32}; /* a bf16 weight past GEMV_WIDE_MAX_ROWS */
        struct kw_pair w[4];
        struct gemv_out o[4];
        for (int i = 0; i < 4; i++) {
            kw_pair_make(&w[i], nnbb[i], 0, 1, big[i], 256);
            o[i] = (struct gemv_out){&w[i].dev, 0, NULL};
        }
        CHECK_EQ_INT(gemv_multi_kind(o, 4, 1), GEMV_MULTI_NONE);
        o[1].expert = 1; /* stream weights of two experts: no stream launch */
        CHECK_EQ_INT(gemv_multi_kind(o, 3, 1), GEMV_MULTI_NONE);
        for (int i = 0; i < 4; i++)
            kw_pair_free(&w[i]);
    }

    /* bad arguments */
    {
        struct kw_pair w;
        float *d = ktest_dev_alloc(4096);
        kw_pair_make(&w, KW_FMT_NVFP4, 0, 1, 8, 64);
        w.dev.cols = 40; /* not a multiple of 16 */
        CHECK_EQ_INT(gemv_cuda(d, &w.dev, 0, d, 1, 0), ERR_INVAL);
        w.dev.cols = 64;
        w.dev.row_stride = 72; /* row stride not a multiple of 16 */
        CHECK_EQ_INT(gemv_cuda(d, &w.dev, 0, d, 1, 0), ERR_INVAL);
        w.dev.row_stride = 64;
        CHECK_EQ_INT(gemv_cuda_path(d, &w.dev, 0, d, 9, GEMV_PATH_STREAM, 0), ERR_UNSUPPORTED);
        CHECK_EQ_INT(gemv_cuda_path(d, &w.dev, 0, d, 1, 7, 0), ERR_INVAL);
        CHECK_EQ_INT(gemv_cuda(d, &w.dev, 0, d + 1, 1, 0), ERR_INVAL); /* misaligned x */
        CHECK_EQ_INT(gemv_cuda(d, &w.dev, 0, d, 0, 0), ERR_INVAL);
        CHECK_EQ_INT(gemv_cuda_path(d, &w.dev, 0, d, 1, GEMV_PATH_TENSOR, 0), ERR_UNSUPPORTED);
        ktest_free(d);
        kw_pair_free(&w);
    }
    {
        struct kw_pair a, b, c;
        float *d = ktest_dev_alloc((size_t)9 * 1024 * 4);
        kw_pair_make(&a, KW_FMT_BF16, 0, 1, 8, 256);
        kw_pair_make(&b, KW_FMT_BF16, 0, 1, 8, 128);
        kw_pair_make(&c, KW_FMT_BF16, 0, 1, GEMV_WIDE_MAX_ROWS + 1, 256);
        struct gemv_out o[2] = { { &a.dev, 0, d }, { &b.dev, 0, d } };
        CHECK_EQ_INT(gemv_multi_cuda(o, 2, d, 1, 0), ERR_INVAL); /* cols differ */
        o[1].w = &c.dev;
        /* too many rows for the wide kernel at 2 tokens; at 1 the bf16 row kernel takes them */
        CHECK_EQ_INT(gemv_multi_cuda(o, 2, d, 2, 0), ERR_UNSUPPORTED);
        CHECK_EQ_INT(gemv_multi_kind(o, 2, 1), GEMV_MULTI_ROWS);
        o[1].w = &a.dev;
        CHECK_EQ_INT(gemv_multi_cuda(o, 2, d, GEMV_WIDE_MAX_TOK + 1, 0), ERR_UNSUPPORTED);
        CHECK_EQ_INT(gemv_multi_cuda(o, 2, d + 1, 1, 0), ERR_INVAL); /* misaligned x */
        CHECK_EQ_INT(gemv_multi_cuda(o, GEMV_MULTI_MAX + 1, d, 1, 0), ERR_INVAL);
        kw_pair_free(&a);
        kw_pair_free(&b);
        kw_pair_free(&c);
        ktest_free(d);
    }
    {
        struct kw_pair w;
        float *d = ktest_dev_alloc((size_t)5 * 8192 * 4);
        kw_pair_make(&w, KW_FMT_NVFP4, 0, 1, 16, 8192);
        /* 5 tokens x 8192 columns of staged fp16 exceed the stream kernel's shared memory (68 KB)
         */
        CHECK_EQ_INT(gemv_cuda_path(d, &w.dev, 0, d, 5, GEMV_PATH_STREAM, 0), ERR_UNSUPPORTED);
        kw_pair_free(&w);
        kw_pair_make(&w, KW_FMT_BF16, 0, 1, 16, 64);
        CHECK_EQ_INT(gemv_cuda_path(d, &w.dev, 0, d, 1, GEMV_PATH_STREAM, 0), ERR_UNSUPPORTED);
        CHECK_EQ_INT(gemv_cuda_path(d, &w.dev, 0, d, 2, GEMV_PATH_ROWS, 0), ERR_UNSUPPORTED);
        kw_pair_free(&w);
        /* fp8 blocks narrower than a 128-column chunk */
        kw_pair_make(&w, KW_FMT_FP8, KW_SCALE_BLOCK, 1, 16, 256);
        w.dev.block_cols = 64;
        CHECK_EQ_INT(gemv_cuda_path(d, &w.dev, 0, d, 1, GEMV_PATH_STREAM, 0), ERR_UNSUPPORTED);
        kw_pair_free(&w);
        kw_pair_make(&w, KW_FMT_NVFP4, 0, 1, 16, 256);
        CHECK_EQ_INT(gemv_cuda_path(d, &w.dev, 0, d, 1, GEMV_PATH_ROWS, 0), ERR_UNSUPPORTED);
        kw_pair_free(&w);
        ktest_free(d);
    }
    ktest_sync();
    return test_result();
}

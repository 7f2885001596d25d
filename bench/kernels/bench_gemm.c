/* bench_gemm: prefill GEMM throughput on the GPU, TFLOP/s against the H200 dense bf16 peak
 * (989 TFLOP/s; fp8 peak is 2x that).
 *   moe_grouped vs moe_expert: T=2048 tokens, H=2048, I=512, E=256, top-k 8 (full-size
 *     Qwen3.5-35B-A3B routed experts), bf16 / fp8 (channel gate_up, 128x128 block down) / nvfp4;
 *     FLOPs = 6 * T * k * H * I.
 *   gemm_fp8 (per-channel: fp8 cuBLASLt; 128x128 blocks: bf16 path) vs gemm_bf16: 2048 x 4096 x
 *     2048.
 * Usage: bench_gemm [quick] (quick: moe_grouped nvfp4 and one gemm only). Medians of CUDA-event
 * timings. */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_bf16.h"
#include "gemm_fp8.h"
#include "kdtype.h"
#include "ktest.h"
#include "kweights.h"
#include "moe_expert.h"
#include "moe_grouped.h"

#define PEAK_BF16_TFLOPS 989.0

struct moe_arg {
    struct kw_pair *gu, *dn;
    float *out, *ws, *x, *w;
    int32_t *ids;
    int n_tok, k, n_exp, grouped;
};

static void run_moe(void *p)
{
    struct moe_arg *a = p;
    int rc = a->grouped ? moe_grouped_cuda(a->out, a->ws, a->x, a->ids, a->w, a->n_tok, a->k,
                                           a->n_exp, &a->gu->dev, &a->dn->dev, 0, 0)
                        : moe_expert_cuda(a->out, a->ws, a->x, a->ids, a->w, a->n_tok, a->k,
                                          a->n_exp, &a->gu->dev, &a->dn->dev, 0, 0);
    if (rc)
        fprintf(stderr, "%s rc=%d\n", a->grouped ? "moe_grouped" : "moe_expert", rc);
}

static void bench_moe(const char *name, int fmt, int with_expert)
{
    const int T = 2048, H = 2048, I = 512, E = 256, K = 8;
    struct kw_pair gu, dn;
    struct moe_arg a;
    kw_pair_make(&gu, fmt, KW_SCALE_CHANNEL, E, 2 * I, H);
    kw_pair_make(&dn, fmt, KW_SCALE_BLOCK, E, H, I);
    size_t ns = (size_t)T * K;
    float *x = malloc((size_t)T * H * 4), *w = malloc(ns * 4);
    int32_t *ids = malloc(ns * 4);
    ktest_fill(x, (size_t)T * H, -1, 1);
    ktest_fill(w, ns, 0, 0.25f);
    kw_routes(ids, T, K, E); /* k distinct experts per token, like the router */
    size_t wsf = moe_grouped_ws_floats(T, K, E, I, H), wse = moe_expert_ws_floats(T, K, I, H);
    a.gu = &gu;
    a.dn = &dn;
    a.x = ktest_dev_from(x, (size_t)T * H * 4);
    a.w = ktest_dev_from(w, ns * 4);
    a.ids = ktest_dev_from(ids, ns * 4);
    a.out = ktest_dev_alloc((size_t)T * H * 4);
    a.ws = ktest_dev_alloc((wsf > wse ? wsf : wse) * 4);
    a.n_tok = T;
    a.k = K;
    a.n_exp = E;
    const double flop = 6.0 * T * K * H * I;
    for (int g = 1; g >= (with_expert ? 0 : 1); g--) {
        a.grouped = g;
        double us = ktest_time_us(run_moe, &a, 2, g ? 11 : 3);
        double tf = flop / us * 1e-6;
        printf("%-11s %-6s T=%d H=%d I=%d E=%d k=%d  %9.1f us  %6.1f TFLOP/s  %5.1f%% of bf16 "
               "peak\n",
               g ? "moe_grouped" : "moe_expert", name, T, H, I, E, K, us, tf,
               100.0 * tf / PEAK_BF16_TFLOPS);
    }
    ktest_free(a.x), ktest_free(a.w), ktest_free(a.ids), ktest_free(a.out), ktest_free(a.ws);
    kw_pair_free(&gu);
    kw_pair_free(&dn);
    free(x), free(w), free(ids);
}

struct gemm_arg {
    struct gemm_fp8 *g;
    struct kw_pair *w;
    cublasLtHandle_t lt;
    void *ws;
    uint16_t *xb, *wb;
    float *x, *y;
    int m, n, k, bf16;
};

static void run_gemm(void *p)
{
    struct gemm_arg *a = p;
    int rc = a->bf16 ? gemm_bf16_cuda(a->y, a->xb, a->wb, a->m, a->n, a->k, 0, a->lt, a->ws,
                                      32u << 20, 0)
                     : gemm_fp8_cuda(a->g, a->y, a->x, a->m, &a->w->dev, 0, 0, 0);
    if (rc)
        fprintf(stderr, "%s rc=%d\n", a->bf16 ? "gemm_bf16" : "gemm_fp8", rc);
}

static void bench_dense(int quick)
{
    const int m = 2048, n = 4096, k = 2048;
    struct gemm_arg a;
    struct kw_pair w;
    memset(&a, 0, sizeof(a));
    a.m = m;
    a.n = n;
    a.k = k;
    float *x = malloc((size_t)m * k * 4);
    uint16_t *b = malloc((size_t)n * k * 2);
    ktest_fill(x, (size_t)m * k, -1, 1);
    a.x = ktest_dev_from(x, (size_t)m * k * 4);
    a.y = ktest_dev_alloc((size_t)m * n * 4);
    const double flop = 2.0 * m * n * k;
    if (gemm_fp8_create(&a.g, m, n, k, 32u << 20) != 0) {
        fprintf(stderr, "gemm_fp8_create failed\n");
        return;
    }
    const int kinds[2] = {KW_SCALE_CHANNEL, KW_SCALE_BLOCK};
    for (int i = 0; i < (quick ? 1 : 2); i++) {
        kw_pair_make(&w, KW_FMT_FP8, kinds[i], 1, n, k);
        a.w = &w;
        double us = ktest_time_us(run_gemm, &a, 3, 21);
        double tf = flop / us * 1e-6;
        printf("gemm_fp8  %-7s m=%d n=%d k=%d  %9.1f us  %6.1f TFLOP/s  %5.1f%% of bf16 peak\n",
               i == 0 ? "channel" : "block", m, n, k, us, tf, 100.0 * tf / PEAK_BF16_TFLOPS);
        kw_pair_free(&w);
    }
    cublasLtCreate(&a.lt);
    a.ws = ktest_dev_alloc(32u << 20);
    for (size_t i = 0; i < (size_t)m * k; i++)
        ((uint16_t *)x)[i] = kdtype_f32_to_bf16(x[i]); /* in place: first half of x */
    for (size_t i = 0; i < (size_t)n * k; i++)
        b[i] = kdtype_f32_to_bf16(ktest_uniform(-1, 1));
    a.xb = ktest_dev_from(x, (size_t)m * k * 2);
    a.wb = ktest_dev_from(b, (size_t)n * k * 2);
    a.bf16 = 1;
    double us = ktest_time_us(run_gemm, &a, 3, 21);
    double tf = flop / us * 1e-6;
    printf("gemm_bf16         m=%d n=%d k=%d  %9.1f us  %6.1f TFLOP/s  %5.1f%% of bf16 peak\n", m,
           n, k, us, tf, 100.0 * tf / PEAK_BF16_TFLOPS);
    ktest_free(a.ws), ktest_free(a.xb), ktest_free(a.wb), ktest_free(a.x), ktest_free(a.y);
    cublasLtDestroy(a.lt);
    gemm_fp8_destroy(a.g);
    free(x), free(b);
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "quick") == 0;
    ktest_require_gpu();
    ktest_seed(5);
    bench_moe("nvfp4", KW_FMT_NVFP4, !quick);
    if (!quick) {
        bench_moe("fp8", KW_FMT_FP8, 0);
        bench_moe("bf16", KW_FMT_BF16, 0);
    }
    bench_dense(quick);
    return 0;
}

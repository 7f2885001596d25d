/* bench_attn: full-attention kernels on the GPU at the 35B-A3B shape (16 q heads, 2 kv heads,
 * head_dim 256, 16-token blocks), bf16 and fp8 KV.
 *   attn_prefill: one chunk of T rows at pos0 (causal), each path (cores, mma, flash), TFLOP/s
 *                 counting 4*hd FLOP per (row, q head, visible key) (QK^T + PV), against
 *                 989 TFLOP/s dense bf16 (H100/H200)
 *   attn_decode:  1 and 8 sequences at ctx 4096 / 32768 (bf16 also 1 at 2,048 / 131,072, 64 at
 *                 2,048), GB/s of KV bytes read, against a device-to-device cudaMemcpy measured
 *                 in the same run
 *   attn_split:   attn_prefill_split (bf16) on the same decode shapes and a k = 3 verify window
 * Usage: bench_attn [decode] (decode: the attn_decode rows only). Times are medians of
 * CUDA-event timings. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_decode.h"
#include "attn_prefill.h"
#include "ktest.h"
#include "kv_write.h"

#define HQ 16
#define HKV 2
#define HD 256
#define BS 16

struct copy_arg {
    void *dst, *src;
    size_t n;
};

static void run_copy(void *p)
{
    struct copy_arg *a = p;
    cudaMemcpyAsync(a->dst, a->src, a->n, cudaMemcpyDeviceToDevice, 0);
}

struct pf_arg {
    float *out, *q, *g;
    void *kc, *vc;
    int32_t *bt;
    int dt, T, pos0, path;
};

static void run_prefill(void *p)
{
    struct pf_arg *a = p;
    attn_prefill_path_cuda(a->out, a->q, a->g, a->kc, a->vc, a->dt, 1.0f, 1.0f, a->bt, a->T,
                           a->pos0, HQ, HKV, HD, BS, 0.0625f, a->path, 0);
}

/* Cache of n_slots slots filled with a constant that is finite in bf16 and e4m3. */
static void *cache_alloc(size_t n_slots, int dt)
{
    size_t n = n_slots * HKV * HD * (size_t)kv_dtype_bytes(dt);
    void *c = ktest_dev_alloc(n);
    cudaMemset(c, 0x3c, n);
    return c;
}

static int32_t *table_alloc(int n)
{
    int32_t *bt = malloc((size_t)n * 4);
    for (int i = 0; i < n; i++)
        bt[i] = i;
    int32_t *d = ktest_dev_from(bt, (size_t)n * 4);
    free(bt);
    return d;
}

static void bench_prefill(int dt, int T, int pos0, int path)
{
    struct pf_arg a;
    const int ctx = pos0 + T, mb = (ctx + BS - 1) / BS;
    const size_t nq = (size_t)T * HQ * HD;
    a.dt = dt, a.T = T, a.pos0 = pos0, a.path = path;
    a.kc = cache_alloc((size_t)mb * BS, dt);
    a.vc = cache_alloc((size_t)mb * BS, dt);
    a.bt = table_alloc(mb);
    a.q = ktest_dev_alloc(nq * 4);
    a.g = ktest_dev_alloc(nq * 4);
    a.out = ktest_dev_alloc(nq * 4);
    cudaMemset(a.q, 0x3c, nq * 4);
    cudaMemset(a.g, 0x3c, nq * 4);
    int rc = attn_prefill_path_cuda(a.out, a.q, a.g, a.kc, a.vc, dt, 1.0f, 1.0f, a.bt, T, pos0,
                                    HQ, HKV, HD, BS, 0.0625f, path, 0);
    double us = rc ? 0.0 : ktest_time_us(run_prefill, &a, 3, 11);
    double keys = (double)T * pos0 + (double)T * (T + 1) / 2.0; /* visible (row, key) pairs */
    double flop = 4.0 * HD * HQ * keys;
    printf("attn_prefill %s %-5s T=%5d pos0=%5d ctx=%5d  rc=%d  %9.1f us  %6.1f TFLOP/s  %5.1f%% "
           "of 989\n",
           dt == KV_DTYPE_FP8 ? "fp8 " : "bf16",
           path == ATTN_PREFILL_PATH_WGMMA   ? "wgmma"
           : path == ATTN_PREFILL_PATH_FLASH ? "flash"
           : path == ATTN_PREFILL_PATH_MMA   ? "mma"
                                             : "cores",
           T, pos0, ctx, rc, us, us > 0 ? flop / us * 1e-6 : 0.0,
           us > 0 ? 100.0 * flop / us * 1e-6 / 989.0 : 0.0);
    ktest_free(a.kc), ktest_free(a.vc), ktest_free(a.bt), ktest_free(a.q), ktest_free(a.g);
    ktest_free(a.out);
}

struct dec_arg {
    float *out, *ws, *q, *g;
    void *kc, *vc;
    int32_t *bt, *lens;
    int dt, n_seq, mb, len, path;
};

static void run_decode(void *p)
{
    struct dec_arg *a = p;
    attn_decode_path_cuda(a->path, a->out, a->ws, 1, a->q, a->g, a->kc, a->vc, a->dt, 1.0f, 1.0f,
                          a->bt, a->lens, a->n_seq, HQ, HKV, HD, BS, a->mb, a->len, 0.0625f, 0);
}

/* attn_decode on a path (enum attn_decode_path): n_seq sequences of len keys, GB/s of the K/V
 * bytes */
static void bench_decode(int dt, int n_seq, int len, double copy_bw, int path)
{
    struct dec_arg a;
    a.dt = dt, a.n_seq = n_seq, a.len = len, a.mb = (len + BS - 1) / BS, a.path = path;
    const size_t nslots = (size_t)n_seq * a.mb * BS, nq = (size_t)n_seq * HQ * HD;
    a.kc = cache_alloc(nslots, dt);
    a.vc = cache_alloc(nslots, dt);
    a.bt = table_alloc(n_seq * a.mb);
    int32_t *lens = malloc((size_t)n_seq * 4);
    for (int i = 0; i < n_seq; i++)
        lens[i] = len;
    a.lens = ktest_dev_from(lens, (size_t)n_seq * 4);
    a.q = ktest_dev_alloc(nq * 4);
    a.g = ktest_dev_alloc(nq * 4);
    a.out = ktest_dev_alloc(nq * 4);
    cudaMemset(a.q, 0x3c, nq * 4);
    cudaMemset(a.g, 0x3c, nq * 4);
    a.ws = ktest_dev_alloc(attn_decode_ws_floats(n_seq, HQ, HKV, HD, len) * 4);
    double us = ktest_time_us(run_decode, &a, 5, 41);
    double bytes = (double)n_seq * len * HKV * HD * kv_dtype_bytes(dt) * 2;
    printf("attn_decode  %s %-5s seq=%2d ctx=%6d (KV %7.1f MB)  %9.1f us  %7.0f GB/s  %5.1f%% of "
           "copy\n",
           dt == KV_DTYPE_FP8 ? "fp8 " : "bf16", path == ATTN_DECODE_PATH_GQA ? "gqa" : "cores",
           n_seq, len, bytes / 1e6, us, bytes / us * 1e-3, 100.0 * bytes / us * 1e-3 / copy_bw);
    ktest_free(a.kc), ktest_free(a.vc), ktest_free(a.bt), ktest_free(a.lens), ktest_free(a.q);
    ktest_free(a.g), ktest_free(a.out), ktest_free(a.ws);
    free(lens);
}

struct split_arg {
    float *out, *ws, *q, *g;
    void *kc, *vc;
    int32_t *bt;
    struct attn_prefill_seq *seqs;
    int n_seq, T, mb, parts;
};

static void run_split(void *p)
{
    struct split_arg *a = p;
    attn_prefill_split_cuda(a->out, a->ws, a->parts, a->q, a->g, a->kc, a->vc, KV_DTYPE_BF16, a->bt,
                            a->mb, a->seqs, a->n_seq, a->T, HQ, HKV, HD, BS, 0.0625f, 0);
}

/* attn_prefill_split: n_seq items of T rows each at context len (decode T = 1, a verify window
 * T = k + 1), bf16; GB/s of the KV bytes its items see */
static void bench_split(int n_seq, int T, int len, double copy_bw)
{
    struct split_arg a;
    a.n_seq = n_seq, a.T = T, a.mb = (len + BS - 1) / BS;
    a.parts = attn_prefill_split_parts(n_seq, T, HQ, HKV, len, 0);
    const size_t nslots = (size_t)n_seq * a.mb * BS, nq = (size_t)n_seq * T * HQ * HD;
    a.kc = cache_alloc(nslots, KV_DTYPE_BF16);
    a.vc = cache_alloc(nslots, KV_DTYPE_BF16);
    a.bt = table_alloc(n_seq * a.mb);
    struct attn_prefill_seq *d = malloc(sizeof(*d) * (size_t)n_seq);
    for (int i = 0; i < n_seq; i++)
        d[i] = (struct attn_prefill_seq){i, i * T, T, len - T};
    a.seqs = ktest_dev_from(d, sizeof(*d) * (size_t)n_seq);
    a.q = ktest_dev_alloc(nq * 4);
    a.g = ktest_dev_alloc(nq * 4);
    a.out = ktest_dev_alloc(nq * 4);
    cudaMemset(a.q, 0x3c, nq * 4);
    cudaMemset(a.g, 0x3c, nq * 4);
    a.ws = ktest_dev_alloc(attn_prefill_split_ws_floats(n_seq * T, HQ, HD, a.parts) * 4);
    double us = ktest_time_us(run_split, &a, 5, 41);
    double bytes = (double)n_seq * len * HKV * HD * 2 * 2;
    printf(
        "attn_split   bf16 seq=%2d rows=%d ctx=%6d parts=%3d (KV %7.1f MB)  %9.1f us  %7.0f GB/s  "
        "%5.1f%% of copy\n",
        n_seq, T, len, a.parts, bytes / 1e6, us, bytes / us * 1e-3,
        100.0 * bytes / us * 1e-3 / copy_bw);
    ktest_free(a.kc), ktest_free(a.vc), ktest_free(a.bt), ktest_free(a.seqs), ktest_free(a.q);
    ktest_free(a.g), ktest_free(a.out), ktest_free(a.ws);
    free(d);
}

int main(int argc, char **argv)
{
    struct copy_arg c;
    struct cudaDeviceProp prop;
    const int decode_only = argc > 1 && strcmp(argv[1], "decode") == 0;
    /* "prefill": the 8,192-row causal prefill on the FLASH and WGMMA paths only (A/B builds,
     * Nsight Compute) */
    if (argc > 1 && strcmp(argv[1], "prefill") == 0) {
        ktest_require_gpu();
        for (int dt = KV_DTYPE_BF16; dt <= KV_DTYPE_FP8; dt++)
            for (int path = ATTN_PREFILL_PATH_FLASH; path <= ATTN_PREFILL_PATH_WGMMA; path++)
                if (path == ATTN_PREFILL_PATH_FLASH ? attn_prefill_flash_ok(HD, dt)
                                                    : attn_prefill_wgmma_ok(HD, dt)) {
                    bench_prefill(dt, 8192, 0, path);
                    bench_prefill(dt, 2048, 129024, path);
                }
        return 0;
    }
    if (argc > 2 || (argc == 2 && !decode_only)) {
        fprintf(stderr, "usage: bench_attn [decode|prefill]\n");
        return 2;
    }
    ktest_require_gpu();
    cudaGetDeviceProperties(&prop, 0);
    printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
    c.n = (size_t)1 << 30;
    c.src = ktest_dev_alloc(c.n);
    c.dst = ktest_dev_alloc(c.n);
    cudaMemset(c.src, 1, c.n);
    double us = ktest_time_us(run_copy, &c, 3, 21);
    const double copy_bw = 2.0 * c.n / us * 1e-3;
    printf("copy d2d 1 GiB: %.1f us  %.0f GB/s (read + write)\n", us, copy_bw);
    ktest_free(c.src), ktest_free(c.dst);
    for (int dt = KV_DTYPE_BF16; dt <= KV_DTYPE_FP8; dt++) {
        for (int path = ATTN_PREFILL_PATH_CORES; !decode_only && path <= ATTN_PREFILL_PATH_WGMMA;
             path++) {
            if (path == ATTN_PREFILL_PATH_FLASH && !attn_prefill_flash_ok(HD, dt))
                continue;
            if (path == ATTN_PREFILL_PATH_WGMMA && !attn_prefill_wgmma_ok(HD, dt)) {
                printf("attn_prefill %s wgmma: not available (no sm_90a code or not a 9.0 "
                       "device)\n",
                       dt == KV_DTYPE_FP8 ? "fp8 " : "bf16");
                continue;
            }
            bench_prefill(dt, 2048, 0, path);
            bench_prefill(dt, 2048, 6144, path);
            bench_prefill(dt, 8192, 0, path);
            bench_prefill(dt, 1, 8191, path);
            bench_prefill(dt, 4, 2048, path); /* a k = 3 verify window */
            if (path == ATTN_PREFILL_PATH_FLASH || path == ATTN_PREFILL_PATH_WGMMA ||
                (path == ATTN_PREFILL_PATH_MMA && dt == KV_DTYPE_BF16))
                bench_prefill(dt, 2048, 129024, path); /* the last chunk of a 131,072 prompt */
        }
        /* both forms of attn_decode: batch 1 (2K .. the 131,072-token context), batched */
        static const int dec[][2] = {{1, 2048}, {1, 4096},  {1, 32768}, {1, 131072},
                                     {8, 4096}, {8, 32768}, {64, 1024}, {64, 2048}};
        for (int path = ATTN_DECODE_PATH_CORES; path <= ATTN_DECODE_PATH_GQA; path++)
            for (size_t i = 0; i < sizeof dec / sizeof dec[0]; i++)
                if (path != ATTN_DECODE_PATH_GQA || attn_decode_gqa_ok(HQ, HKV, HD, dt))
                    bench_decode(dt, dec[i][0], dec[i][1], copy_bw, path);
        if (!decode_only && dt == KV_DTYPE_BF16 && attn_prefill_split_ok(HD, dt)) {
            bench_split(1, 1, 2048, copy_bw);
            bench_split(1, 1, 4096, copy_bw);
            bench_split(1, 1, 32768, copy_bw);
            bench_split(1, 1, 131072, copy_bw);
            bench_split(8, 1, 4096, copy_bw);
            bench_split(8, 1, 32768, copy_bw);
            bench_split(64, 1, 1024, copy_bw);
            bench_split(64, 1, 2048, copy_bw);
            bench_split(1, 4, 2048, copy_bw); /* a k = 3 verify window */
        }
    }
    ktest_sync();
    return 0;
}

/* bench_kernels: bandwidth of the decode kernels on the GPU.
 *   copy:  cudaMemcpy device-to-device of 1 GiB, GB/s counting bytes read + written
 *   gemv:  bf16 / fp8 / nvfp4 weights, large shapes and model shapes, 1/2/4/8/32 tokens, every
 *          path (nvfp4: cores, tensor, stream; fp8: cores, stream; rows a path refuses are left
 *          out), GB/s of weight bytes (data + scales) per call; weights rotate over copies
 *          totalling >= 320 MB (at most 1,024 copies) so repeated calls do not hit the 60 MB L2
 *   moe_expert: 8 of 256 nvfp4/bf16/fp8 experts (2048 x 512), per token, per path (fp8: cores
 *          and the stream kernel: moe_expert.cu's MOE_STREAM_FP8_AUTO, chosen from these rows)
 *   argmax (nvfp4 mode): one 248,320-entry row
 *   moe_router (nvfp4 mode): the bf16 router + shared gate GEMV and top-8 in one launch, 1 and 4
 *          tokens
 *   gdn_step / gdn_seq_step: the recurrence, state GB/s; gdn_seq_step also per row at a 512-row
 *          prefill, 1-row decode at 1 and 64 items and 4x4 rows (speculative verify), tiles 0/1/2/4
 *   gdn_chunk: gdn_seq_step token-serial vs chunked (gdn_seq_step_chunked_cuda, every item taken)
 *          at 1 item of 16 .. 2,048 rows, and one long item beside 63 one-row items; prints
 *          "threshold gdn_chunk many_rows_from=N", the fewest rows from which chunked was faster
 *          at every larger row count measured
 *   l2:    one token's GEMV on model shapes with its weight cold and hot in L2
 * Usage: bench_kernels [quick|gdn|nvfp4|rows|l2]. gdn: the copy and the gdn_chunk lines only. Times
 * are medians of CUDA-event timings of one call each (the host's launch included); the gemv and
 * moe_expert lines add "b2b": the mean of 64 calls issued back to back (the launch gap hidden). */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "argmax.h"
#include "attn_decode.h"
#include "gdn_seq.h"
#include "gdn_step.h"
#include "gemv.h"
#include "ktest.h"
#include "kweights.h"
#include "moe_expert.h"
#include "moe_route.h"

struct copy_arg {
    void *dst, *src;
    size_t n;
};

static void run_copy(void *p)
{
    struct copy_arg *a = p;
    cudaMemcpyAsync(a->dst, a->src, a->n, cudaMemcpyDeviceToDevice, 0);
}

struct gemv_arg {
    struct kw_pair *w;
    int n_alloc;                /* copies of the weight made */
    int n_w, next, n_tok, path; /* n_w <= n_alloc: the copies taken in turn */
    float *x, *y;
};

static void run_gemv(void *p)
{
    struct gemv_arg *a = p;
    int rc = gemv_cuda_path(a->y, &a->w[a->next].dev, 0, a->x, a->n_tok, a->path, 0);
    if (rc)
        fprintf(stderr, "gemv_cuda rc=%d\n", rc);
    a->next = (a->next + 1) % a->n_w;
}

static double copy_bw;

static const char *fmt_name(int fmt)
{
    return fmt == KW_FMT_BF16 ? "bf16" : fmt == KW_FMT_FP8 ? "fp8" : "nvfp4";
}

/* Copies of a rows x cols weight totalling >= GEMV_COLD_BYTES (at most GEMV_MAX_COPIES), taken
 * in turn so that a call finds its weight outside the 60 MB L2, and activations for 32 tokens;
 * returns the bytes of one copy (data + scales). */
#define GEMV_COLD_BYTES 320e6
#define GEMV_MAX_COPIES 1024
static double gemv_arg_make(struct gemv_arg *a, int fmt, int rows, int cols)
{
    struct kw_pair probe;
    kw_pair_make(&probe, fmt, KW_SCALE_CHANNEL, 1, 1, cols);
    const double bytes = kw_pair_bytes(&probe) * rows;
    kw_pair_free(&probe);
    const double n = GEMV_COLD_BYTES / bytes + 1;
    a->n_alloc = a->n_w = n > GEMV_MAX_COPIES ? GEMV_MAX_COPIES : (int)n;
    a->w = calloc((size_t)a->n_alloc, sizeof(*a->w));
    for (int i = 0; i < a->n_alloc; i++)
        kw_pair_make(&a->w[i], fmt, KW_SCALE_CHANNEL, 1, rows, cols);
    a->x = ktest_dev_alloc((size_t)32 * cols * 4);
    a->y = ktest_dev_alloc((size_t)32 * rows * 4);
    cudaMemset(a->x, 0x3c, (size_t)32 * cols * 4); /* ~0.0117f, non-zero */
    a->next = 0;
    return bytes;
}

static void gemv_arg_free(struct gemv_arg *a)
{
    for (int i = 0; i < a->n_alloc; i++)
        kw_pair_free(&a->w[i]);
    free(a->w);
    ktest_free(a->x);
    ktest_free(a->y);
}

static void bench_gemv(const char *name, int fmt, int rows, int cols)
{
    static const int toks[] = {1, 2, 4, 8, 32};
    struct gemv_arg a;
    const double bytes = gemv_arg_make(&a, fmt, rows, cols);
    for (int path = GEMV_PATH_CORES; path <= GEMV_PATH_ROWS; path++) {
        if ((path == GEMV_PATH_TENSOR && fmt != KW_FMT_NVFP4) ||
            (path == GEMV_PATH_STREAM && fmt == KW_FMT_BF16) ||
            (path == GEMV_PATH_ROWS && fmt == KW_FMT_NVFP4))
            continue;
        a.path = path;
        for (size_t i = 0; i < sizeof(toks) / sizeof(toks[0]); i++) {
            a.n_tok = toks[i];
            /* skip shapes the path refuses (stream: > 8 tokens or too wide to stage) */
            if (gemv_cuda_path(a.y, &a.w[0].dev, 0, a.x, a.n_tok, path, 0) != 0)
                continue;
            double us = ktest_time_us(run_gemv, &a, 5, 41);
            double b2b = ktest_time_us_b2b(run_gemv, &a, 5, 64);
            double gbs = bytes / us * 1e-3;
            printf("gemv %-5s %-6s %-16s rows=%6d cols=%5d tok=%2d %9.1f us %6.0f GB/s %5.1f%% of "
                   "copy b2b %.1f us %.1f%%\n",
                   fmt_name(fmt),
                   path == GEMV_PATH_CORES    ? "cores"
                   : path == GEMV_PATH_TENSOR ? "tensor"
                   : path == GEMV_PATH_ROWS   ? "rows"
                                              : "stream",
                   name, rows, cols, a.n_tok, us, gbs, 100.0 * gbs / copy_bw, b2b,
                   100.0 * bytes / b2b * 1e-3 / copy_bw);
        }
    }
    gemv_arg_free(&a);
}

/* One token's GEMV on a model shape with its weight cold (gemv_arg_make's copies in turn, as the
 * step reads them) and hot (one weight, left in L2 by the call before): what an L2-resident
 * weight would save a kernel (docs/PERF.md, twenty-second session: 4-15% for nvfp4, so the
 * one-token kernels do not wait on the DRAM's latency alone). */
static void bench_l2(const char *name, int fmt, int rows, int cols)
{
    struct gemv_arg g;
    const double bytes = gemv_arg_make(&g, fmt, rows, cols);
    g.n_tok = 1;
    g.path = GEMV_PATH_AUTO;
    for (int hot = 0; hot < 2; hot++) {
        g.n_w = hot ? 1 : g.n_alloc;
        g.next = 0;
        double us = ktest_time_us(run_gemv, &g, 5, 41);
        double b2b = ktest_time_us_b2b(run_gemv, &g, 5, 64);
        printf("l2 %-5s %-16s rows=%6d cols=%5d %-4s %8.1f us %5.1f%% of copy b2b %.1f us "
               "%.1f%%\n",
               fmt_name(fmt), name, rows, cols, hot ? "hot" : "cold", us,
               100.0 * bytes / us * 1e-3 / copy_bw, b2b, 100.0 * bytes / b2b * 1e-3 / copy_bw);
    }
    gemv_arg_free(&g);
}

struct moe_arg {
    struct kw_pair gu, dn;
    float *out, *h, *x, *w;
    int32_t *ids;
    int n_tok, round, path;
    int32_t *ids_host;
};

static void run_moe(void *p)
{
    struct moe_arg *a = p;
    /* the experts change between calls (different ids buffer offsets), like real routing */
    int32_t *ids = a->ids + (size_t)(a->round % 16) * a->n_tok * 8;
    int rc = moe_expert_cuda_path(a->out, a->h, a->x, ids, a->w, a->n_tok, 8, 256, &a->gu.dev,
                                  &a->dn.dev, 0, a->path, 0);
    if (rc)
        fprintf(stderr, "moe_expert_cuda rc=%d\n", rc);
    a->round++;
}

static void bench_moe(int fmt, int n_tok, int path)
{
    struct moe_arg a;
    memset(&a, 0, sizeof(a));
    a.path = path;
    kw_pair_make(&a.gu, fmt, KW_SCALE_CHANNEL, 256, 1024, 2048);
    /* fp8: the checkpoints' 128 x 128 blocks on down (the stream path's COMBINE takes no
     * channel scales) */
    kw_pair_make(&a.dn, fmt, fmt == KW_FMT_FP8 ? KW_SCALE_BLOCK : KW_SCALE_CHANNEL, 256, 2048, 512);
    a.n_tok = n_tok;
    size_t nids = (size_t)16 * n_tok * 8;
    a.ids_host = malloc(nids * 4);
    for (size_t i = 0; i < nids; i++)
        a.ids_host[i] = (int32_t)(ktest_u32() % 256);
    float *wh = malloc((size_t)n_tok * 8 * 4);
    for (int i = 0; i < n_tok * 8; i++)
        wh[i] = 0.125f;
    a.ids = ktest_dev_from(a.ids_host, nids * 4);
    a.w = ktest_dev_from(wh, (size_t)n_tok * 8 * 4);
    a.x = ktest_dev_alloc((size_t)n_tok * 2048 * 4);
    cudaMemset(a.x, 0x3c, (size_t)n_tok * 2048 * 4);
    a.h = ktest_dev_alloc(moe_expert_ws_floats(n_tok, 8, 512, 2048) * 4);
    a.out = ktest_dev_alloc((size_t)n_tok * 2048 * 4);
    double us = ktest_time_us(run_moe, &a, 5, 41);
    double b2b = ktest_time_us_b2b(run_moe, &a, 5, 64);
    /* bytes: distinct experts touched per call, averaged over the 16 id sets */
    double experts = 0;
    for (int r = 0; r < 16; r++) {
        char seen[256] = {0};
        for (int i = 0; i < n_tok * 8; i++)
            seen[a.ids_host[(size_t)r * n_tok * 8 + i]] = 1;
        for (int e = 0; e < 256; e++)
            experts += seen[e];
    }
    experts /= 16;
    double per = kw_pair_bytes(&a.gu) + kw_pair_bytes(&a.dn);
    double gbs = experts * per / us * 1e-3;
    printf("moe_expert %-5s %-6s tok=%2d top8/256 H=2048 I=512 %8.1f us %5.1f experts %6.0f GB/s "
           "%5.1f%% of copy b2b %.1f us %.1f%%\n",
           fmt_name(fmt),
           path == GEMV_PATH_TENSOR   ? "tensor"
           : path == GEMV_PATH_STREAM ? "stream"
                                      : "cores",
           n_tok, us, experts, gbs, 100.0 * gbs / copy_bw, b2b,
           100.0 * experts * per / b2b * 1e-3 / copy_bw);
    kw_pair_free(&a.gu);
    kw_pair_free(&a.dn);
    ktest_free(a.ids), ktest_free(a.w), ktest_free(a.x), ktest_free(a.h), ktest_free(a.out);
    free(a.ids_host);
    free(wh);
}

struct router_arg {
    struct kw_pair r[64], sg; /* 64 routers (64 MB of bf16): rotated past the 60 MB L2 */
    float *x, *logits, *sh, *w;
    int32_t *ids;
    unsigned *counter;
    int next, n_tok;
};

static void run_router(void *p)
{
    struct router_arg *a = p;
    int rc = moe_router_cuda(a->ids, a->w, a->logits, a->sh, a->counter, a->x, &a->r[a->next].dev,
                             &a->sg.dev, a->n_tok, 8, 0);
    if (rc)
        fprintf(stderr, "moe_router_cuda rc=%d\n", rc);
    a->next = (a->next + 1) % 64;
}

/* the decode step's router launch: bf16 256 x 2048 router + the shared gate, GEMV and top-8 */
static void bench_router(int n_tok)
{
    struct router_arg *a = calloc(1, sizeof(*a));
    for (int i = 0; i < 64; i++)
        kw_pair_make(&a->r[i], KW_FMT_BF16, 0, 1, 256, 2048);
    kw_pair_make(&a->sg, KW_FMT_BF16, 0, 1, 2, 2048);
    a->n_tok = n_tok;
    a->x = ktest_dev_alloc((size_t)n_tok * 2048 * 4);
    cudaMemset(a->x, 0x3c, (size_t)n_tok * 2048 * 4);
    a->logits = ktest_dev_alloc((size_t)n_tok * 256 * 4);
    a->sh = ktest_dev_alloc((size_t)n_tok * 2 * 4);
    a->w = ktest_dev_alloc((size_t)n_tok * 9 * 4);
    a->ids = ktest_dev_alloc((size_t)n_tok * 9 * 4);
    a->counter = ktest_dev_alloc(4);
    cudaMemset(a->counter, 0, 4);
    double us = ktest_time_us(run_router, a, 5, 41);
    double b2b = ktest_time_us_b2b(run_router, a, 5, 64);
    double bytes = kw_pair_bytes(&a->r[0]) + kw_pair_bytes(&a->sg);
    printf("moe_router bf16 E=256 H=2048 top8+shared tok=%d %8.1f us %6.0f GB/s %5.1f%% of copy "
           "b2b %.1f us %.1f%%\n",
           n_tok, us, bytes / us * 1e-3, 100.0 * bytes / us * 1e-3 / copy_bw, b2b,
           100.0 * bytes / b2b * 1e-3 / copy_bw);
    for (int i = 0; i < 64; i++)
        kw_pair_free(&a->r[i]);
    kw_pair_free(&a->sg);
    ktest_free(a->x), ktest_free(a->logits), ktest_free(a->sh), ktest_free(a->w);
    ktest_free(a->ids), ktest_free(a->counter);
    free(a);
}

struct argmax_arg {
    float *l;
    int32_t *ids;
    unsigned long long *ws;
};

static void run_argmax(void *p)
{
    struct argmax_arg *a = p;
    int rc = argmax_cuda(a->ids, a->l, 1, 248320, a->ws, 0);
    if (rc)
        fprintf(stderr, "argmax rc=%d\n", rc);
}

/* greedy sampling of one 248,320-entry row (1 MB of fp32 logits, hot in L2 after the lm_head as
 * in the step) */
static void bench_argmax(void)
{
    struct argmax_arg a;
    a.l = ktest_dev_alloc((size_t)248320 * 4);
    cudaMemset(a.l, 0x3c, (size_t)248320 * 4);
    a.ids = ktest_dev_alloc(4);
    a.ws = ktest_dev_alloc(argmax_ws_words(1) * 8);
    cudaMemset(a.ws, 0, argmax_ws_words(1) * 8);
    double us = ktest_time_us(run_argmax, &a, 5, 41);
    double b2b = ktest_time_us_b2b(run_argmax, &a, 5, 64);
    printf("argmax vocab=248320 rows=1 %8.1f us b2b %.1f us\n", us, b2b);
    ktest_free(a.l), ktest_free(a.ids), ktest_free(a.ws);
}

struct gdn_arg {
    float *out, *st, *qkv, *z, *a, *b, *alog, *dtb, *nw;
    int32_t *items;            // gdn_seq_step: (n_items, GDN_SEQ_ITEM_INTS)
    int n_seq, n_items, tiles; // gdn_step: n_seq; gdn_seq_step: n_items, tiles; gdn_chunk:
                               //  max_rows, n_items, chunk_min_rows
    float *ws;                 // gdn_chunk: the chunked form's workspace of ws_rows rows
    int ws_rows;
};

/* Device buffers of the model's GDN (16 q/k heads, 32 value heads) for n_slots states and
 * n_rows rows; inputs constant and non-zero. */
static void gdn_alloc(struct gdn_arg *g, size_t n_slots, size_t n_rows)
{
    const size_t nst = n_slots * 32 * 128 * 128;
    g->st = ktest_dev_alloc(nst * 4);
    cudaMemset(g->st, 0, nst * 4);
    g->qkv = ktest_dev_alloc(n_rows * 8192 * 4);
    cudaMemset(g->qkv, 0x3c, n_rows * 8192 * 4);
    g->z = ktest_dev_alloc(n_rows * 4096 * 4);
    cudaMemset(g->z, 0x3c, n_rows * 4096 * 4);
    g->a = ktest_dev_alloc(n_rows * 32 * 4);
    g->b = ktest_dev_alloc(n_rows * 32 * 4);
    cudaMemset(g->a, 0, n_rows * 32 * 4);
    cudaMemset(g->b, 0, n_rows * 32 * 4);
    g->alog = ktest_dev_alloc(32 * 4);
    g->dtb = ktest_dev_alloc(32 * 4);
    cudaMemset(g->alog, 0, 32 * 4);
    cudaMemset(g->dtb, 0, 32 * 4);
    g->nw = ktest_dev_alloc(128 * 4);
    cudaMemset(g->nw, 0x3c, 128 * 4);
    g->out = ktest_dev_alloc(n_rows * 4096 * 4);
    g->items = NULL;
    g->ws = NULL;
}

static void gdn_free(struct gdn_arg *g)
{
    ktest_free(g->st), ktest_free(g->qkv), ktest_free(g->z), ktest_free(g->a), ktest_free(g->b);
    ktest_free(g->alog), ktest_free(g->dtb), ktest_free(g->nw), ktest_free(g->out);
    ktest_free(g->items);
}

static void run_gdn(void *p)
{
    struct gdn_arg *g = p;
    gdn_step_cuda(g->out, g->st, g->qkv, g->z, g->a, g->b, g->alog, g->dtb, g->nw, NULL, g->n_seq,
                  16, 32, 1e-6f, 0);
}

static void bench_gdn(int n_seq)
{
    struct gdn_arg g;
    size_t nst = (size_t)n_seq * 32 * 128 * 128;
    g.n_seq = n_seq;
    gdn_alloc(&g, n_seq, n_seq);
    double us = ktest_time_us(run_gdn, &g, 5, 41);
    double gbs = 2.0 * nst * 4 / us * 1e-3;
    printf(
        "gdn_step seq=%2d (32 heads, state r+w %.1f MB)  %8.1f us  %7.0f GB/s  %5.1f%% of copy\n",
        n_seq, 2.0 * nst * 4 / 1e6, us, gbs, 100.0 * gbs / copy_bw);
    gdn_free(&g);
}

static void run_gdn_seq(void *p)
{
    struct gdn_arg *g = p;
    gdn_seq_step_cuda_tiles(g->out, g->st, 0, NULL, 0, g->qkv, g->z, g->a, g->b, g->alog, g->dtb,
                            g->nw, g->items, g->n_items, 16, 32, 1e-6f, g->tiles, NULL, 0);
}

/* gdn_seq_step (the model's 16/32 heads): n_items items of rows rows each, at a tile count
 * (0: the launcher's choice); prefill rows = 512 at 1 item, decode rows = 1 at many items. */
static void bench_gdn_seq(int n_items, int rows, int tiles)
{
    struct gdn_arg g;
    const size_t nst = (size_t)n_items * 32 * 128 * 128;
    int32_t *it = malloc(sizeof(int32_t) * GDN_SEQ_ITEM_INTS * n_items);
    for (int i = 0; i < n_items; i++) {
        it[i * GDN_SEQ_ITEM_INTS] = i * rows;
        it[i * GDN_SEQ_ITEM_INTS + 1] = rows;
        it[i * GDN_SEQ_ITEM_INTS + 2] = i;
        it[i * GDN_SEQ_ITEM_INTS + 3] = -1;
    }
    gdn_alloc(&g, n_items, (size_t)n_items * rows);
    g.items = ktest_dev_from(it, sizeof(int32_t) * GDN_SEQ_ITEM_INTS * n_items);
    free(it);
    g.n_items = n_items;
    g.tiles = tiles;
    double us = ktest_time_us(run_gdn_seq, &g, 3, 21);
    double gbs = 2.0 * nst * 4 / us * 1e-3;
    printf("gdn_seq_step items=%2d rows=%3d tiles=%d (auto %s)  %8.1f us  %6.2f us/row  state "
           "%7.0f GB/s\n",
           n_items, rows, tiles, tiles ? "no" : "yes", us, us / rows, gbs);
    gdn_free(&g);
}

static void run_gdn_chunk(void *p)
{
    struct gdn_arg *g = p;
    gdn_seq_step_chunked_cuda(g->out, g->st, 0, NULL, 0, g->qkv, g->z, g->a, g->b, g->alog, g->dtb,
                              g->nw, g->items, g->n_items, 16, 32, 1e-6f, g->tiles, g->n_seq, g->ws,
                              g->ws_rows, NULL, 0);
}

/* token-serial (chunk_min_rows 0) vs chunked (1: every item without snapshots) for n_items items:
 * the first of rows rows, the others of 1 row; returns chunked / serial time */
static double bench_gdn_chunk(int n_items, int rows)
{
    struct gdn_arg g;
    const int total = rows + n_items - 1;
    int32_t *it = malloc(sizeof(int32_t) * GDN_SEQ_ITEM_INTS * n_items);
    for (int i = 0; i < n_items; i++) {
        it[i * GDN_SEQ_ITEM_INTS] = i == 0 ? 0 : rows + i - 1;
        it[i * GDN_SEQ_ITEM_INTS + 1] = i == 0 ? rows : 1;
        it[i * GDN_SEQ_ITEM_INTS + 2] = i;
        it[i * GDN_SEQ_ITEM_INTS + 3] = -1;
    }
    gdn_alloc(&g, n_items, (size_t)total);
    /* varied gates: a decay of ~0.5 per row, beta ~0.7 */
    cudaMemset(g.a, 0x3f, (size_t)total * 32 * 4);
    g.items = ktest_dev_from(it, sizeof(int32_t) * GDN_SEQ_ITEM_INTS * n_items);
    free(it);
    g.n_items = n_items;
    g.n_seq = rows; // max_rows
    g.ws_rows = total;
    g.ws = ktest_dev_alloc(gdn_seq_chunk_ws_floats(total, 32) * sizeof(float));
    g.tiles = 0;
    const double serial = ktest_time_us(run_gdn_chunk, &g, 3, 11);
    g.tiles = 1;
    const double chunked = ktest_time_us(run_gdn_chunk, &g, 3, 11);
    printf("gdn_chunk items=%2d rows=%4d serial_us=%9.1f chunked_us=%8.1f ratio=%.2f\n", n_items,
           rows, serial, chunked, chunked / serial);
    ktest_free(g.ws);
    gdn_free(&g);
    return chunked / serial;
}

static void bench_gdn_chunks(void)
{
    static const int rows[] = { 16, 32, 48, 64, 96, 128, 256, 512, 1024, 2048 };
    const int nr = (int)(sizeof rows / sizeof rows[0]);
    int from = 0;
    for (int i = 0; i < nr; i++)
        if (bench_gdn_chunk(1, rows[i]) >= 1.0)
            from = i + 1; // chunked not faster here: the threshold lies above
    bench_gdn_chunk(64, 2048);
    bench_gdn_chunk(64, 128);
    if (from < nr)
        printf("threshold gdn_chunk many_rows_from=%d\n", rows[from]);
    else
        printf("threshold gdn_chunk many_rows_from=none (chunked never faster up to %d rows)\n",
               rows[nr - 1]);
}

struct attn_arg {
    float *out, *ws, *q, *g;
    uint16_t *kc, *vc;
    int32_t *bt, *lens;
    int n_seq, mb, len;
};

static void run_attn(void *p)
{
    struct attn_arg *a = p;
    attn_decode_cuda(a->out, a->ws, a->q, a->g, a->kc, a->vc, a->bt, a->lens, a->n_seq, 16, 2, 256,
                     16, a->mb, a->len, 0.0625f, 0);
}

static void bench_attn(int n_seq, int len)
{
    struct attn_arg a;
    a.n_seq = n_seq;
    a.len = len;
    a.mb = (len + 15) / 16;
    size_t nslots = (size_t)n_seq * a.mb * 16, w = 2 * 256;
    a.kc = ktest_dev_alloc(nslots * w * 2);
    a.vc = ktest_dev_alloc(nslots * w * 2);
    cudaMemset(a.kc, 0x3c, nslots * w * 2);
    cudaMemset(a.vc, 0x3c, nslots * w * 2);
    int32_t *bt = malloc((size_t)n_seq * a.mb * 4), *lens = malloc((size_t)n_seq * 4);
    for (int i = 0; i < n_seq * a.mb; i++)
        bt[i] = i;
    for (int i = 0; i < n_seq; i++)
        lens[i] = len;
    a.bt = ktest_dev_from(bt, (size_t)n_seq * a.mb * 4);
    a.lens = ktest_dev_from(lens, (size_t)n_seq * 4);
    a.q = ktest_dev_alloc((size_t)n_seq * 4096 * 4);
    a.g = ktest_dev_alloc((size_t)n_seq * 4096 * 4);
    cudaMemset(a.q, 0x3c, (size_t)n_seq * 4096 * 4);
    cudaMemset(a.g, 0x3c, (size_t)n_seq * 4096 * 4);
    a.out = ktest_dev_alloc((size_t)n_seq * 4096 * 4);
    a.ws = ktest_dev_alloc(attn_decode_ws_floats(n_seq, 16, 2, 256, len) * 4);
    double us = ktest_time_us(run_attn, &a, 5, 41);
    double bytes = (double)n_seq * len * w * 2 * 2;
    printf("attn_decode seq=%2d ctx=%6d (16q/2kv x 256, KV %.1f MB)  %8.1f us  %7.0f GB/s  %5.1f%% "
           "of copy\n",
           n_seq, len, bytes / 1e6, us, bytes / us * 1e-3, 100.0 * bytes / us * 1e-3 / copy_bw);
    ktest_free(a.kc), ktest_free(a.vc), ktest_free(a.bt), ktest_free(a.lens), ktest_free(a.q);
    ktest_free(a.g), ktest_free(a.out), ktest_free(a.ws);
    free(bt), free(lens);
}

/* the last line of every mode: the launches' status; the exit code */
static int bench_done(void)
{
    cudaError_t e = cudaDeviceSynchronize();
    printf("done: %s\n", cudaGetErrorString(e));
    return e == cudaSuccess ? 0 : 1;
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "quick") == 0;
    const int gdn_only = argc > 1 && strcmp(argv[1], "gdn") == 0;
    const int nvfp4_only = argc > 1 && strcmp(argv[1], "nvfp4") == 0; /* the model's nvfp4 shapes */
    /* the model's bf16 and fp8 one-token shapes: the row kernel against cores / stream */
    const int rows_only = argc > 1 && strcmp(argv[1], "rows") == 0;
    struct copy_arg c;
    struct cudaDeviceProp prop;
    ktest_require_gpu();
    ktest_seed(1);
    cudaGetDeviceProperties(&prop, 0);
    printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount,
           prop.l2CacheSize >> 20);
    c.n = (size_t)1 << 30;
    c.src = ktest_dev_alloc(c.n);
    c.dst = ktest_dev_alloc(c.n);
    cudaMemset(c.src, 1, c.n);
    double us = ktest_time_us(run_copy, &c, 3, 21);
    copy_bw = 2.0 * c.n / us * 1e-3;
    printf("copy d2d 1 GiB: %.1f us  %.0f GB/s (read + write)\n", us, copy_bw);
    ktest_free(c.src);
    ktest_free(c.dst);
    if (gdn_only) {
        bench_gdn_chunks();
        return bench_done();
    }

    if (argc > 1 && strcmp(argv[1], "l2") == 0) {
        bench_l2("gdn_qkv+z", KW_FMT_NVFP4, 12288, 2048);
        bench_l2("o_proj/out_proj", KW_FMT_NVFP4, 2048, 4096);
        bench_l2("expert_gate_up", KW_FMT_NVFP4, 1024, 2048);
        bench_l2("gdn_qkv+z", KW_FMT_FP8, 12288, 2048);
        bench_l2("gdn_qkv+z", KW_FMT_BF16, 12288, 2048);
        bench_l2("o_proj/out_proj", KW_FMT_BF16, 2048, 4096);
        return bench_done();
    }
    if (rows_only) {
        static const int fmts[2] = {KW_FMT_BF16, KW_FMT_FP8};
        for (int f = 0; f < 2; f++) {
            bench_gemv("gdn_qkv+z", fmts[f], 12288, 2048);
            bench_gemv("gdn_z", fmts[f], 4096, 2048);
            bench_gemv("o_proj/out_proj", fmts[f], 2048, 4096);
            bench_moe(fmts[f], 1, GEMV_PATH_CORES);
        }
        bench_moe(KW_FMT_FP8, 1, GEMV_PATH_STREAM);
        bench_gemv("lm_head", KW_FMT_BF16, 248320, 2048);
        return bench_done();
    }
    if (nvfp4_only) {
        bench_gemv("gdn_qkv+z", KW_FMT_NVFP4, 12288, 2048);
        bench_gemv("attn_q+k+v", KW_FMT_NVFP4, 9216, 2048);
        bench_gemv("o_proj/out_proj", KW_FMT_NVFP4, 2048, 4096);
        bench_gemv("expert_gate_up", KW_FMT_NVFP4, 1024, 2048);
        bench_gemv("expert_down", KW_FMT_NVFP4, 2048, 512);
        bench_moe(KW_FMT_NVFP4, 1, GEMV_PATH_STREAM);
        bench_moe(KW_FMT_FP8, 1, GEMV_PATH_CORES); /* MOE_STREAM_FP8_AUTO's evidence */
        bench_moe(KW_FMT_FP8, 1, GEMV_PATH_STREAM);
        bench_router(1);
        bench_router(4);
        bench_argmax();
        return bench_done();
    }
    bench_gemv("large", KW_FMT_NVFP4, 32768, 8192);
    bench_gemv("lm_head", KW_FMT_NVFP4, 248320, 2048);
    bench_gemv("gdn_in_proj_qkv", KW_FMT_NVFP4, 8192, 2048);
    bench_gemv("o_proj/out_proj", KW_FMT_NVFP4, 2048, 4096);
    bench_gemv("large", KW_FMT_BF16, 16384, 8192);
    bench_gemv("lm_head", KW_FMT_BF16, 248320, 2048);
    bench_gemv("gdn_in_proj_qkv", KW_FMT_BF16, 8192, 2048);
    bench_gemv("expert_gate_up", KW_FMT_NVFP4, 1024, 2048);
    bench_gemv("expert_down", KW_FMT_NVFP4, 2048, 512);
    bench_gemv("large", KW_FMT_FP8, 16384, 8192);
    if (!quick) {
        bench_gemv("o_proj/out_proj", KW_FMT_BF16, 2048, 4096);
    }
    bench_moe(KW_FMT_NVFP4, 1, GEMV_PATH_CORES);
    bench_moe(KW_FMT_NVFP4, 1, GEMV_PATH_TENSOR);
    bench_moe(KW_FMT_NVFP4, 1, GEMV_PATH_STREAM);
    bench_moe(KW_FMT_NVFP4, 4, GEMV_PATH_STREAM);
    bench_moe(KW_FMT_NVFP4, 8, GEMV_PATH_CORES);
    bench_moe(KW_FMT_NVFP4, 8, GEMV_PATH_TENSOR);
    bench_moe(KW_FMT_NVFP4, 8, GEMV_PATH_STREAM);
    bench_moe(KW_FMT_BF16, 1, GEMV_PATH_CORES);
    bench_moe(KW_FMT_BF16, 8, GEMV_PATH_CORES);
    bench_moe(KW_FMT_FP8, 1, GEMV_PATH_CORES);
    bench_moe(KW_FMT_FP8, 1, GEMV_PATH_STREAM);
    bench_moe(KW_FMT_FP8, 8, GEMV_PATH_CORES);
    bench_moe(KW_FMT_FP8, 8, GEMV_PATH_STREAM);
    bench_gdn(1);
    bench_gdn(16);
    for (int t = 0; t <= 4; t += t ? t : 1) {
        bench_gdn_seq(1, 512, t);
        bench_gdn_seq(1, 1, t);
        bench_gdn_seq(4, 4, t);
        bench_gdn_seq(64, 1, t);
    }
    bench_gdn_chunks();
    bench_attn(1, 4096);
    bench_attn(1, 65536);
    bench_attn(8, 4096);
    return bench_done();
}

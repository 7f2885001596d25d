/* bench_linear: where the many-row paths start to pay, on the full-size Qwen3.6-35B-A3B shapes.
 *   dense: linear_cuda GEMV vs GEMM path (kernels/linear.h) for GDN qkv 8192x2048, GDN out
 *     2048x4096, the router 256x2048 and the lm_head 248320x2048, in bf16, fp8 (channel
 *     scales) and nvfp4, at n = 1 .. 512 rows;
 *   experts: moe_expert vs moe_grouped, E=256, top-8, I=512, H=2048, same formats and rows,
 *     with moe_grouped's 64-row tiles ("experts") and its 16-row tiles ("experts_t16"); then
 *     (experts mode, nvfp4) "experts_tiles": the tile modes at 16 .. 4096 rows (64-row, 64-row
 *     pipelined, 16-row pipelined) for the routed experts and the shared expert (E=1, top-1: a
 *     64-row batch is 16 blocks of 64-row tiles), for the runner's tile defaults.
 * Weights rotate over copies of >= 192 MB (3x the 60 MB L2) so the cache does not serve them.
 * Times are medians of CUDA-event timings (host launch work included, as the runner pays it).
 * One line per (kind, format, shape, n) with both times, then per (kind, format, shape) the
 * smallest n from which the many-row path is faster at every larger n: the row thresholds of
 * services/worker/gpu/gpu_dispatch.c come from these lines.
 * The lm_head also with the split GEMM (kernels/linear.h) the runner uses for it; nvfp4 dense
 * weights also with LINEAR_PATH_TILES ("dense_tiles": the pipelined W4A16 tiles vs the GEMV; the
 * "dense" lines of the same shape give the dequant + cuBLASLt times to compare).
 * Usage: bench_linear [quick|lm_head|experts] (quick: nvfp4 and bf16, GDN qkv and experts only;
 * lm_head: the lm_head's split GEMM only; experts: the expert sweeps only). */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ktest.h"
#include "kweights.h"
#include "linear.h"
#include "moe_expert.h"
#include "moe_grouped.h"

#define MAX_COPIES 64
#define ROTATE_BYTES (192.0 * 1024 * 1024)

static const int NS[] = { 1, 2, 4, 8, 9, 12, 16, 24, 32, 48, 64, 96, 128, 256, 512 };
#define NN ((int)(sizeof NS / sizeof NS[0]))

struct arg {
    struct linear_ctx *c;
    struct kw_pair *w[MAX_COPIES], *dn[MAX_COPIES];
    int nc, next;
    float *x, *y, *ws, *rw;
    int32_t *ids;
    int n, path, moe, E, K, tile_rows;
};

static void run(void *p)
{
    struct arg *a = p;
    const int i = a->next++ % a->nc;
    int rc;
    if (!a->moe)
        rc = linear_cuda(a->c, a->y, &a->w[i]->dev, 0, a->x, a->n, a->path, 0);
    else if (a->path == LINEAR_PATH_GEMM)
        rc = moe_grouped_cuda_tiles(a->y, a->ws, a->x, a->ids, a->rw, a->n, a->K, a->E,
                                    &a->w[i]->dev, &a->dn[i]->dev, 0, a->tile_rows, 0);
    else
        rc = moe_expert_cuda(a->y, a->ws, a->x, a->ids, a->rw, a->n, a->K, a->E, &a->w[i]->dev,
                             &a->dn[i]->dev, 0, 0);
    if (rc)
        fprintf(stderr, "bench_linear: rc=%d\n", rc);
}

static int copies_for(double bytes)
{
    int nc = (int)(ROTATE_BYTES / bytes) + 1;
    return nc > MAX_COPIES ? MAX_COPIES : nc;
}

/* times[n][path-1]; prints the lines and the threshold. many = path `many` (GEMM, or the
 * lm_head's split GEMM) against the GEMV. */
static void sweep(struct arg *a, const char *kind, const char *fname, const char *shape, int many)
{
    double t[NN][2];
    for (int i = 0; i < NN; i++) {
        a->n = NS[i];
        for (int p = 1; p <= 2; p++) {
            a->path = p == 1 ? LINEAR_PATH_GEMV : many;
            t[i][p - 1] = ktest_time_us(run, a, 3, 15);
        }
        printf("%s fmt=%s shape=%s n=%d few_us=%.1f %s_us=%.1f ratio=%.2f\n", kind, fname, shape,
               NS[i], t[i][0], many == LINEAR_PATH_GEMM_SPLIT ? "split" : "many", t[i][1],
               t[i][1] / t[i][0]);
    }
    int from = NN;
    while (from > 0 && t[from - 1][1] < t[from - 1][0])
        from--;
    printf("threshold %s%s fmt=%s shape=%s many_rows_from=%s%d\n", kind,
           many == LINEAR_PATH_GEMM_SPLIT ? "_split" : "", fname, shape,
           from == NN ? ">" : "", from == NN ? NS[NN - 1] : NS[from]);
    fflush(stdout);
}

static void dense(struct linear_ctx *c, float *x, float *y, const char *fname, int fmt, int rows,
                  int cols, int many)
{
    struct arg a;
    memset(&a, 0, sizeof a);
    a.c = c;
    a.x = x;
    a.y = y;
    struct kw_pair *w = malloc(sizeof(struct kw_pair) * MAX_COPIES);
    kw_pair_make(&w[0], fmt, KW_SCALE_CHANNEL, 1, rows, cols);
    a.nc = copies_for(kw_pair_bytes(&w[0]));
    a.w[0] = &w[0];
    for (int i = 1; i < a.nc; i++) {
        kw_pair_make(&w[i], fmt, KW_SCALE_CHANNEL, 1, rows, cols);
        a.w[i] = &w[i];
    }
    char shape[32];
    snprintf(shape, sizeof shape, "%dx%d", rows, cols);
    sweep(&a, "dense", fname, shape, many);
    /* nvfp4: the pipelined W4A16 tiles against the GEMV too (gpu_model_opts dense_tiles) */
    if (many == LINEAR_PATH_GEMM && fmt == KW_FMT_NVFP4 && linear_tiles_ok(&w[0].dev))
        sweep(&a, "dense_tiles", fname, shape, LINEAR_PATH_TILES);
    for (int i = 0; i < a.nc; i++)
        kw_pair_free(&w[i]);
    free(w);
}

/* a->ids, a->rw on the device: T tokens' top-K routes over E experts (kw_routes), weights 1/8 */
static void routes(struct arg *a, int T, int K, int E)
{
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)T * K);
    float *rw = malloc(sizeof(float) * (size_t)T * K);
    kw_routes(ids, T, K, E);
    for (int i = 0; i < T * K; i++)
        rw[i] = 0.125f;
    a->ids = ktest_dev_from(ids, sizeof(int32_t) * (size_t)T * K);
    a->rw = ktest_dev_from(rw, sizeof(float) * (size_t)T * K);
    free(ids), free(rw);
}

static void experts(float *x, float *y, const char *fname, int fmt)
{
    const int E = 256, K = 8, I = 512, H = 2048, T = NS[NN - 1];
    struct arg a = { .moe = 1, .E = E, .K = K, .x = x, .y = y };
    struct kw_pair *gu = malloc(sizeof(struct kw_pair) * MAX_COPIES);
    struct kw_pair *dn = malloc(sizeof(struct kw_pair) * MAX_COPIES);
    kw_pair_make(&gu[0], fmt, KW_SCALE_CHANNEL, E, 2 * I, H);
    kw_pair_make(&dn[0], fmt, KW_SCALE_CHANNEL, E, H, I);
    a.nc = copies_for(E * (kw_pair_bytes(&gu[0]) + kw_pair_bytes(&dn[0])));
    for (int i = 0; i < a.nc; i++) {
        if (i > 0) {
            kw_pair_make(&gu[i], fmt, KW_SCALE_CHANNEL, E, 2 * I, H);
            kw_pair_make(&dn[i], fmt, KW_SCALE_CHANNEL, E, H, I);
        }
        a.w[i] = &gu[i];
        a.dn[i] = &dn[i];
    }
    routes(&a, T, K, E);
    size_t w1 = moe_expert_ws_floats(T, K, I, H), w2 = moe_grouped_ws_floats(T, K, E, I, H);
    a.ws = ktest_dev_alloc(sizeof(float) * (w1 > w2 ? w1 : w2));
    a.tile_rows = MOE_GROUPED_TILE_ROWS;
    sweep(&a, "experts", fname, "E256xK8xI512xH2048", LINEAR_PATH_GEMM);
    a.tile_rows = MOE_GROUPED_TILE_ROWS_SMALL;
    sweep(&a, "experts_t16", fname, "E256xK8xI512xH2048", LINEAR_PATH_GEMM);
    ktest_free(a.ids), ktest_free(a.rw), ktest_free(a.ws);
    for (int i = 0; i < a.nc; i++) {
        kw_pair_free(&gu[i]);
        kw_pair_free(&dn[i]);
    }
    free(gu), free(dn);
}

/* The grouped GEMM's tile modes at 16 .. 4096 rows: 64-row tiles, 64-row tiles pipelined
 * (MOE_GROUPED_PIPE64), 16-row tiles (pipelined for nvfp4), 64-row pipelined with 1 x 4 warps
 * (MOE_GROUPED_PIPE64_COLS, "p64c"), one line per n, to choose the runner's grouped_small and
 * grouped_pipe64 defaults. One weight copy: the routed experts' ~400 MB of nvfp4 are far past
 * the L2; the shared expert's 1.6 MB is not (its times are L2 times, optimistic against a decode
 * step that streams the whole model). */
static void experts_tiles(const char *fname, int fmt, int E, int K)
{
    static const int TN[] = { 16, 64, 128, 256, 512, 1024, 2048, 4096 };
    const int I = 512, H = 2048, T = TN[sizeof TN / sizeof TN[0] - 1];
    struct arg a = { .moe = 1, .E = E, .K = K, .path = LINEAR_PATH_GEMM };
    struct kw_pair gu, dn;
    kw_pair_make(&gu, fmt, KW_SCALE_CHANNEL, E, 2 * I, H);
    kw_pair_make(&dn, fmt, KW_SCALE_CHANNEL, E, H, I);
    a.nc = 1;
    a.w[0] = &gu;
    a.dn[0] = &dn;
    float *hx = malloc(sizeof(float) * (size_t)T * H);
    ktest_fill(hx, (size_t)T * H, -1, 1);
    a.x = ktest_dev_from(hx, sizeof(float) * (size_t)T * H);
    a.y = ktest_dev_alloc(sizeof(float) * (size_t)T * H);
    routes(&a, T, K, E);
    a.ws = ktest_dev_alloc(sizeof(float) * moe_grouped_ws_floats(T, K, E, I, H));
    static const struct {
        const char *name;
        int rows;
    } M[] = { { "t64", MOE_GROUPED_TILE_ROWS },
              { "p64", MOE_GROUPED_TILE_ROWS | MOE_GROUPED_PIPE64 },
              { "t16", MOE_GROUPED_TILE_ROWS_SMALL },
              { "p64c", MOE_GROUPED_TILE_ROWS | MOE_GROUPED_PIPE64 | MOE_GROUPED_PIPE64_COLS } };
    enum { NM = sizeof M / sizeof M[0] };
    for (size_t i = 0; i < sizeof TN / sizeof TN[0]; i++) {
        double t[NM];
        a.n = TN[i];
        printf("experts_tiles fmt=%s shape=E%dxK%dxI512xH2048 n=%d", fname, E, K, TN[i]);
        for (int m = 0; m < NM; m++) {
            a.tile_rows = M[m].rows;
            t[m] = ktest_time_us(run, &a, 2, 9);
            printf(" %s_us=%.1f", M[m].name, t[m]);
        }
        printf(" p64_vs_t64=%.2f t16_vs_t64=%.2f p64c_vs_p64=%.2f\n", t[1] / t[0], t[2] / t[0],
               t[3] / t[1]);
        fflush(stdout);
    }
    ktest_free(a.ids), ktest_free(a.rw), ktest_free(a.ws), ktest_free(a.x), ktest_free(a.y);
    kw_pair_free(&gu);
    kw_pair_free(&dn);
    free(hx);
}

int main(int argc, char **argv)
{
    const int quick = argc > 1 && strcmp(argv[1], "quick") == 0;
    const int lm_only = argc > 1 && strcmp(argv[1], "lm_head") == 0;
    const int ex_only = argc > 1 && strcmp(argv[1], "experts") == 0;
    if (argc > 2 || (argc == 2 && !quick && !lm_only && !ex_only)) {
        fprintf(stderr, "bench_linear: unknown argument '%s' (usage: bench_linear "
                "[quick|lm_head|experts])\n", argv[argc - 1]);
        return 2;
    }
    ktest_require_gpu();
    ktest_seed(3);
    const int T = NS[NN - 1], KMAX = 4096;
    float *hx = malloc(sizeof(float) * (size_t)T * KMAX);
    ktest_fill(hx, (size_t)T * KMAX, -1, 1);
    float *x = ktest_dev_from(hx, sizeof(float) * (size_t)T * KMAX);
    float *y = ktest_dev_alloc(sizeof(float) * (size_t)T * 248320);
    struct linear_ctx *c = NULL;
    if (linear_ctx_create(&c, T, KMAX, (int64_t)32 << 20, 32u << 20) != 0) {
        fprintf(stderr, "bench_linear: linear_ctx_create failed\n");
        return 1;
    }
    static const struct {
        const char *name;
        int fmt;
    } F[] = { { "nvfp4", KW_FMT_NVFP4 }, { "bf16", KW_FMT_BF16 }, { "fp8", KW_FMT_FP8 } };
    for (int f = 0; f < (quick && !lm_only ? 2 : 3); f++) {
        if (lm_only) {
            dense(c, x, y, F[f].name, F[f].fmt, 248320, 2048, LINEAR_PATH_GEMM_SPLIT);
            continue;
        }
        if (ex_only) {
            experts(x, y, F[f].name, F[f].fmt);
            if (F[f].fmt == KW_FMT_NVFP4) {
                experts_tiles(F[f].name, F[f].fmt, 256, 8); /* the routed experts */
                experts_tiles(F[f].name, F[f].fmt, 1, 1);   /* the shared expert */
            }
            continue;
        }
        dense(c, x, y, F[f].name, F[f].fmt, 8192, 2048, LINEAR_PATH_GEMM);
        if (!quick) {
            dense(c, x, y, F[f].name, F[f].fmt, 2048, 4096, LINEAR_PATH_GEMM);
            dense(c, x, y, F[f].name, F[f].fmt, 256, 2048, LINEAR_PATH_GEMM);
            dense(c, x, y, F[f].name, F[f].fmt, 248320, 2048, LINEAR_PATH_GEMM);
            dense(c, x, y, F[f].name, F[f].fmt, 248320, 2048, LINEAR_PATH_GEMM_SPLIT);
        }
        experts(x, y, F[f].name, F[f].fmt);
    }
    linear_ctx_destroy(c);
    ktest_free(x), ktest_free(y);
    free(hx);
    return 0;
}

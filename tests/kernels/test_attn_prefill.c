/* attn_prefill: GPU vs reference (double softmax per row). Chunks of T in {1, 7, 33, 64, 100,
 * 300} rows at pos0 = 0 and pos0 > 0 (chunked prefill, contexts up to 2001 positions), contexts
 * not multiples of the block size, GQA ratios 1/3/4/8, head dims 32/40/48/64/256, bf16 and fp8
 * KV (with and without scales), the single-sequence and the batched entry points (shuffled block
 * tables, descriptors whose seq and row order differ, an empty descriptor, max_rows above every
 * chunk). Both sides read the same cache bytes and fp32 q. Every case runs the plain entry point
 * (path auto) and each path explicitly (FLASH where attn_prefill_flash_ok, WGMMA where
 * attn_prefill_wgmma_ok, a line saying so where it is not; the batched cases also
 * attn_prefill_split_cuda at 3 part counts, at FLASH's tolerance): CORES accumulates exact
 * products in fp32 with __expf: atol = 1e-4 * max|ref| (outputs are averages of O(1) values) plus
 * rtol 1e-4; MMA rounds q and the probabilities to bf16 (m16n8k16 inputs): 2e-2 (see the comment at
 * the check); FLASH on e4m3 caches rounds them to fp16 (inside the same tolerance). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_prefill.h"
#include "common/err.h"
#include "ktest.h"
#include "kv_write.h"
#include "test.h"

struct pcase {
    int n_seqs;       /* descriptors (one may be empty) */
    const int *T;     /* rows per descriptor */
    const int *pos0;  /* first position per descriptor */
    int hq, hkv, hd, bs;
    int dt;
    float ks, vs;
    int batch;        /* 0: attn_prefill_cuda (n_seqs must be 1) */
    int gate;
};

static void run_case(const struct pcase *c)
{
    const int n = c->n_seqs, hd = c->hd, hkv = c->hkv, hq = c->hq, bs = c->bs;
    int mb = 1, rows = 0, max_rows = 0;
    for (int s = 0; s < n; s++) {
        int ctx = c->pos0[s] + c->T[s], b = (ctx + bs - 1) / bs;
        mb = b > mb ? b : mb;
        rows += c->T[s];
        max_rows = c->T[s] > max_rows ? c->T[s] : max_rows;
    }
    if (c->batch)
        max_rows += 3; /* the grid may be larger than any chunk */
    const int n_blocks = n * mb + 2;
    const size_t w = (size_t)hkv * hd, esz = (size_t)kv_dtype_bytes(c->dt);
    const size_t ncache = (size_t)n_blocks * bs * w;
    int32_t *bt = malloc((size_t)n * mb * 4), *perm = malloc((size_t)n_blocks * 4);
    uint8_t *kc = calloc(ncache, esz), *vc = calloc(ncache, esz);
    struct attn_prefill_seq *d = malloc(sizeof(*d) * (size_t)n);
    char what[160];
    for (int i = 0; i < n_blocks; i++)
        perm[i] = i;
    for (int i = n_blocks - 1; i > 0; i--) {
        int j = (int)(ktest_u32() % (uint32_t)(i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int i = 0; i < n * mb; i++)
        bt[i] = perm[i];
    /* descriptor s uses block-table row n-1-s; its rows are placed in reverse order too */
    for (int s = 0, r = rows; s < n; s++) {
        r -= c->T[s];
        d[s] = (struct attn_prefill_seq){n - 1 - s, r, c->T[s], c->pos0[s]};
    }
    for (int s = 0; s < n; s++) {
        const int ctx = c->pos0[s] + c->T[s];
        const int32_t *row = bt + (size_t)d[s].seq * mb;
        float *k = malloc((size_t)ctx * w * 4 + 4), *v = malloc((size_t)ctx * w * 4 + 4);
        int32_t *sm = malloc((size_t)ctx * 4 + 4);
        ktest_fill(k, (size_t)ctx * w, -1, 1);
        ktest_fill(v, (size_t)ctx * w, -1, 1); /* fp8 stores x/scale: raw up to 1/scale */
        for (int j = 0; j < ctx; j++)
            sm[j] = row[j / bs] * bs + j % bs;
        CHECK_EQ_INT(kv_write_dtype_ref(kc, vc, k, v, sm, ctx, hkv, hd, c->dt, c->ks, c->vs), 0);
        free(k), free(v), free(sm);
    }
    const size_t nq = (size_t)rows * hq * hd;
    float *q = malloc(nq * 4 + 4), *gate = malloc(nq * 4 + 4), *ref = malloc(nq * 4 + 4),
          *got = malloc(nq * 4 + 4);
    ktest_fill(q, nq, -3, 3);
    ktest_fill(gate, nq, -3, 3);
    uint8_t *dkc = ktest_dev_from(kc, ncache * esz), *dvc = ktest_dev_from(vc, ncache * esz);
    float *dq = ktest_dev_from(q, nq * 4 + 4), *dg = ktest_dev_from(gate, nq * 4 + 4);
    int32_t *dbt = ktest_dev_from(bt, (size_t)n * mb * 4);
    struct attn_prefill_seq *dd = ktest_dev_from(d, sizeof(*d) * (size_t)n);
    const float scale = 1.0f / sqrtf((float)hd);
    const float *hg = c->gate ? gate : NULL, *dgg = c->gate ? dg : NULL;
    CHECK_EQ_INT(attn_prefill_batch_ref(ref, q, hg, kc, vc, c->dt, c->ks, c->vs, bt, mb, d, n,
                                        max_rows, hq, hkv, hd, bs, scale),
                 0);
    double mx = 0.0;
    for (size_t i = 0; i < nq; i++)
        mx = fabs(ref[i]) > mx ? fabs(ref[i]) : mx;
    for (int path = ATTN_PREFILL_PATH_AUTO; path <= ATTN_PREFILL_PATH_WGMMA; path++) {
        static const char *names[] = {"auto", "cores", "mma", "flash", "wgmma"};
        if (path == ATTN_PREFILL_PATH_MMA && hd % 16)
            continue; /* the tensor-core path needs head_dim % 16 == 0 */
        if (path == ATTN_PREFILL_PATH_FLASH && !attn_prefill_flash_ok(hd, c->dt))
            continue; /* head_dim 64 / 128 / 256 (bf16 or e4m3 caches) */
        if (path == ATTN_PREFILL_PATH_WGMMA && !attn_prefill_wgmma_ok(hd, c->dt)) {
            printf("attn_prefill wgmma hd=%d dt=%d: not run (no sm_90a code or not a 9.0 "
                   "device)\n",
                   hd, c->dt);
            continue;
        }
        float *dy = ktest_dev_poison(nq + 1);
        if (path == ATTN_PREFILL_PATH_AUTO && c->batch) /* the plain entry points */
            CHECK_EQ_INT(attn_prefill_batch_cuda(dy, dq, dgg, dkc, dvc, c->dt, c->ks, c->vs, dbt,
                                                 mb, dd, n, max_rows, hq, hkv, hd, bs, scale, 0),
                         0);
        else if (path == ATTN_PREFILL_PATH_AUTO)
            CHECK_EQ_INT(attn_prefill_cuda(dy, dq, dgg, dkc, dvc, c->dt, c->ks, c->vs,
                                           dbt + (size_t)d[0].seq * mb, c->T[0], c->pos0[0], hq,
                                           hkv, hd, bs, scale, 0),
                         0);
        else if (c->batch)
            CHECK_EQ_INT(attn_prefill_batch_path_cuda(dy, dq, dgg, dkc, dvc, c->dt, c->ks, c->vs,
                                                      dbt, mb, dd, n, max_rows, hq, hkv, hd, bs,
                                                      scale, path, 0),
                         0);
        else
            CHECK_EQ_INT(attn_prefill_path_cuda(dy, dq, dgg, dkc, dvc, c->dt, c->ks, c->vs,
                                                dbt + (size_t)d[0].seq * mb, c->T[0], c->pos0[0],
                                                hq, hkv, hd, bs, scale, path, 0),
                         0);
        ktest_to_host(got, dy, nq * 4);
        ktest_free(dy);
        snprintf(what, sizeof(what),
                 "attn_prefill %s/%s dt=%d seqs=%d T0=%d pos0_0=%d rows=%d hq=%d hkv=%d hd=%d "
                 "bs=%d%s",
                 c->batch ? "batch" : "single", names[path], c->dt, n, c->T[0], c->pos0[0], rows,
                 hq, hkv, hd, bs, c->gate ? "" : " (no gate)");
        /* cores: fp32 products of the exact inputs -> 1e-4; mma, flash, wgmma (and auto, which may
         * resolve to mma): q and P rounded to bf16 (rel. error <= 2^-9 each, score error ~1e-3
         * rms) -> 2e-2 */
        const double tol = path == ATTN_PREFILL_PATH_CORES ? 1e-4 : 2e-2;
        CHECK(ktest_compare(what, got, ref, nq, tol * mx, tol) == 0);
    }
    /* the split form (batched descriptors only): the launcher's parts for the chunk's length,
     * one part, and 5 (parts without a key tile where a context has fewer than 5 tiles) */
    int ctx_max = 1;
    for (int s = 0; s < n; s++)
        ctx_max = c->pos0[s] + c->T[s] > ctx_max ? c->pos0[s] + c->T[s] : ctx_max;
    const int split_parts[3] = {attn_prefill_split_parts(n, max_rows, hq, hkv, ctx_max, 0), 1, 5};
    for (int v = 0; c->batch && attn_prefill_split_ok(hd, c->dt) && v < 3; v++) {
        const int parts = split_parts[v];
        float *dy = ktest_dev_poison(nq + 1);
        float *ws = ktest_dev_poison(attn_prefill_split_ws_floats(rows, hq, hd, parts));
        CHECK_EQ_INT(attn_prefill_split_cuda(dy, ws, parts, dq, dgg, dkc, dvc, c->dt, dbt, mb, dd,
                                             n, max_rows, hq, hkv, hd, bs, scale, 0),
                     0);
        ktest_to_host(got, dy, nq * 4);
        ktest_free(dy);
        ktest_free(ws);
        snprintf(what, sizeof(what),
                 "attn_prefill_split parts=%d seqs=%d T0=%d pos0_0=%d rows=%d hq=%d hkv=%d hd=%d "
                 "bs=%d%s",
                 parts, n, c->T[0], c->pos0[0], rows, hq, hkv, hd, bs, c->gate ? "" : " (no gate)");
        CHECK(ktest_compare(what, got, ref, nq, 2e-2 * mx, 2e-2) == 0); /* as flash */
    }
    ktest_free(dkc), ktest_free(dvc), ktest_free(dq), ktest_free(dg), ktest_free(dbt);
    ktest_free(dd);
    free(bt), free(perm), free(kc), free(vc), free(d), free(q), free(gate), free(ref), free(got);
}

int main(void)
{
    static const int t1[] = {1}, t7[] = {7}, t64[] = {64}, t300[] = {300}, t33[] = {33};
    static const int t100[] = {100};
    static const int p0[] = {0}, p37[] = {37}, p1000[] = {1000}, p3[] = {3}, p2[] = {2};
    static const int bt4[] = {7, 300, 0, 1, 64}, bp4[] = {0, 513, 9, 2000, 5};
    static const int bt3[] = {64, 1, 300}, bp3[] = {100, 0, 33};
    /* decode rows and verify windows (the split form's items), one at a long context */
    static const int dt5[] = {1, 1, 4, 9, 1}, dp5[] = {0, 2000, 100, 37, 31};
    const struct pcase cases[] = {
        {1, t1, p0, 16, 2, 256, 16, KV_DTYPE_BF16, 1.0f, 1.0f, 0, 1},
        {1, t1, p2, 16, 2, 256, 16, KV_DTYPE_BF16, 1.0f, 1.0f, 0, 1},
        {1, t7, p0, 4, 4, 64, 16, KV_DTYPE_FP8, 0.02f, 0.03f, 0, 1},
        {1, t64, p37, 8, 2, 32, 16, KV_DTYPE_BF16, 1.0f, 1.0f, 0, 1},
        {1, t64, p37, 8, 2, 32, 16, KV_DTYPE_FP8, 1.0f, 1.0f, 0, 0},
        {1, t300, p0, 8, 1, 256, 16, KV_DTYPE_BF16, 1.0f, 1.0f, 0, 1},
        {1, t300, p1000, 16, 2, 256, 16, KV_DTYPE_BF16, 1.0f, 1.0f, 0, 1},
        {1, t100, p1000, 4, 2, 128, 16, KV_DTYPE_BF16, 1.0f, 1.0f, 0, 0},
        {1, t100, p1000, 8, 1, 256, 16, KV_DTYPE_FP8, 0.05f, 0.05f, 0, 1},
        {1, t33, p3, 9, 3, 40, 5, KV_DTYPE_BF16, 1.0f, 1.0f, 0, 1},
        {1, t33, p3, 9, 3, 48, 5, KV_DTYPE_FP8, 0.1f, 0.1f, 0, 1},
        {5, bt4, bp4, 8, 1, 64, 32, KV_DTYPE_FP8, 1.0f, 1.0f, 1, 1},
        {5, bt4, bp4, 8, 1, 64, 32, KV_DTYPE_BF16, 1.0f, 1.0f, 1, 1},
        {3, bt3, bp3, 4, 1, 256, 7, KV_DTYPE_BF16, 1.0f, 1.0f, 1, 0},
        {3, bt3, bp3, 8, 1, 256, 16, KV_DTYPE_FP8, 0.01f, 0.02f, 1, 1},
        {5, dt5, dp5, 16, 2, 256, 16, KV_DTYPE_BF16, 1.0f, 1.0f, 1, 1},
        {5, dt5, dp5, 8, 4, 128, 5, KV_DTYPE_BF16, 1.0f, 1.0f, 1, 0},
    };
    ktest_require_gpu();
    ktest_seed(11);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        run_case(&cases[i]);
    /* parameter checks */
    CHECK_EQ_INT(attn_prefill_cuda((float *)16, (float *)16, NULL, (void *)16, (void *)16,
                                   KV_DTYPE_BF16, 1.0f, 1.0f, (int32_t *)16, 4, 0, 16, 2, 264, 16,
                                   1.0f, 0),
                 ERR_INVAL); /* head_dim > 256 */
    CHECK_EQ_INT(attn_prefill_cuda((float *)16, (float *)16, NULL, (void *)16, (void *)16,
                                   KV_DTYPE_BF16, 1.0f, 1.0f, (int32_t *)16, 4, 0, 16, 2, 36, 16,
                                   1.0f, 0),
                 ERR_INVAL); /* head_dim % 8 */
    CHECK_EQ_INT(attn_prefill_cuda((float *)16, (float *)16, NULL, (void *)16, (void *)16,
                                   KV_DTYPE_BF16, 1.0f, 1.0f, (int32_t *)16, 4, 0, 16, 3, 64, 16,
                                   1.0f, 0),
                 ERR_INVAL); /* hq % hkv */
    CHECK_EQ_INT(attn_prefill_cuda((float *)16, (float *)16, NULL, (void *)16, (void *)16,
                                   KV_DTYPE_FP8, -1.0f, 1.0f, (int32_t *)16, 4, 0, 16, 2, 64, 16,
                                   1.0f, 0),
                 ERR_INVAL); /* bad fp8 scale */
    CHECK_EQ_INT(attn_prefill_batch_cuda((float *)16, (float *)16, NULL, (void *)16, (void *)16,
                                         KV_DTYPE_BF16, 1.0f, 1.0f, (int32_t *)16, 4, NULL, 1, 4,
                                         16, 2, 64, 16, 1.0f, 0),
                 ERR_INVAL); /* no descriptors */
    CHECK_EQ_INT(attn_prefill_path_cuda((float *)16, (float *)16, NULL, (void *)16, (void *)16,
                                        KV_DTYPE_FP8, 1.0f, 1.0f, (int32_t *)16, 4, 0, 16, 2, 32,
                                        16, 1.0f, ATTN_PREFILL_PATH_FLASH, 0),
                 ERR_INVAL); /* flash on e4m3 caches: head_dim 64 / 128 / 256 too */
    CHECK_EQ_INT(attn_prefill_path_cuda((float *)16, (float *)16, NULL, (void *)16, (void *)16,
                                        KV_DTYPE_BF16, 1.0f, 1.0f, (int32_t *)16, 4, 0, 16, 2, 96,
                                        16, 1.0f, ATTN_PREFILL_PATH_FLASH, 0),
                 ERR_INVAL); /* flash: head_dim 64 / 128 / 256 */
    ktest_sync();
    return test_result();
}

/* rmsnorm, fused_add_rmsnorm, embed, cast_bf16, argmax: GPU vs reference on odd shapes. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "argmax.h"
#include "cast_bf16.h"
#include "common/err.h"
#include "embed.h"
#include "fused_add_rmsnorm.h"
#include "kdtype.h"
#include "ktest.h"
#include "rmsnorm.h"
#include "test.h"

static void test_rmsnorm(int rows, int dim, float off)
{
    size_t n = (size_t)rows * dim;
    float *x = malloc(n * 4), *w = malloc((size_t)dim * 4), *ref = malloc(n * 4),
          *got = malloc(n * 4);
    float *r2 = malloc(n * 4), *dx2 = malloc(n * 4);
    char what[96];
    ktest_fill(x, n, -3, 3);
    ktest_fill(w, (size_t)dim, -0.5f, 0.5f);
    float *dx = ktest_dev_from(x, n * 4), *dw = ktest_dev_from(w, (size_t)dim * 4);
    float *dy = ktest_dev_poison(n);
    CHECK_EQ_INT(rmsnorm_ref(ref, x, w, rows, dim, 1e-6f, off), 0);
    CHECK_EQ_INT(rmsnorm_cuda(dy, dx, dw, rows, dim, 1e-6f, off, 0), 0);
    ktest_to_host(got, dy, n * 4);
    snprintf(what, sizeof(what), "rmsnorm rows=%d dim=%d off=%g", rows, dim, off);
    CHECK(ktest_compare(what, got, ref, n, 1e-5, 1e-4) == 0);

    /* fused: resid += x2; out = norm(resid) */
    float *res = malloc(n * 4), *dres, *dout;
    ktest_fill(res, n, -3, 3);
    ktest_fill(dx2, n, -1, 1);
    dres = ktest_dev_from(res, n * 4);
    float *dd = ktest_dev_from(dx2, n * 4);
    dout = ktest_dev_poison(n);
    CHECK_EQ_INT(fused_add_rmsnorm_ref(r2, res, dx2, w, rows, dim, 1e-6f, off), 0);
    CHECK_EQ_INT(fused_add_rmsnorm_cuda(dout, dres, dd, dw, rows, dim, 1e-6f, off, 0), 0);
    ktest_to_host(got, dout, n * 4);
    snprintf(what, sizeof(what), "fused_add_rmsnorm out rows=%d dim=%d", rows, dim);
    CHECK(ktest_compare(what, got, r2, n, 1e-5, 1e-4) == 0);
    ktest_to_host(got, dres, n * 4);
    snprintf(what, sizeof(what), "fused_add_rmsnorm resid rows=%d dim=%d", rows, dim);
    CHECK(ktest_compare(what, got, res, n, 0, 0) == 0);
    ktest_free(dx);
    ktest_free(dw);
    ktest_free(dy);
    ktest_free(dres);
    ktest_free(dd);
    ktest_free(dout);
    free(x), free(w), free(ref), free(got), free(r2), free(dx2), free(res);
}

static void test_embed_cast(int vocab, int dim, int n_tok)
{
    uint16_t *tab = malloc((size_t)vocab * dim * 2);
    int32_t *ids = malloc((size_t)n_tok * 4);
    float *ref = malloc((size_t)n_tok * dim * 4), *got = malloc((size_t)n_tok * dim * 4);
    for (size_t i = 0; i < (size_t)vocab * dim; i++)
        tab[i] = kdtype_f32_to_bf16(ktest_uniform(-1, 1));
    for (int t = 0; t < n_tok; t++)
        ids[t] = (int32_t)(ktest_u32() % (uint32_t)vocab);
    ids[0] = vocab - 1;
    if (n_tok > 2)
        ids[1] = vocab + 5; /* out of range -> zeros */
    void *dt = ktest_dev_from(tab, (size_t)vocab * dim * 2),
         *di = ktest_dev_from(ids, (size_t)n_tok * 4);
    float *dy = ktest_dev_poison((size_t)n_tok * dim);
    CHECK_EQ_INT(embed_ref(ref, tab, ids, n_tok, dim, vocab), 0);
    CHECK_EQ_INT(embed_cuda(dy, dt, di, n_tok, dim, vocab, 0), 0);
    ktest_to_host(got, dy, (size_t)n_tok * dim * 4);
    CHECK(ktest_compare("embed", got, ref, (size_t)n_tok * dim, 0, 0) == 0);
    {
        /* embed_rmsnorm: the bits of embed_cuda + rmsnorm_cuda (the same launches' operations),
         * and the reference at the norm's tolerance */
        float *w = malloc((size_t)dim * 4), *h2 = malloc((size_t)n_tok * dim * 4),
              *x2 = malloc((size_t)n_tok * dim * 4), *xr = malloc((size_t)n_tok * dim * 4),
              *hr = malloc((size_t)n_tok * dim * 4), *x1 = malloc((size_t)n_tok * dim * 4);
        ktest_fill(w, dim, -0.5, 0.5);
        float *dw = ktest_dev_from(w, (size_t)dim * 4),
              *dx1 = ktest_dev_poison((size_t)n_tok * dim),
              *dh2 = ktest_dev_poison((size_t)n_tok * dim),
              *dx2 = ktest_dev_poison((size_t)n_tok * dim);
        CHECK_EQ_INT(rmsnorm_cuda(dx1, dy, dw, n_tok, dim, 1e-6f, 1.0f, 0), 0);
        CHECK_EQ_INT(embed_rmsnorm_cuda(dh2, dx2, dt, di, n_tok, dim, vocab, dw, 1e-6f, 1.0f, 0),
                     0);
        ktest_to_host(x1, dx1, (size_t)n_tok * dim * 4);
        ktest_to_host(h2, dh2, (size_t)n_tok * dim * 4);
        ktest_to_host(x2, dx2, (size_t)n_tok * dim * 4);
        CHECK(memcmp(h2, got, (size_t)n_tok * dim * 4) == 0);
        CHECK(memcmp(x2, x1, (size_t)n_tok * dim * 4) == 0);
        CHECK_EQ_INT(embed_rmsnorm_ref(hr, xr, tab, ids, n_tok, dim, vocab, w, 1e-6f, 1.0f), 0);
        CHECK(ktest_compare("embed_rmsnorm h", h2, hr, (size_t)n_tok * dim, 0, 0) == 0);
        CHECK(ktest_compare("embed_rmsnorm x", x2, xr, (size_t)n_tok * dim, 1e-5, 1e-5) == 0);
        CHECK_EQ_INT(embed_rmsnorm_cuda(dh2, dh2, dt, di, n_tok, dim, vocab, dw, 1e-6f, 1.0f, 0),
                     ERR_INVAL);
        fprintf(stderr, "embed_rmsnorm vocab=%d dim=%d tok=%d: the two launches' bits\n", vocab,
                dim, n_tok);
        ktest_free(dw), ktest_free(dx1), ktest_free(dh2), ktest_free(dx2);
        free(w), free(h2), free(x2), free(xr), free(hr), free(x1);
    }

    /* cast_bf16 of random values incl. halfway cases */
    size_t n = (size_t)n_tok * dim;
    uint16_t *cr = malloc(n * 2), *cg = malloc(n * 2);
    for (size_t i = 0; i < n; i++)
        ref[i] = ktest_uniform(-100, 100);
    ref[0] = 1.0f + 1.0f / 256.0f; /* exact tie */
    float *dx = ktest_dev_from(ref, n * 4);
    uint16_t *dc = ktest_dev_alloc(n * 2);
    CHECK_EQ_INT(cast_bf16_ref(cr, ref, (int64_t)n), 0);
    CHECK_EQ_INT(cast_bf16_cuda(dc, dx, (int64_t)n, 0), 0);
    ktest_to_host(cg, dc, n * 2);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (cr[i] != cg[i] && bad++ < 5)
            fprintf(stderr, "  cast_bf16 mismatch at %zu: %04x vs %04x\n", i, cg[i], cr[i]);
    fprintf(stderr, "cast_bf16: n=%zu mismatches=%zu\n", n, bad);
    CHECK(bad == 0);
    ktest_free(dt), ktest_free(di), ktest_free(dy), ktest_free(dx), ktest_free(dc);
    free(tab), free(ids), free(ref), free(got), free(cr), free(cg);
}

/* argmax_cuda (twice: its key and counter words must be back at 0) vs argmax_ref. Row 0: ties
 * between two maxima (one inside a 16-byte load, one far apart: in other blocks) -> the lower
 * index; row 1: NaNs; row 2: -0 before +0 as the maximum
 * (equal: the lower index); row 3: all NaN -> 0. */
static void test_argmax(int rows, int vocab)
{
    float *l = malloc((size_t)rows * vocab * 4);
    int32_t ref[16], got[16];
    ktest_fill(l, (size_t)rows * vocab, -10, 10);
    l[vocab - 1] = 50;
    l[vocab / 3] = 50;
    if (vocab / 3 + 1 < vocab - 1)
        l[vocab / 3 + 1] = 50; /* a tie inside one 16-byte load too */
    if (rows > 1) {
        l[vocab + 5] = NAN;
        l[vocab + vocab - 2] = 60;
    }
    if (rows > 2 && vocab > 8) {
        for (int i = 0; i < vocab; i++)
            l[2 * (size_t)vocab + i] = -1.0f - (float)(i % 7);
        l[2 * (size_t)vocab + 7] = -0.0f;
        l[2 * (size_t)vocab + vocab - 1] = 0.0f;
    }
    if (rows > 3)
        for (int i = 0; i < vocab; i++)
            l[3 * (size_t)vocab + i] = NAN;
    float *dl = ktest_dev_from(l, (size_t)rows * vocab * 4);
    int32_t *di = ktest_dev_alloc(64);
    unsigned long long *dws = ktest_dev_alloc(argmax_ws_words(rows) * 8), hws[32];
    cudaMemset(dws, 0, argmax_ws_words(rows) * 8);
    CHECK_EQ_INT(argmax_ref(ref, l, rows, vocab), 0);
    for (int rep = 0; rep < 2; rep++) {
        cudaMemset(di, 0xff, 64);
        CHECK_EQ_INT(argmax_cuda(di, dl, rows, vocab, dws, 0), 0);
        ktest_to_host(got, di, (size_t)rows * 4);
        for (int r = 0; r < rows; r++)
            CHECK_EQ_INT(got[r], ref[r]);
        ktest_to_host(hws, dws, argmax_ws_words(rows) * 8);
        for (size_t i = 0; i < argmax_ws_words(rows); i++)
            CHECK(hws[i] == 0);
    }
    CHECK_EQ_INT(ref[0], vocab / 3);
    if (rows > 2 && vocab > 8)
        CHECK_EQ_INT(ref[2], 7);
    if (rows > 3)
        CHECK_EQ_INT(ref[3], 0);
    CHECK_EQ_INT(argmax_cuda(di, dl, rows, vocab, NULL, 0), ERR_INVAL);
    fprintf(stderr, "argmax rows=%d vocab=%d done\n", rows, vocab);
    ktest_free(dl), ktest_free(di), ktest_free(dws);
    free(l);
}

int main(void)
{
    ktest_require_gpu();
    ktest_seed(7);
    test_rmsnorm(1, 2048, 1.0f);
    test_rmsnorm(5, 2048, 1.0f);
    test_rmsnorm(37, 256, 1.0f);
    test_rmsnorm(3, 128, 0.0f);
    test_rmsnorm(2, 1000, 1.0f);
    test_rmsnorm(2, 1002, 1.0f);  /* dim % 4 != 0: the shared-memory kernel */
    test_rmsnorm(3, 8196, 1.0f);  /* 3 float4 per thread, 704 threads */
    test_rmsnorm(2, 12288, 0.0f); /* the largest dim: 3 per thread, 1024 threads */
    test_embed_cast(1000, 2048, 7);
    test_embed_cast(37, 100, 3);
    test_embed_cast(50, 1002, 2); /* 1002: rmsnorm's 256 threads, a partial round */
    test_embed_cast(40, 300, 1);
    test_argmax(4, 248320); /* the model's vocabulary: 31 blocks a row */
    test_argmax(4, 1003);   /* unaligned rows: float loads */
    test_argmax(16, 1001);
    test_argmax(2, 1000); /* 16-byte loads: rows 4,000 bytes apart */
    test_argmax(1, 4);
    CHECK_EQ_INT(rmsnorm_cuda(NULL, NULL, NULL, 1, 8, 1e-6f, 1, 0), ERR_INVAL);
    ktest_sync();
    return test_result();
}

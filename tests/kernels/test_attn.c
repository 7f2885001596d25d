/* rope, kv_write and attn_decode: GPU vs reference. The cache is filled through kv_write with a
 * shuffled block table; contexts of 1, odd lengths, and longer than several splits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_decode.h"
#include "common/err.h"
#include "kdtype.h"
#include "ktest.h"
#include "kv_write.h"
#include "rope.h"
#include "test.h"

static void test_rope(int n_tok, int heads, int hd, int rot, int64_t hstride)
{
    int64_t tstride = heads * hstride;
    size_t n = (size_t)n_tok * tstride;
    float *x = malloc(n * 4), *got = malloc(n * 4);
    int32_t *pos = malloc((size_t)n_tok * 4);
    char what[96];
    ktest_fill(x, n, -2, 2);
    for (int t = 0; t < n_tok; t++)
        pos[t] = t == 0 ? 262143 : (int32_t)(ktest_u32() % 300000u);
    float *dx = ktest_dev_from(x, n * 4);
    int32_t *dp = ktest_dev_from(pos, (size_t)n_tok * 4);
    CHECK_EQ_INT(rope_ref(x, pos, n_tok, heads, hd, rot, tstride, hstride, 1e7f), 0);
    CHECK_EQ_INT(rope_cuda(dx, dp, n_tok, heads, hd, rot, tstride, hstride, 1e7f, 0), 0);
    ktest_to_host(got, dx, n * 4);
    snprintf(what, sizeof(what), "rope tok=%d heads=%d hd=%d rot=%d", n_tok, heads, hd, rot);
    CHECK(ktest_compare(what, got, x, n, 1e-5, 1e-5) == 0);
    ktest_free(dx), ktest_free(dp);
    free(x), free(got), free(pos);
}

static void test_attn(int n_seq, int hq, int hkv, int hd, int bs, const int *lens)
{
    int max_len = 0;
    for (int s = 0; s < n_seq; s++)
        max_len = lens[s] > max_len ? lens[s] : max_len;
    const int mb = (max_len + bs - 1) / bs, n_blocks = n_seq * mb + 3;
    const size_t w = (size_t)hkv * hd, ncache = (size_t)n_blocks * bs * w;
    int32_t *bt = malloc((size_t)n_seq * mb * 4), *perm = malloc((size_t)n_blocks * 4);
    uint16_t *kc = calloc(ncache, 2), *vc = calloc(ncache, 2);
    char what[96];
    for (int i = 0; i < n_blocks; i++)
        perm[i] = i;
    for (int i = n_blocks - 1; i > 0; i--) {
        int j = (int)(ktest_u32() % (uint32_t)(i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int i = 0; i < n_seq * mb; i++)
        bt[i] = perm[i];
    uint16_t *dkc = ktest_dev_from(kc, ncache * 2), *dvc = ktest_dev_from(vc, ncache * 2);
    /* write every token of every sequence through kv_write (both sides) */
    for (int s = 0; s < n_seq; s++) {
        int n = lens[s];
        float *k = malloc((size_t)n * w * 4), *v = malloc((size_t)n * w * 4);
        int32_t *sm = malloc((size_t)n * 4);
        ktest_fill(k, (size_t)n * w, -1, 1);
        ktest_fill(v, (size_t)n * w, -1, 1);
        for (int j = 0; j < n; j++)
            sm[j] = bt[s * mb + j / bs] * bs + j % bs;
        float *dk = ktest_dev_from(k, (size_t)n * w * 4),
              *dv = ktest_dev_from(v, (size_t)n * w * 4);
        int32_t *dsm = ktest_dev_from(sm, (size_t)n * 4);
        CHECK_EQ_INT(kv_write_ref(kc, vc, k, v, sm, n, hkv, hd), 0);
        CHECK_EQ_INT(kv_write_cuda(dkc, dvc, dk, dv, dsm, n, hkv, hd, 0), 0);
        ktest_free(dk), ktest_free(dv), ktest_free(dsm);
        free(k), free(v), free(sm);
    }
    {
        uint16_t *chk = malloc(ncache * 2);
        size_t bad = 0;
        ktest_to_host(chk, dkc, ncache * 2);
        for (size_t i = 0; i < ncache; i++)
            bad += chk[i] != kc[i];
        ktest_to_host(chk, dvc, ncache * 2);
        for (size_t i = 0; i < ncache; i++)
            bad += chk[i] != vc[i];
        fprintf(stderr, "kv_write: cache mismatches=%zu\n", bad);
        CHECK(bad == 0);
        free(chk);
    }
    const size_t nq = (size_t)n_seq * hq * hd;
    float *q = malloc(nq * 4), *gate = malloc(nq * 4), *ref = malloc(nq * 4), *got = malloc(nq * 4);
    ktest_fill(q, nq, -1, 1);
    ktest_fill(gate, nq, -3, 3);
    float *dq = ktest_dev_from(q, nq * 4), *dg = ktest_dev_from(gate, nq * 4);
    int32_t *dbt = ktest_dev_from(bt, (size_t)n_seq * mb * 4),
            *dl = ktest_dev_from(lens, (size_t)n_seq * 4);
    float *ws = ktest_dev_alloc(attn_decode_ws_floats(n_seq, hq, hd, max_len) * 4);
    float *dy = ktest_dev_poison(nq);
    const float scale = 1.0f / sqrtf((float)hd);
    CHECK_EQ_INT(attn_decode_ref(ref, NULL, q, gate, kc, vc, bt, lens, n_seq, hq, hkv, hd, bs, mb,
                                 max_len, scale),
                 0);
    CHECK_EQ_INT(attn_decode_cuda(dy, ws, dq, dg, dkc, dvc, dbt, dl, n_seq, hq, hkv, hd, bs, mb,
                                  max_len, scale, 0),
                 0);
    ktest_to_host(got, dy, nq * 4);
    snprintf(what, sizeof(what), "attn_decode seq=%d hq=%d hkv=%d hd=%d bs=%d max_len=%d", n_seq,
             hq, hkv, hd, bs, max_len);
    CHECK(ktest_compare(what, got, ref, nq, 2e-5, 1e-4) == 0);
    /* no gate */
    CHECK_EQ_INT(attn_decode_ref(ref, NULL, q, NULL, kc, vc, bt, lens, n_seq, hq, hkv, hd, bs, mb,
                                 max_len, scale),
                 0);
    CHECK_EQ_INT(attn_decode_cuda(dy, ws, dq, NULL, dkc, dvc, dbt, dl, n_seq, hq, hkv, hd, bs, mb,
                                  max_len, scale, 0),
                 0);
    ktest_to_host(got, dy, nq * 4);
    CHECK(ktest_compare("attn_decode (no gate)", got, ref, nq, 2e-5, 1e-4) == 0);
    ktest_free(dkc), ktest_free(dvc), ktest_free(dq), ktest_free(dg), ktest_free(dbt);
    ktest_free(dl), ktest_free(ws), ktest_free(dy);
    free(bt), free(perm), free(kc), free(vc), free(q), free(gate), free(ref), free(got);
}

int main(void)
{
    static const int l1[] = {1}, l2[] = {17, 300, 1}, l3[] = {1337, 2048, 255, 4000};
    ktest_require_gpu();
    ktest_seed(5);
    test_rope(3, 16, 256, 64, 512);
    test_rope(5, 2, 256, 64, 256);
    test_rope(2, 3, 128, 128, 128);
    test_attn(1, 16, 2, 256, 16, l1);
    test_attn(3, 16, 2, 256, 16, l2);
    test_attn(4, 8, 2, 128, 32, l3);
    test_attn(2, 4, 4, 64, 7, l2);
    CHECK_EQ_INT(attn_decode_cuda((float *)16, (float *)16, (float *)16, NULL, (uint16_t *)16,
                                  (uint16_t *)16, (int32_t *)16, (int32_t *)16, 1, 16, 2, 260, 16,
                                  1, 16, 1.0f, 0),
                 ERR_INVAL);
    ktest_sync();
    return test_result();
}

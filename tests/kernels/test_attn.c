/* rope, kv_write and attn_decode: GPU vs reference, bf16 and fp8 (e4m3, per-tensor scales) KV.
 * The cache is filled through kv_write with a shuffled block table; contexts of 1, odd lengths
 * (partially filled last blocks), longer than several splits, and a graph-sized max_seq_len
 * (blocks walking several chunks). kv_write must match the reference byte for byte (both round
 * to nearest even; fp8 saturates to +-448); attention reads identical cache bytes on both sides,
 * so only fp32-vs-double accumulation and __expf differ: atol 2e-5, rtol 1e-4 (outputs are
 * O(1)). */
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

/* e4m3 rounding edge cases through kv_write (scale 1 and 0.5): ties to even in the normal and
 * subnormal ranges, saturation, signed zero, a wide random exponent range. */
static void test_kv_write_fp8(void)
{
    static const float special[] = {0.0f,    -0.0f,     1.0f,       1.0625f,     1.1875f,
                                    448.0f,  -448.0f,   464.0f,     -480.0f,     1e6f,
                                    -3e38f,  0.015625f, 0.0009765625f, 0.0029296875f,
                                    0.001953125f, -0.0048828125f, 0.013671875f, 240.0f, 248.0f,
                                    -1e-7f,  1e-30f,    17.0f,      0.01708984375f};
    const int hkv = 3, hd = 64, n_tok = 37;
    const size_t w = (size_t)hkv * hd, n = (size_t)n_tok * w, ns = sizeof(special) / 4;
    const float scales[2] = {1.0f, 0.5f};
    float *k = malloc(n * 4), *v = malloc(n * 4);
    int32_t *sm = malloc((size_t)n_tok * 4);
    uint8_t *kc = calloc(n + w, 1), *vc = calloc(n + w, 1), *chk = malloc(n + w);
    for (size_t i = 0; i < n; i++) {
        float m = ktest_uniform(1.0f, 2.0f) * ldexpf(1.0f, (int)(ktest_u32() % 24u) - 12);
        k[i] = i < ns ? special[i] : (ktest_u32() & 1u ? -m : m);
        v[i] = i < ns ? -special[i] : ktest_uniform(-600.0f, 600.0f);
    }
    for (int t = 0; t < n_tok; t++)
        sm[t] = t == 5 ? -1 : (t * 7) % (n_tok + 1); /* token 5 skipped, slots permuted */
    for (int si = 0; si < 2; si++) {
        uint8_t *dkc = ktest_dev_from(kc, n + w), *dvc = ktest_dev_from(vc, n + w);
        float *dk = ktest_dev_from(k, n * 4), *dv = ktest_dev_from(v, n * 4);
        int32_t *dsm = ktest_dev_from(sm, (size_t)n_tok * 4);
        uint8_t *rk = calloc(n + w, 1), *rv = calloc(n + w, 1);
        size_t bad = 0;
        CHECK_EQ_INT(kv_write_dtype_ref(rk, rv, k, v, sm, n_tok, hkv, hd, KV_DTYPE_FP8,
                                        scales[si], 2.0f * scales[si]),
                     0);
        CHECK_EQ_INT(kv_write_dtype_cuda(dkc, dvc, dk, dv, dsm, n_tok, hkv, hd, KV_DTYPE_FP8,
                                         scales[si], 2.0f * scales[si], 0),
                     0);
        ktest_to_host(chk, dkc, n + w);
        for (size_t i = 0; i < n + w; i++) {
            if (chk[i] != rk[i] && bad++ < 5)
                fprintf(stderr, "  kv_write fp8 K[%zu]: got 0x%02x ref 0x%02x\n", i, chk[i],
                        rk[i]);
        }
        ktest_to_host(chk, dvc, n + w);
        for (size_t i = 0; i < n + w; i++) {
            if (chk[i] != rv[i] && bad++ < 5)
                fprintf(stderr, "  kv_write fp8 V[%zu]: got 0x%02x ref 0x%02x\n", i, chk[i],
                        rv[i]);
        }
        /* spot-check the reference itself on the specials (scale 1) */
        if (si == 0) {
            const int slot0 = sm[0];
            CHECK_EQ_INT(rk[slot0 * w + 2], 0x38); /* 1.0 */
            CHECK_EQ_INT(rk[slot0 * w + 3], 0x38); /* 1.0625 ties to even -> 1.0 */
            CHECK_EQ_INT(rk[slot0 * w + 4], 0x3a); /* 1.1875 ties to even -> 1.25 */
            CHECK_EQ_INT(rk[slot0 * w + 7], 0x7e); /* 464 saturates to 448 */
            CHECK_EQ_INT(rk[slot0 * w + 8], 0xfe); /* -480 saturates to -448 */
            CHECK_EQ_INT(rk[slot0 * w + 12], 0x00); /* 2^-10 ties to even -> 0 */
            CHECK_EQ_INT(rk[slot0 * w + 13], 0x02); /* 3*2^-10 ties to even -> 2*2^-9 */
        }
        fprintf(stderr, "kv_write fp8 scale=%g: byte mismatches=%zu %s\n", scales[si], bad,
                bad ? "FAIL" : "ok");
        CHECK(bad == 0);
        ktest_free(dkc), ktest_free(dvc), ktest_free(dk), ktest_free(dv), ktest_free(dsm);
        free(rk), free(rv);
    }
    free(k), free(v), free(sm), free(kc), free(vc), free(chk);
}

/* ml: max_seq_len, 0 for the longest length; a larger one (a captured graph passes
 * max_model_len) caps the grid at a few waves, so blocks walk several chunks of the longer
 * lengths. The block table's entries past a sequence's blocks point at block 0 (read, they would
 * change the result). */
static void test_attn(int n_seq, int hq, int hkv, int hd, int bs, const int *lens, int ml, int dt,
                      float ks, float vs)
{
    int longest = 0;
    for (int s = 0; s < n_seq; s++)
        longest = lens[s] > longest ? lens[s] : longest;
    const int max_len = ml ? ml : longest, mb = (max_len + bs - 1) / bs;
    const int used = (longest + bs - 1) / bs, n_blocks = n_seq * used + 3;
    const size_t w = (size_t)hkv * hd, ncache = (size_t)n_blocks * bs * w;
    const size_t esz = (size_t)kv_dtype_bytes(dt);
    int32_t *bt = calloc((size_t)n_seq * mb, 4), *perm = malloc((size_t)n_blocks * 4);
    uint8_t *kc = calloc(ncache, esz), *vc = calloc(ncache, esz);
    char what[96];
    for (int i = 0; i < n_blocks; i++)
        perm[i] = i;
    for (int i = n_blocks - 1; i > 0; i--) {
        int j = (int)(ktest_u32() % (uint32_t)(i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int s = 0; s < n_seq; s++)
        for (int i = 0; i < used; i++)
            bt[(size_t)s * mb + i] = perm[s * used + i];
    uint8_t *dkc = ktest_dev_from(kc, ncache * esz), *dvc = ktest_dev_from(vc, ncache * esz);
    /* write every token of every sequence through kv_write (both sides) */
    for (int s = 0; s < n_seq; s++) {
        int n = lens[s];
        const size_t n1 = n > 0 ? (size_t)n : 1; /* an empty sequence: no rows, buffers anyway */
        float *k = malloc(n1 * w * 4), *v = malloc(n1 * w * 4);
        int32_t *sm = malloc(n1 * 4);
        ktest_fill(k, (size_t)n * w, -1, 1);
        ktest_fill(v, (size_t)n * w, -1, 1);
        if (n > 3 && dt == KV_DTYPE_FP8) { /* saturate in fp8 (to 448 * scale) */
            k[3] = 1000.0f * ks;
            if (vs < 0.05f) /* keeps |v| <= 448 * vs ~ 13, within the O(1) tolerances */
                v[2 * w + 1] = -700.0f * vs;
        }
        for (int j = 0; j < n; j++)
            sm[j] = bt[(size_t)s * mb + j / bs] * bs + j % bs;
        float *dk = ktest_dev_from(k, (size_t)n * w * 4),
              *dv = ktest_dev_from(v, (size_t)n * w * 4);
        int32_t *dsm = ktest_dev_from(sm, (size_t)n * 4);
        if (dt == KV_DTYPE_BF16) { /* the original bf16 entry points */
            CHECK_EQ_INT(kv_write_ref((uint16_t *)kc, (uint16_t *)vc, k, v, sm, n, hkv, hd), 0);
            CHECK_EQ_INT(kv_write_cuda((uint16_t *)dkc, (uint16_t *)dvc, dk, dv, dsm, n, hkv, hd,
                                       0),
                         0);
        } else {
            CHECK_EQ_INT(kv_write_dtype_ref(kc, vc, k, v, sm, n, hkv, hd, dt, ks, vs), 0);
            CHECK_EQ_INT(kv_write_dtype_cuda(dkc, dvc, dk, dv, dsm, n, hkv, hd, dt, ks, vs, 0),
                         0);
        }
        ktest_free(dk), ktest_free(dv), ktest_free(dsm);
        free(k), free(v), free(sm);
    }
    {
        uint8_t *chk = malloc(ncache * esz);
        size_t bad = 0;
        ktest_to_host(chk, dkc, ncache * esz);
        for (size_t i = 0; i < ncache * esz; i++)
            bad += chk[i] != kc[i];
        ktest_to_host(chk, dvc, ncache * esz);
        for (size_t i = 0; i < ncache * esz; i++)
            bad += chk[i] != vc[i];
        fprintf(stderr, "kv_write dtype=%d: cache byte mismatches=%zu\n", dt, bad);
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
    float *ws = ktest_dev_alloc(attn_decode_ws_floats(n_seq, hq, hkv, hd, max_len) * 4);
    float *dy = ktest_dev_poison(nq);
    const float scale = 1.0f / sqrtf((float)hd);
    /* the default entry points (AUTO: the GQA form where it runs), then each form; CORES
     * computes in fp32 (2e-5 + 1e-4 relative), GQA rounds q and the softmax weights to bf16
     * (bf16 K/V: 1% of the largest output + 1% relative) or fp16 (e4m3: 0.2%) */
    double mx = 0;
    const int gqa = attn_decode_gqa_ok(hq, hkv, hd, dt);
    for (int run = 0; run < 3; run++) {
        const int path = run == 0   ? ATTN_DECODE_PATH_AUTO
                         : run == 1 ? ATTN_DECODE_PATH_CORES
                                    : ATTN_DECODE_PATH_GQA;
        const int on_gqa = path == ATTN_DECODE_PATH_GQA || (path == ATTN_DECODE_PATH_AUTO && gqa);
        if (path == ATTN_DECODE_PATH_GQA && !gqa) {
            CHECK_EQ_INT(attn_decode_path_cuda(path, dy, ws, 1, dq, NULL, dkc, dvc, dt, ks, vs, dbt,
                                               dl, n_seq, hq, hkv, hd, bs, mb, max_len, scale, 0),
                         ERR_UNSUPPORTED);
            continue;
        }
        for (int with_gate = 1; with_gate >= 0; with_gate--) {
            const float *hg = with_gate ? gate : NULL, *dgg = with_gate ? dg : NULL;
            CHECK_EQ_INT(attn_decode_dtype_ref(ref, NULL, q, hg, kc, vc, dt, ks, vs, bt, lens,
                                               n_seq, hq, hkv, hd, bs, mb, max_len, scale),
                         0);
            mx = 0;
            for (size_t i = 0; i < nq; i++)
                mx = fabs(ref[i]) > mx ? fabs(ref[i]) : mx;
            if (path != ATTN_DECODE_PATH_AUTO)
                CHECK_EQ_INT(attn_decode_path_cuda(path, dy, ws, 1, dq, dgg, dkc, dvc, dt, ks, vs,
                                                   dbt, dl, n_seq, hq, hkv, hd, bs, mb, max_len,
                                                   scale, 0),
                             0);
            else if (dt == KV_DTYPE_BF16)
                CHECK_EQ_INT(attn_decode_cuda(dy, ws, dq, dgg, (const uint16_t *)dkc,
                                              (const uint16_t *)dvc, dbt, dl, n_seq, hq, hkv, hd,
                                              bs, mb, max_len, scale, 0),
                             0);
            else
                CHECK_EQ_INT(attn_decode_dtype_cuda(dy, ws, dq, dgg, dkc, dvc, dt, ks, vs, dbt, dl,
                                                    n_seq, hq, hkv, hd, bs, mb, max_len, scale, 0),
                             0);
            ktest_to_host(got, dy, nq * 4);
            snprintf(what, sizeof(what),
                     "attn_decode %s dt=%d seq=%d hq=%d hkv=%d hd=%d bs=%d max_len=%d%s",
                     path == ATTN_DECODE_PATH_AUTO  ? (gqa ? "auto(gqa)" : "auto(cores)")
                     : path == ATTN_DECODE_PATH_GQA ? "gqa"
                                                    : "cores",
                     dt, n_seq, hq, hkv, hd, bs, max_len, with_gate ? "" : " (no gate)");
            const double t = dt == KV_DTYPE_BF16 ? 1e-2 : 2e-3;
            CHECK(ktest_compare(what, got, ref, nq, on_gqa ? t * mx : 2e-5, on_gqa ? t : 1e-4) ==
                  0);
        }
    }
    /* the GQA form sums a row the same way alone and among up to ATTN_DECODE_GQA_SAME_SEQS
     * sequences (a verify window's rows against plain steps): sequence 0 bit for bit */
    if (gqa && n_seq > 1 && n_seq <= ATTN_DECODE_GQA_SAME_SEQS) {
        float *one = malloc((size_t)hq * hd * 4);
        CHECK_EQ_INT(attn_decode_path_cuda(ATTN_DECODE_PATH_GQA, dy, ws, 1, dq, dg, dkc, dvc, dt,
                                           ks, vs, dbt, dl, n_seq, hq, hkv, hd, bs, mb, max_len,
                                           scale, 0),
                     0);
        ktest_to_host(got, dy, nq * 4);
        CHECK_EQ_INT(attn_decode_path_cuda(ATTN_DECODE_PATH_GQA, dy, ws, 1, dq, dg, dkc, dvc, dt,
                                           ks, vs, dbt, dl, 1, hq, hkv, hd, bs, mb, max_len, scale,
                                           0),
                     0);
        ktest_to_host(one, dy, (size_t)hq * hd * 4);
        size_t diff = 0;
        for (size_t i = 0; i < (size_t)hq * hd; i++)
            diff += memcmp(&one[i], &got[i], 4) != 0;
        fprintf(stderr, "attn_decode gqa dt=%d seq 0 of %d vs alone (len %d): %zu bits differ\n",
                dt, n_seq, lens[0], diff);
        CHECK(diff == 0);
        free(one);
    }
    ktest_free(dkc), ktest_free(dvc), ktest_free(dq), ktest_free(dg), ktest_free(dbt);
    ktest_free(dl), ktest_free(ws), ktest_free(dy);
    free(bt), free(perm), free(kc), free(vc), free(q), free(gate), free(ref), free(got);
}

int main(void)
{
    static const int l1[] = {1}, l2[] = {17, 300, 1}, l3[] = {1337, 2048, 255, 4000};
    static const int l4[] = {4000, 1, 257, 2048, 15, 16, 256, 1000}, l5[] = {9000}, l6[] = {2048};
    static const int l7[] = {0, 33, 2048}; /* an empty sequence: zeros (times the gate) */
    ktest_require_gpu();
    ktest_seed(5);
    test_rope(3, 16, 256, 64, 512);
    test_rope(5, 2, 256, 64, 256);
    test_rope(2, 3, 128, 128, 128);
    test_kv_write_fp8();
    test_attn(1, 16, 2, 256, 16, l1, 0, KV_DTYPE_BF16, 1.0f, 1.0f);
    test_attn(3, 16, 2, 256, 16, l2, 0, KV_DTYPE_BF16, 1.0f, 1.0f);
    test_attn(4, 8, 2, 128, 32, l3, 0, KV_DTYPE_BF16, 1.0f, 1.0f);
    test_attn(2, 4, 4, 64, 7, l2, 0, KV_DTYPE_BF16, 1.0f, 1.0f);
    test_attn(1, 16, 2, 256, 16, l1, 0, KV_DTYPE_FP8, 1.0f, 1.0f);
    test_attn(3, 16, 2, 256, 16, l2, 0, KV_DTYPE_FP8, 0.02f, 0.03f);
    test_attn(4, 8, 2, 128, 32, l3, 0, KV_DTYPE_FP8, 1.0f, 1.0f);
    test_attn(2, 4, 4, 64, 7, l2, 0, KV_DTYPE_FP8, 0.005f, 0.25f);
    test_attn(2, 32, 4, 8, 5, l2, 0, KV_DTYPE_FP8, 0.1f, 0.1f);
    test_attn(3, 4, 2, 32, 7, l2, 0, KV_DTYPE_BF16, 1.0f, 1.0f); /* the tiny model's shape */
    test_attn(3, 4, 2, 32, 7, l2, 0, KV_DTYPE_FP8, 0.05f, 0.05f);
    test_attn(2, 12, 2, 128, 16, l3, 0, KV_DTYPE_BF16, 1.0f, 1.0f); /* 6 heads a group */
    /* graph-sized max_seq_len: 5 parts per head for 8 sequences (4000 keys: 16 chunks over 5
     * blocks), 33 for one (2048: 8 chunks, the other 25 blocks idle; 9000: 36 chunks) */
    test_attn(8, 16, 2, 256, 16, l4, 262144, KV_DTYPE_BF16, 1.0f, 1.0f);
    test_attn(8, 16, 2, 256, 16, l4, 16384, KV_DTYPE_FP8, 0.02f, 0.03f); /* 5 parts too */
    test_attn(1, 16, 2, 256, 16, l6, 262144, KV_DTYPE_BF16, 1.0f, 1.0f);
    test_attn(1, 16, 2, 256, 16, l5, 65536, KV_DTYPE_FP8, 1.0f, 1.0f);
    test_attn(4, 64, 8, 128, 32, l3, 65536, KV_DTYPE_BF16, 1.0f, 1.0f); /* 3 parts */
    test_attn(3, 16, 2, 256, 16, l7, 0, KV_DTYPE_FP8, 0.02f, 0.03f);
    test_attn(3, 16, 2, 256, 16, l7, 0, KV_DTYPE_BF16, 1.0f, 1.0f);
    CHECK_EQ_INT(attn_decode_cuda((float *)16, (float *)16, (float *)16, NULL, (uint16_t *)16,
                                  (uint16_t *)16, (int32_t *)16, (int32_t *)16, 1, 16, 2, 260, 16,
                                  1, 16, 1.0f, 0),
                 ERR_INVAL);
    CHECK_EQ_INT(attn_decode_dtype_cuda((float *)16, (float *)16, (float *)16, NULL, (void *)16,
                                        (void *)16, KV_DTYPE_FP8, 0.0f, 1.0f, (int32_t *)16,
                                        (int32_t *)16, 1, 16, 2, 256, 16, 1, 16, 1.0f, 0),
                 ERR_INVAL);
    CHECK_EQ_INT(attn_decode_dtype_cuda((float *)16, (float *)16, (float *)16, NULL, (void *)16,
                                        (void *)24, KV_DTYPE_FP8, 1.0f, 1.0f, (int32_t *)16,
                                        (int32_t *)16, 1, 16, 2, 256, 16, 1, 16, 1.0f, 0),
                 ERR_INVAL); /* v_cache not 16-byte aligned */
    CHECK_EQ_INT(attn_decode_path_cuda(ATTN_DECODE_PATH_AUTO, (float *)16, (float *)16, 0,
                                       (float *)16, NULL, (void *)16, (void *)16, KV_DTYPE_BF16,
                                       1.0f, 1.0f, (int32_t *)16, (int32_t *)16, 1, 16, 2, 256, 16,
                                       1, 16, 1.0f, 0),
                 ERR_INVAL); /* no new key: a row's own key always is */
    CHECK_EQ_INT(kv_write_dtype_cuda((void *)16, (void *)16, (float *)16, (float *)16,
                                     (int32_t *)16, 1, 2, 256, 7, 1.0f, 1.0f, 0),
                 ERR_INVAL);
    ktest_sync();
    return test_result();
}

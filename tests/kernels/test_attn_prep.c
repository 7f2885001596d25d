/* attn_prep: GPU vs reference (the split, rmsnorm, rope and kv_write references) for the
 * model's shape (16 / 2 heads of 256, rot_dim 64, gated) and odd ones (no gate, head_dim 40 and
 * 72: a partial warp), bf16 and fp8 caches, positions up to 200,000, a row with slot -1. q, gate
 * and k at 2e-6 absolute + 1e-5 relative (fp32 sums in another order; rope's angles are the
 * same fp32 values, sin/cos in double), the cache bytes may differ by one unit in the last
 * place where the fp32 value sits on a rounding boundary: at most 1 in 1,000 bytes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "attn_prep.h"
#include "common/err.h"
#include "kdtype.h"
#include "ktest.h"
#include "kv_write.h"
#include "test.h"

static void run(int n, int hq, int hkv, int hd, int rot, int gated, int dt)
{
    /* distinct slots per row (t * 7 + 3 mod slots, slots prime to 7): two rows stored to one
     * slot would race on the GPU, the reference keeping the last */
    const size_t qd = (size_t)hq * hd, kd = (size_t)hkv * hd,
                 slots = ((size_t)n + 5) % 7 == 0 ? (size_t)n + 6 : (size_t)n + 5;
    const size_t ns = gated ? 2 * qd : qd, eb = (size_t)kv_dtype_bytes(dt);
    float *src = malloc(sizeof(float) * n * ns), *k = malloc(sizeof(float) * n * kd),
          *v = malloc(sizeof(float) * n * kd), *qn = malloc(sizeof(float) * hd),
          *kn = malloc(sizeof(float) * hd), *q = malloc(sizeof(float) * n * qd),
          *gt = malloc(sizeof(float) * n * qd), *got = malloc(sizeof(float) * n * qd);
    int32_t *pos = malloc(sizeof(int32_t) * n), *map = malloc(sizeof(int32_t) * n);
    uint8_t *kc = calloc(slots * kd, eb), *vc = calloc(slots * kd, eb),
            *gkc = malloc(slots * kd * eb), *gvc = malloc(slots * kd * eb);
    ktest_fill(src, (size_t)n * ns, -3, 3);
    ktest_fill(k, (size_t)n * kd, -3, 3);
    ktest_fill(v, (size_t)n * kd, -3, 3);
    ktest_fill(qn, (size_t)hd, -0.5f, 0.5f);
    ktest_fill(kn, (size_t)hd, -0.5f, 0.5f);
    for (int t = 0; t < n; t++) {
        pos[t] = t * 20011 % 200000;
        map[t] = (int32_t)((t * 7 + 3) % slots);
    }
    if (n > 2)
        map[1] = -1;
    float *dsrc = ktest_dev_from(src, sizeof(float) * n * ns), *dk = ktest_dev_from(k, sizeof(float) * n * kd),
          *dv = ktest_dev_from(v, sizeof(float) * n * kd), *dqn = ktest_dev_from(qn, sizeof(float) * hd),
          *dkn = ktest_dev_from(kn, sizeof(float) * hd), *dq = ktest_dev_poison((size_t)n * qd),
          *dg = ktest_dev_poison((size_t)n * qd);
    int32_t *dpos = ktest_dev_from(pos, sizeof(int32_t) * n), *dmap = ktest_dev_from(map, sizeof(int32_t) * n);
    void *dkc = ktest_dev_from(kc, slots * kd * eb), *dvc = ktest_dev_from(vc, slots * kd * eb);
    const float ks = dt == KV_DTYPE_FP8 ? 0.05f : 1.0f, vs = dt == KV_DTYPE_FP8 ? 0.03f : 1.0f;
    CHECK_EQ_INT(attn_prep_ref(q, gated ? gt : NULL, src, k, v, kc, vc, dt, ks, vs, qn, kn, pos,
                               map, n, hq, hkv, hd, rot, 1e-6f, 1e7f),
                 0);
    CHECK_EQ_INT(attn_prep_cuda(dq, gated ? dg : NULL, dsrc, dk, dv, dkc, dvc, dt, ks, vs, dqn,
                                dkn, dpos, dmap, n, hq, hkv, hd, rot, 1e-6f, 1e7f, 0),
                 0);
    char what[96];
    snprintf(what, sizeof what, "attn_prep q n=%d hq=%d hkv=%d hd=%d rot=%d gated=%d dt=%d", n, hq,
             hkv, hd, rot, gated, dt);
    ktest_to_host(got, dq, sizeof(float) * n * qd);
    CHECK(ktest_compare(what, got, q, (size_t)n * qd, 2e-6, 1e-5) == 0);
    if (gated) {
        ktest_to_host(got, dg, sizeof(float) * n * qd);
        CHECK(ktest_compare("attn_prep gate", got, gt, (size_t)n * qd, 0, 0) == 0);
    }
    float *gk = malloc(sizeof(float) * n * kd);
    ktest_to_host(gk, dk, sizeof(float) * n * kd);
    CHECK(ktest_compare("attn_prep k", gk, k, (size_t)n * kd, 2e-6, 1e-5) == 0);
    ktest_to_host(gkc, dkc, slots * kd * eb);
    ktest_to_host(gvc, dvc, slots * kd * eb);
    size_t kdiff = 0, vdiff = 0;
    for (size_t i = 0; i < slots * kd * eb; i++) {
        kdiff += gkc[i] != kc[i];
        vdiff += gvc[i] != vc[i];
    }
    fprintf(stderr, "%s: cache bytes differing k=%zu v=%zu of %zu\n", what, kdiff, vdiff,
            slots * kd * eb);
    CHECK(vdiff == 0);                           /* v is stored as given */
    CHECK(kdiff * 1000 <= slots * kd * eb + 999); /* rounding-boundary ties only */
    ktest_free(dsrc), ktest_free(dk), ktest_free(dv), ktest_free(dqn), ktest_free(dkn);
    ktest_free(dq), ktest_free(dg), ktest_free(dpos), ktest_free(dmap), ktest_free(dkc), ktest_free(dvc);
    free(src), free(k), free(v), free(qn), free(kn), free(q), free(gt), free(got), free(gk);
    free(pos), free(map), free(kc), free(vc), free(gkc), free(gvc);
}

int main(void)
{
    ktest_require_gpu();
    ktest_seed(5);
    run(1, 16, 2, 256, 64, 1, KV_DTYPE_BF16); /* the model's decode row */
    run(37, 16, 2, 256, 64, 1, KV_DTYPE_FP8);
    run(5, 8, 2, 40, 16, 0, KV_DTYPE_BF16);
    run(3, 4, 4, 72, 72, 1, KV_DTYPE_FP8);
    {
        float *d = ktest_dev_alloc(4096);
        CHECK_EQ_INT(attn_prep_cuda((float *)d, NULL, d, d, d, d, d, KV_DTYPE_BF16, 1, 1, d, d,
                                    (int32_t *)d, (int32_t *)d, 1, 2, 1, 600, 64, 1e-6f, 1e4f, 0),
                     ERR_INVAL); /* head_dim past the kernel's */
        CHECK_EQ_INT(attn_prep_cuda((float *)d, NULL, d, d, d, d, d, KV_DTYPE_BF16, 1, 1, d, d,
                                    (int32_t *)d, (int32_t *)d, 1, 2, 1, 64, 63, 1e-6f, 1e4f, 0),
                     ERR_INVAL); /* odd rot_dim */
        ktest_free(d);
    }
    ktest_sync();
    return test_result();
}

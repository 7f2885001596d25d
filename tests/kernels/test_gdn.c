/* gdn_conv and gdn_step: GPU vs reference over several decode steps (state carried on both
 * sides), with a slot indirection, GQA ratio 2, and non-trivial norm weights. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "gdn_conv.h"
#include "gdn_step.h"
#include "ktest.h"
#include "test.h"

#define D GDN_STEP_HEAD_DIM

static void test_conv(int n_seq, int ch, int kc, int steps)
{
    int n_slots = n_seq + 2;
    size_t ns = (size_t)n_slots * ch * (kc - 1), nx = (size_t)n_seq * ch;
    float *st = malloc(ns * 4), *w = malloc((size_t)ch * kc * 4), *x = malloc(nx * 4);
    float *ref = malloc(nx * 4), *got = malloc(nx * 4), *gst = malloc(ns * 4);
    int32_t slots[64];
    char what[96];
    for (int s = 0; s < n_seq; s++)
        slots[s] = n_slots - 1 - s;
    ktest_fill(st, ns, -1, 1);
    ktest_fill(w, (size_t)ch * kc, -1, 1);
    float *dst = ktest_dev_from(st, ns * 4), *dw = ktest_dev_from(w, (size_t)ch * kc * 4);
    int32_t *dsl = ktest_dev_from(slots, (size_t)n_seq * 4);
    float *dx = ktest_dev_alloc(nx * 4), *dy = ktest_dev_poison(nx);
    for (int it = 0; it < steps; it++) {
        ktest_fill(x, nx, -2, 2);
        float *tmp = ktest_dev_from(x, nx * 4);
        ktest_free(dx);
        dx = tmp;
        CHECK_EQ_INT(gdn_conv_ref(ref, st, x, w, slots, n_seq, ch, kc), 0);
        CHECK_EQ_INT(gdn_conv_cuda(dy, dst, dx, dw, dsl, n_seq, ch, kc, 0), 0);
        ktest_to_host(got, dy, nx * 4);
        snprintf(what, sizeof(what), "gdn_conv seq=%d ch=%d kc=%d step=%d", n_seq, ch, kc, it);
        CHECK(ktest_compare(what, got, ref, nx, 1e-5, 1e-4) == 0);
    }
    ktest_to_host(gst, dst, ns * 4);
    CHECK(ktest_compare("gdn_conv state", gst, st, ns, 0, 0) == 0);
    ktest_free(dst), ktest_free(dw), ktest_free(dsl), ktest_free(dx), ktest_free(dy);
    free(st), free(w), free(x), free(ref), free(got), free(gst);
}

static void test_step(int n_seq, int hk, int hv, int steps)
{
    const size_t width = (size_t)(2 * hk + hv) * D, nst = (size_t)(n_seq + 1) * hv * D * D;
    const size_t nq = n_seq * width, nz = (size_t)n_seq * hv * D, na = (size_t)n_seq * hv;
    float *st = calloc(nst, 4), *gst = malloc(nst * 4);
    float *qkv = malloc(nq * 4), *z = malloc(nz * 4), *a = malloc(na * 4), *b = malloc(na * 4);
    float *alog = malloc((size_t)hv * 4), *dtb = malloc((size_t)hv * 4), *nw = malloc(D * 4);
    float *ref = malloc(nz * 4), *got = malloc(nz * 4);
    int32_t slots[64];
    char what[96];
    for (int s = 0; s < n_seq; s++)
        slots[s] = (s + 1) % (n_seq + 1);
    ktest_fill(st, nst, -0.1f, 0.1f);
    ktest_fill(alog, (size_t)hv, -2, 1);
    ktest_fill(dtb, (size_t)hv, -1, 1);
    ktest_fill(nw, D, 0.5f, 1.5f);
    float *dst = ktest_dev_from(st, nst * 4);
    float *dalog = ktest_dev_from(alog, (size_t)hv * 4),
          *ddtb = ktest_dev_from(dtb, (size_t)hv * 4);
    float *dnw = ktest_dev_from(nw, D * 4);
    int32_t *dsl = ktest_dev_from(slots, (size_t)n_seq * 4);
    float *dy = ktest_dev_poison(nz);
    for (int it = 0; it < steps; it++) {
        ktest_fill(qkv, nq, -1, 1);
        ktest_fill(z, nz, -2, 2);
        ktest_fill(a, na, -3, 3);
        ktest_fill(b, na, -3, 3);
        if (it == 1)
            a[0] = 25.0f; /* softplus threshold branch */
        float *dq = ktest_dev_from(qkv, nq * 4), *dz = ktest_dev_from(z, nz * 4);
        float *da = ktest_dev_from(a, na * 4), *db = ktest_dev_from(b, na * 4);
        CHECK_EQ_INT(
            gdn_step_ref(ref, st, qkv, z, a, b, alog, dtb, nw, slots, n_seq, hk, hv, 1e-6f), 0);
        CHECK_EQ_INT(
            gdn_step_cuda(dy, dst, dq, dz, da, db, dalog, ddtb, dnw, dsl, n_seq, hk, hv, 1e-6f, 0),
            0);
        ktest_to_host(got, dy, nz * 4);
        snprintf(what, sizeof(what), "gdn_step seq=%d hk=%d hv=%d step=%d", n_seq, hk, hv, it);
        CHECK(ktest_compare(what, got, ref, nz, 1e-4, 1e-3) == 0);
        ktest_free(dq), ktest_free(dz), ktest_free(da), ktest_free(db);
    }
    ktest_to_host(gst, dst, nst * 4);
    CHECK(ktest_compare("gdn_step state", gst, st, nst, 1e-5, 1e-4) == 0);
    ktest_free(dst), ktest_free(dalog), ktest_free(ddtb), ktest_free(dnw), ktest_free(dsl),
        ktest_free(dy);
    free(st), free(gst), free(qkv), free(z), free(a), free(b), free(alog), free(dtb), free(nw);
    free(ref), free(got);
}

int main(void)
{
    ktest_require_gpu();
    ktest_seed(3);
    test_conv(1, 8192, 4, 5);
    test_conv(3, 1000, 4, 4);
    test_conv(2, 77, 2, 3);
    test_step(1, 16, 32, 4);
    test_step(3, 2, 4, 6);
    test_step(2, 3, 3, 2);
    CHECK_EQ_INT(gdn_step_cuda((float *)8, (float *)8, (float *)8, (float *)8, (float *)8,
                               (float *)8, (float *)8, (float *)8, (float *)8, NULL, 1, 3, 4, 1e-6f,
                               0),
                 ERR_INVAL);
    ktest_sync();
    return test_result();
}

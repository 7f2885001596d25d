/* gemm_bf16 (cuBLASLt) vs reference, and mma_w4a4 (runs only on sm_120/121; elsewhere the
 * launcher must answer ERR_UNSUPPORTED). */
#include <cublasLt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/err.h"
#include "gemm_bf16.h"
#include "kdtype.h"
#include "ktest.h"
#include "mma_w4a4.h"
#include "test.h"

static void test_gemm(cublasLtHandle_t lt, void *ws, size_t wsb, int m, int n, int k, int acc)
{
    uint16_t *x = malloc((size_t)m * k * 2), *w = malloc((size_t)n * k * 2);
    float *ref = malloc((size_t)m * n * 4), *got = malloc((size_t)m * n * 4);
    char what[96];
    for (size_t i = 0; i < (size_t)m * k; i++)
        x[i] = kdtype_f32_to_bf16(ktest_uniform(-1, 1));
    for (size_t i = 0; i < (size_t)n * k; i++)
        w[i] = kdtype_f32_to_bf16(ktest_uniform(-1, 1));
    ktest_fill(ref, (size_t)m * n, -1, 1);
    void *dx = ktest_dev_from(x, (size_t)m * k * 2), *dw = ktest_dev_from(w, (size_t)n * k * 2);
    float *dy = ktest_dev_from(ref, (size_t)m * n * 4);
    CHECK_EQ_INT(gemm_bf16_ref(ref, x, w, m, n, k, acc), 0);
    CHECK_EQ_INT(gemm_bf16_cuda(dy, dx, dw, m, n, k, acc, lt, ws, wsb, 0), 0);
    ktest_to_host(got, dy, (size_t)m * n * 4);
    snprintf(what, sizeof(what), "gemm_bf16 m=%d n=%d k=%d acc=%d", m, n, k, acc);
    CHECK(ktest_compare(what, got, ref, (size_t)m * n, 1e-4 * sqrt((double)k), 1e-3) == 0);
    ktest_free(dx), ktest_free(dw), ktest_free(dy);
    free(x), free(w), free(ref), free(got);
}

static void test_w4a4(int m, int n, int k)
{
    float *xa = malloc((size_t)m * k * 4), *xb = malloc((size_t)n * k * 4);
    uint8_t *a = malloc((size_t)m * k / 2), *asf = malloc((size_t)m * k / 16);
    uint8_t *b = malloc((size_t)n * k / 2), *bsf = malloc((size_t)n * k / 16);
    float *ref = malloc((size_t)m * n * 4), *got = malloc((size_t)m * n * 4);
    ktest_fill(xa, (size_t)m * k, -3, 3);
    ktest_fill(xb, (size_t)n * k, -1, 1);
    mma_w4a4_quant_ref(a, asf, xa, m, k, 100.0f);
    mma_w4a4_quant_ref(b, bsf, xb, n, k, 300.0f);
    void *da = ktest_dev_from(a, (size_t)m * k / 2),
         *dasf = ktest_dev_from(asf, (size_t)m * k / 16);
    void *db = ktest_dev_from(b, (size_t)n * k / 2),
         *dbsf = ktest_dev_from(bsf, (size_t)n * k / 16);
    float *dc = ktest_dev_poison((size_t)m * n);
    int rc = mma_w4a4_cuda(dc, da, dasf, db, dbsf, 1.0f / (100.0f * 300.0f), m, n, k, 0);
    if (rc == ERR_UNSUPPORTED) {
        fprintf(stderr, "mma_w4a4: not an sm_120/121 device: ERR_UNSUPPORTED as expected\n");
    } else {
        CHECK_EQ_INT(rc, 0);
        mma_w4a4_ref(ref, a, asf, b, bsf, 1.0f / (100.0f * 300.0f), m, n, k);
        ktest_to_host(got, dc, (size_t)m * n * 4);
        CHECK(ktest_compare("mma_w4a4", got, ref, (size_t)m * n, 1e-5, 1e-4) == 0);
    }
    ktest_free(da), ktest_free(dasf), ktest_free(db), ktest_free(dbsf), ktest_free(dc);
    free(xa), free(xb), free(a), free(asf), free(b), free(bsf), free(ref), free(got);
}

int main(void)
{
    cublasLtHandle_t lt;
    ktest_require_gpu();
    ktest_seed(9);
    if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasLtCreate failed\n");
        return 1;
    }
    size_t wsb = 32u << 20;
    void *ws = ktest_dev_alloc(wsb);
    test_gemm(lt, ws, wsb, 1, 64, 128, 0);
    test_gemm(lt, ws, wsb, 37, 200, 2048, 0);
    test_gemm(lt, ws, wsb, 130, 512, 512, 1);
    test_gemm(lt, NULL, 0, 7, 24, 40, 0);
    test_w4a4(32, 16, 128);
    test_w4a4(64, 24, 2048);
    CHECK_EQ_INT(mma_w4a4_cuda((float *)16, (uint8_t *)16, (uint8_t *)16, (uint8_t *)16,
                               (uint8_t *)16, 1, 17, 8, 64, 0),
                 ERR_INVAL);
    ktest_free(ws);
    cublasLtDestroy(lt);
    ktest_sync();
    return test_result();
}

/* scratch: qweight_matmul throughput per format on this machine. */
#include "common/clock.h"
#include "common/tpool.h"
#include "model/dtype.h"
#include "model/qweight.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void run(const char *name, struct qweight *w, int64_t nt, struct tpool *tp)
{
    float *x = malloc((size_t)(nt * w->cols) * 4), *y = malloc((size_t)(nt * w->rows) * 4);
    for (int64_t i = 0; i < nt * w->cols; i++)
        x[i] = (float)(i % 7) * 0.1f;
    qweight_matmul(w, x, nt, y, tp);
    int reps = 0;
    uint64_t t0 = clock_now_ns(), t1;
    do {
        qweight_matmul(w, x, nt, y, tp);
        reps++;
        t1 = clock_now_ns();
    } while (t1 - t0 < 300000000ull);
    double s = (double)(t1 - t0) / 1e9 / reps;
    printf("%-12s %5lldx%-5lld n_tok=%-3lld %8.3f ms  %6.2f GFLOP/s  %6.2f GB/s weights\n", name,
           (long long)w->rows, (long long)w->cols, (long long)nt, s * 1e3,
           2.0 * (double)(w->rows * w->cols * nt) / s / 1e9, (double)qweight_bytes(w) / s / 1e9);
    free(x);
    free(y);
}

int main(void)
{
    struct tpool *tp = tpool_create(2);
    int64_t R = 2048, C = 2048;
    uint16_t *b = malloc((size_t)(R * C) * 2);
    uint8_t *f8 = malloc((size_t)(R * C)), *nv = malloc((size_t)(R * C / 2)), *bs = malloc((size_t)(R * C / 16));
    for (int64_t i = 0; i < R * C; i++) {
        b[i] = dtype_f32_to_bf16((float)(i % 13) * 0.01f);
        f8[i] = (uint8_t)(i % 0x7e);
    }
    memset(nv, 0x53, (size_t)(R * C / 2));
    memset(bs, 0x38, (size_t)(R * C / 16));
    float sc[1] = {0.5f};
    struct qweight wb = {.fmt = QW_BF16, .rows = R, .cols = C, .row_stride = C, .data = b};
    struct qweight wf = {.fmt = QW_FP8, .rows = R, .cols = C, .row_stride = C, .data = f8,
                         .scale_kind = QW_SCALE_TENSOR, .scale = sc};
    struct qweight wn = {.fmt = QW_NVFP4, .rows = R, .cols = C, .row_stride = C, .data = nv,
                         .bscale = bs, .bscale_stride = C / 16, .gscale = 0.01f};
    struct qweight wa = wn;
    wa.act_fp4 = true;
    wa.act_gscale = 100.0f;
    int64_t nts[] = {1, 16};
    for (int i = 0; i < 2; i++) {
        run("bf16", &wb, nts[i], tp);
        run("fp8", &wf, nts[i], tp);
        run("nvfp4", &wn, nts[i], tp);
        run("nvfp4-w4a4", &wa, nts[i], tp);
    }
    tpool_destroy(tp);
    return 0;
}

/* qweight: matmul of every format against a naive dequantize-then-dot written here from the
 * format definitions; NVFP4 dequant of a hand-packed row; W4A4 activation emulation on
 * hand-computed values; row views; byte counts; threaded == serial. */
#include "common/tpool.h"
#include "model/dtype.h"
#include "model/qweight.h"
#include "test.h"

#include <stdint.h>
#include <string.h>

static uint32_t seed = 7;

static float frand(void)
{
    seed = seed * 1664525u + 1013904223u;
    return (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* naive reference: element value from the format definitions in qweight.h */
static double ref_elem(const struct qweight *w, int64_t r, int64_t c)
{
    switch (w->fmt) {
    case QW_F32:
        return ((const float *)w->data)[r * w->row_stride + c];
    case QW_BF16:
        return dtype_bf16_to_f32(((const uint16_t *)w->data)[r * w->row_stride + c]);
    case QW_F16:
        return dtype_f16_to_f32(((const uint16_t *)w->data)[r * w->row_stride + c]);
    case QW_FP8: {
        double s = 1.0;
        if (w->scale_kind == QW_SCALE_TENSOR)
            s = w->scale[0];
        else if (w->scale_kind == QW_SCALE_CHANNEL)
            s = w->scale[r];
        else if (w->scale_kind == QW_SCALE_BLOCK)
            s = w->scale[(r / w->block_rows) * ((w->cols + w->block_cols - 1) / w->block_cols) +
                         c / w->block_cols];
        return dtype_e4m3_to_f32(((const uint8_t *)w->data)[r * w->row_stride + c]) * s;
    }
    case QW_NVFP4: {
        uint8_t b = ((const uint8_t *)w->data)[r * w->row_stride / 2 + c / 2];
        uint8_t nib = (c % 2) ? (b >> 4) : (b & 15);
        return dtype_e2m1_to_f32(nib) *
               dtype_e4m3_to_f32(w->bscale[r * w->bscale_stride + c / 16]) * w->gscale;
    }
    }
    return 0;
}

static void check_matmul(const struct qweight *w, struct tpool *tp, const char *what)
{
    int64_t nt = 3;
    float *x = malloc((size_t)(nt * w->cols) * sizeof(float));
    float *y = malloc((size_t)(nt * w->rows) * sizeof(float));
    float *row = malloc((size_t)w->cols * sizeof(float));
    for (int64_t i = 0; i < nt * w->cols; i++)
        x[i] = frand();
    qweight_matmul(w, x, nt, y, tp);
    int bad = 0;
    for (int64_t r = 0; r < w->rows; r++) {
        qweight_dequant_row(w, r, row);
        for (int64_t c = 0; c < w->cols; c++)
            if (fabs(row[c] - ref_elem(w, r, c)) > 1e-6 * fabs(ref_elem(w, r, c)) && bad++ < 3)
                fprintf(stderr, "%s: dequant [%lld,%lld] %g vs %g\n", what, (long long)r,
                        (long long)c, (double)row[c], ref_elem(w, r, c));
        for (int64_t t = 0; t < nt; t++) {
            double acc = 0, mag = 0;
            for (int64_t c = 0; c < w->cols; c++) {
                acc += ref_elem(w, r, c) * x[t * w->cols + c];
                mag += fabs(ref_elem(w, r, c) * x[t * w->cols + c]);
            }
            if (fabs(y[t * w->rows + r] - acc) > 1e-5 * mag + 1e-6 && bad++ < 3)
                fprintf(stderr, "%s: y[%lld,%lld] %g vs %g\n", what, (long long)t, (long long)r,
                        (double)y[t * w->rows + r], acc);
        }
    }
    if (bad)
        fprintf(stderr, "%s: %d mismatches\n", what, bad);
    CHECK(bad == 0);
    free(x);
    free(y);
    free(row);
}

static void test_formats(struct tpool *tp)
{
    enum { R = 37, C = 80 };
    float f32[R * C];
    uint16_t b16[R * C], h16[R * C];
    uint8_t f8[R * C], nv[R * C / 2], bs[R * C / 16];
    for (int i = 0; i < R * C; i++) {
        f32[i] = frand();
        b16[i] = dtype_f32_to_bf16(frand());
        h16[i] = dtype_f32_to_f16(frand());
        f8[i] = (uint8_t)(seed >> 9) & 0xfe; /* even codes: no NaN */
        frand();
    }
    for (int i = 0; i < R * C / 2; i++) {
        nv[i] = (uint8_t)(seed >> 11);
        frand();
    }
    for (int i = 0; i < R * C / 16; i++)
        bs[i] = (uint8_t)(0x28 + i % 24);
    struct qweight w = {.rows = R, .cols = C, .row_stride = C};
    w.fmt = QW_F32, w.data = f32;
    check_matmul(&w, tp, "f32");
    w.fmt = QW_BF16, w.data = b16;
    check_matmul(&w, tp, "bf16");
    w.fmt = QW_F16, w.data = h16;
    check_matmul(&w, tp, "f16");

    float st = 0.03f, sc[R], sb[5 * 3];
    for (int i = 0; i < R; i++)
        sc[i] = 0.01f * (float)(i + 1);
    for (int i = 0; i < 15; i++)
        sb[i] = 0.02f * (float)(i + 1);
    w.fmt = QW_FP8, w.data = f8, w.scale_kind = QW_SCALE_TENSOR, w.scale = &st;
    check_matmul(&w, tp, "fp8-tensor");
    CHECK_EQ_INT(qweight_bytes(&w), R * C + 4);
    w.scale_kind = QW_SCALE_CHANNEL, w.scale = sc;
    check_matmul(&w, tp, "fp8-channel");
    w.scale_kind = QW_SCALE_BLOCK, w.scale = sb, w.block_rows = 8, w.block_cols = 32;
    check_matmul(&w, tp, "fp8-block"); /* 37 rows -> 5 blocks, 80 cols -> 3 blocks */
    CHECK_EQ_INT(qweight_bytes(&w), R * C + 15 * 4);
    struct qweight v = qweight_rows(&w, 16, 21);
    CHECK_EQ_INT(v.rows, 21);
    check_matmul(&v, tp, "fp8-block view");
    float row_a[C], row_b[C];
    qweight_dequant_row(&v, 3, row_a);
    qweight_dequant_row(&w, 19, row_b);
    CHECK(memcmp(row_a, row_b, sizeof(row_a)) == 0);

    memset(&w, 0, sizeof(w));
    w.rows = R, w.cols = C, w.row_stride = C;
    w.fmt = QW_NVFP4, w.data = nv, w.bscale = bs, w.bscale_stride = C / 16, w.gscale = 0.37f;
    check_matmul(&w, tp, "nvfp4");
    CHECK_EQ_INT(qweight_bytes(&w), R * C / 2 + R * C / 16 + 4);
    v = qweight_rows(&w, 5, 7);
    qweight_dequant_row(&v, 2, row_a);
    qweight_dequant_row(&w, 7, row_b);
    CHECK(memcmp(row_a, row_b, sizeof(row_a)) == 0);
    CHECK_STREQ(qweight_format_name(&w), "nvfp4");
}

static void test_nvfp4_hand(void)
{
    /* one row of 32: block 0 scale e4m3 0x40 = 2.0, block 1 scale 0x30 = 0.5; gscale 0.25 */
    uint8_t data[16] = {0xA1, 0x72, 0x0F, 0x00, 0, 0, 0, 0, 0x35, 0, 0, 0, 0, 0, 0, 0xC0};
    uint8_t bsc[2] = {0x40, 0x30};
    struct qweight w = {.fmt = QW_NVFP4,
                        .rows = 1,
                        .cols = 32,
                        .row_stride = 32,
                        .data = data,
                        .bscale = bsc,
                        .bscale_stride = 2,
                        .gscale = 0.25f};
    float out[32];
    qweight_dequant_row(&w, 0, out);
    /* block 0: multiplier 2*0.25 = 0.5. byte 0xA1: el0 = 0x1 (0.5), el1 = 0xA (-1)
     * byte 0x72: el2 = 0x2 (1), el3 = 0x7 (6); byte 0x0F: el4 = 0xF (-6), el5 = 0 */
    float want0[6] = {0.25f, -0.5f, 0.5f, 3.0f, -3.0f, 0.0f};
    for (int i = 0; i < 6; i++)
        CHECK_NEAR(out[i], want0[i], 0);
    for (int i = 6; i < 16; i++)
        CHECK_NEAR(out[i], 0, 0);
    /* block 1: multiplier 0.5*0.25 = 0.125. byte 8 = 0x35: el16 = 0x5 (3), el17 = 0x3 (1.5);
     * byte 15 = 0xC0: el30 = 0, el31 = 0xC (-2) */
    CHECK_NEAR(out[16], 0.375, 0);
    CHECK_NEAR(out[17], 0.1875, 0);
    CHECK_NEAR(out[30], 0.0, 0);
    CHECK_NEAR(out[31], -0.25, 0);
}

/* 16x16 NVFP4 identity (e2m1 1.0 on the diagonal, scale 1.0, gscale 1): y = x' exactly. */
static void identity_w4a4(struct qweight *w, uint8_t *data, uint8_t *bsc, float g_in)
{
    memset(data, 0, 16 * 8);
    for (int r = 0; r < 16; r++) {
        data[r * 8 + r / 2] = (uint8_t)(r % 2 ? 0x20 : 0x02);
        bsc[r] = 0x38;
    }
    *w = (struct qweight){.fmt = QW_NVFP4,
                          .rows = 16,
                          .cols = 16,
                          .row_stride = 16,
                          .data = data,
                          .bscale = bsc,
                          .bscale_stride = 1,
                          .gscale = 1.0f,
                          .act_fp4 = true,
                          .act_gscale = g_in};
}

static void test_w4a4(struct tpool *tp)
{
    uint8_t data[128], bsc[16];
    struct qweight w;
    float y[16];
    /* g_in 1, amax 6: s = e4m3(1.0) = 1, x' = e2m1(x) */
    identity_w4a4(&w, data, bsc, 1.0f);
    float x1[16] = {0.2f,  0.3f,  0.8f,  1.3f,  1.8f, 2.6f, 3.6f, 5.5f,
                    -0.2f, -0.3f, -1.2f, -6.0f, 0,    0,    0,    4.9f};
    float w1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, 0, -0.5f, -1, -6, 0, 0, 0, 4};
    qweight_matmul(&w, x1, 1, y, tp);
    for (int i = 0; i < 16; i++)
        CHECK_NEAR(y[i], w1[i], 0);
    CHECK_STREQ(qweight_format_name(&w), "nvfp4-w4a4");
    /* g_in 10, amax 3: s = e4m3(5) = 5, r = 2, x' = e2m1(2x) / 2 */
    identity_w4a4(&w, data, bsc, 10.0f);
    float x2[16] = {3, 1, 0.3f, -0.7f, 0.1f, 2.2f, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1.3f};
    float w2[16] = {3, 1, 0.25f, -0.75f, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1.5f};
    qweight_matmul(&w, x2, 1, y, tp);
    for (int i = 0; i < 16; i++)
        CHECK_NEAR(y[i], w2[i], 1e-7);
    /* g_in 1, amax 6.5: s = e4m3(1.0833) = 1.125, r = 1/1.125;
     * 6.5*r = 5.78 -> 6 -> 6.75; 1*r = 0.889 -> 1 -> 1.125; 0.3*r = 0.267 -> 0.5 -> 0.5625 */
    identity_w4a4(&w, data, bsc, 1.0f);
    float x3[16] = {6.5f, 1.0f, 0.3f, 0.2f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    float w3[16] = {6.75f, 1.125f, 0.5625f, 0};
    qweight_matmul(&w, x3, 1, y, tp);
    for (int i = 0; i < 16; i++)
        CHECK_NEAR(y[i], w3[i], 1e-6);
    /* all-zero block: scale 0 -> zeros, no NaN */
    float x4[16] = {0};
    qweight_matmul(&w, x4, 1, y, tp);
    for (int i = 0; i < 16; i++)
        CHECK_NEAR(y[i], 0, 0);
}

static void test_threads(struct tpool *tp)
{
    enum { R = 300, C = 64, T = 5 };
    static uint16_t wb[R * C];
    static float x[T * C], y1[T * R], y2[T * R];
    for (int i = 0; i < R * C; i++)
        wb[i] = dtype_f32_to_bf16(frand());
    for (int i = 0; i < T * C; i++)
        x[i] = frand();
    struct qweight w = {.fmt = QW_BF16, .rows = R, .cols = C, .row_stride = C, .data = wb};
    qweight_matmul(&w, x, T, y1, NULL);
    qweight_matmul(&w, x, T, y2, tp);
    CHECK(memcmp(y1, y2, sizeof(y1)) == 0);
    CHECK(qweight_present(&w));
    w.data = NULL;
    CHECK(!qweight_present(&w));
}

int main(void)
{
    struct tpool *tp = tpool_create(2);
    test_formats(NULL);
    test_formats(tp);
    test_nvfp4_hand();
    test_w4a4(tp);
    test_threads(tp);
    tpool_destroy(tp);
    return test_result();
}

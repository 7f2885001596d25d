/* qweight: dequantization and the CPU matrix product for one linear weight in any of the
 * in-memory formats (f32, bf16, f16, fp8 e4m3 with tensor/channel/block scales, nvfp4 with
 * optional W4A4 activation emulation). qweight_matmul is the CPU backend's hot loop: rows are
 * split over the pool, each row is dequantized once into a per-chunk fp32 buffer and dotted
 * against every activation row. */
#include "model/qweight.h"

#include "common/tpool.h"
#include "common/xalloc.h"
#include "model/dtype.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

bool qweight_present(const struct qweight *w)
{
    return w && (w->data != NULL || w->dummy);
}

// ---- dequantization ----

static float fp8_scale_at(const struct qweight *w, int64_t r, int64_t c)
{
    switch (w->scale_kind) {
    case QW_SCALE_TENSOR:
        return w->scale[0];
    case QW_SCALE_CHANNEL:
        return w->scale[r];
    case QW_SCALE_BLOCK: {
        int64_t nbc = CEIL_DIV(w->cols, (int64_t)w->block_cols);
        return w->scale[(r / w->block_rows) * nbc + c / w->block_cols];
    }
    case QW_SCALE_NONE:
    default:
        return 1.0f;
    }
}

static const float E2M1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                               -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

static inline float bf16_f32(uint16_t v)
{
    uint32_t u = (uint32_t)v << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* e4m3 LUT (256 floats) or NULL: the hot path builds it once per matmul. */
static void dequant_row(const struct qweight *w, int64_t r, float *out, const float *lut)
{
    int64_t n = w->cols;
    switch (w->fmt) {
    case QW_F32:
        memcpy(out, (const float *)w->data + r * w->row_stride, (size_t)n * sizeof(float));
        break;
    case QW_BF16: {
        const uint16_t *p = (const uint16_t *)w->data + r * w->row_stride;
        for (int64_t c = 0; c < n; c++)
            out[c] = bf16_f32(p[c]);
        break;
    }
    case QW_F16: {
        const uint16_t *p = (const uint16_t *)w->data + r * w->row_stride;
        for (int64_t c = 0; c < n; c++)
            out[c] = dtype_f16_to_f32(p[c]);
        break;
    }
    case QW_FP8: {
        const uint8_t *p = (const uint8_t *)w->data + r * w->row_stride;
        int64_t step = w->scale_kind == QW_SCALE_BLOCK ? w->block_cols : n;
        for (int64_t c0 = 0; c0 < n; c0 += step) {
            float s = fp8_scale_at(w, r, c0);
            int64_t c1 = c0 + step < n ? c0 + step : n;
            if (lut) {
                for (int64_t c = c0; c < c1; c++)
                    out[c] = lut[p[c]] * s;
            } else {
                for (int64_t c = c0; c < c1; c++)
                    out[c] = dtype_e4m3_to_f32(p[c]) * s;
            }
        }
        break;
    }
    case QW_NVFP4: {
        const uint8_t *p = (const uint8_t *)w->data + r * (w->row_stride / 2);
        const uint8_t *bs = w->bscale + r * w->bscale_stride;
        for (int64_t b = 0; b < n / 16; b++) {
            float s = (lut ? lut[bs[b]] : dtype_e4m3_to_f32(bs[b])) * w->gscale;
            const uint8_t *q = p + b * 8;
            float *o = out + b * 16;
            for (int j = 0; j < 8; j++) {
                o[2 * j] = E2M1[q[j] & 15] * s;
                o[2 * j + 1] = E2M1[q[j] >> 4] * s;
            }
        }
        break;
    }
    }
}

void qweight_dequant_row(const struct qweight *w, int64_t r, float *out)
{
    dequant_row(w, r, out, NULL);
}

// ---- W4A4 activation emulation (CHECKPOINTS.md §1.5) ----

static void act_fp4_qdq(const float *x, float *out, int64_t n, float g_in)
{
    for (int64_t b = 0; b < n; b += 16) {
        int64_t e = b + 16 < n ? b + 16 : n;
        float amax = 0.0f;
        for (int64_t j = b; j < e; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        float sv = g_in * amax / 6.0f;
        sv = fminf(fmaxf(sv, -448.0f), 448.0f);
        float s = dtype_e4m3_to_f32(dtype_f32_to_e4m3(sv));
        float r = (s == 0.0f) ? 0.0f : g_in / s;
        for (int64_t j = b; j < e; j++) {
            float v = fminf(fmaxf(x[j] * r, -6.0f), 6.0f);
            float q = dtype_e2m1_to_f32(dtype_f32_to_e2m1(v));
            out[j] = (g_in == 0.0f) ? 0.0f : q * s / g_in;
        }
    }
}

// ---- matmul ----

struct mm_ctx {
    const struct qweight *w;
    const float *x; // (n_tok, cols)
    int64_t n_tok;
    float *y;       // (n_tok, rows)
    float lut[256]; // e4m3 -> f32
};

static float reduce8(const float *acc)
{
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

static float dot(const float *a, const float *b, int64_t n)
{
    float acc[8] = {0};
    int64_t c = 0;
    for (; c + 8 <= n; c += 8)
        for (int k = 0; k < 8; k++)
            acc[k] += a[c + k] * b[c + k];
    float s = reduce8(acc);
    for (; c < n; c++)
        s += a[c] * b[c];
    return s;
}

static void mm_range(void *p, int64_t r0, int64_t r1)
{
    struct mm_ctx *ctx = p;
    const struct qweight *w = ctx->w;
    int64_t cols = w->cols, rows = w->rows;
    float stack_buf[4096];
    float *row =
        cols <= (int64_t)ARRAY_LEN(stack_buf) ? stack_buf : xmalloc((size_t)cols * sizeof(float));
    for (int64_t r = r0; r < r1; r++) {
        dequant_row(w, r, row, ctx->lut);
        for (int64_t t = 0; t < ctx->n_tok; t++)
            ctx->y[t * rows + r] = dot(row, ctx->x + t * cols, cols);
    }
    if (row != stack_buf)
        free(row);
}

void qweight_matmul(const struct qweight *w, const float *x, int64_t n_tok, float *y,
                    struct tpool *tp)
{
    qweight_matmul_act(w, x, n_tok, y, tp, true);
}

void qweight_matmul_act(const struct qweight *w, const float *x, int64_t n_tok, float *y,
                        struct tpool *tp, bool act_quant)
{
    if (n_tok <= 0 || w->rows <= 0)
        return;
    float *xq = NULL;
    if (w->fmt == QW_NVFP4 && w->act_fp4 && act_quant) {
        xq = xmalloc((size_t)(n_tok * w->cols) * sizeof(float));
        for (int64_t t = 0; t < n_tok; t++)
            act_fp4_qdq(x + t * w->cols, xq + t * w->cols, w->cols, w->act_gscale);
        x = xq;
    }
    struct mm_ctx ctx = {.w = w, .x = x, .n_tok = n_tok, .y = y};
    if (w->fmt == QW_FP8 || w->fmt == QW_NVFP4)
        for (int i = 0; i < 256; i++)
            ctx.lut[i] = dtype_e4m3_to_f32((uint8_t)i);
    /* at least ~64k multiply-adds per chunk so small products are not split */
    int64_t work_per_row = w->cols * n_tok;
    int64_t min_chunk = work_per_row > 0 ? CEIL_DIV((int64_t)65536, work_per_row) : 1;
    tpool_for(tp, w->rows, min_chunk, mm_range, &ctx);
    free(xq);
}

// ---- sizes, views, names ----

int64_t qweight_bytes(const struct qweight *w)
{
    if (!w)
        return 0;
    int64_t n = w->rows * w->cols;
    switch (w->fmt) {
    case QW_F32:
        return n * 4;
    case QW_BF16:
    case QW_F16:
        return n * 2;
    case QW_FP8: {
        int64_t ns = 0;
        if (w->scale_kind == QW_SCALE_TENSOR)
            ns = 1;
        else if (w->scale_kind == QW_SCALE_CHANNEL)
            ns = w->rows;
        else if (w->scale_kind == QW_SCALE_BLOCK)
            ns = CEIL_DIV(w->rows, (int64_t)w->block_rows) *
                 CEIL_DIV(w->cols, (int64_t)w->block_cols);
        return n + ns * 4;
    }
    case QW_NVFP4:
        return n / 2 + n / 16 + 4 + (w->act_fp4 ? 4 : 0);
    }
    return 0;
}

struct qweight qweight_rows(const struct qweight *w, int64_t r0, int64_t n)
{
    struct qweight v = *w;
    v.rows = n;
    if (!w->data)
        return v;
    switch (w->fmt) {
    case QW_F32:
        v.data = (const float *)w->data + r0 * w->row_stride;
        break;
    case QW_BF16:
    case QW_F16:
        v.data = (const uint16_t *)w->data + r0 * w->row_stride;
        break;
    case QW_FP8:
        v.data = (const uint8_t *)w->data + r0 * w->row_stride;
        if (w->scale_kind == QW_SCALE_CHANNEL) {
            v.scale = w->scale + r0;
        } else if (w->scale_kind == QW_SCALE_BLOCK) {
            assert(r0 % w->block_rows == 0); /* a view must start on a scale block */
            v.scale = w->scale + (r0 / w->block_rows) * CEIL_DIV(w->cols, (int64_t)w->block_cols);
        }
        break;
    case QW_NVFP4:
        v.data = (const uint8_t *)w->data + r0 * (w->row_stride / 2);
        v.bscale = w->bscale + r0 * w->bscale_stride;
        break;
    }
    return v;
}

const char *qweight_format_name(const struct qweight *w)
{
    switch (w->fmt) {
    case QW_F32:
        return "f32";
    case QW_BF16:
        return "bf16";
    case QW_F16:
        return "f16";
    case QW_FP8:
        switch (w->scale_kind) {
        case QW_SCALE_TENSOR:
            return "fp8-tensor";
        case QW_SCALE_CHANNEL:
            return "fp8-channel";
        case QW_SCALE_BLOCK:
            if (w->block_rows == 128 && w->block_cols == 128)
                return "fp8-block128";
            return "fp8-block";
        case QW_SCALE_NONE:
            return "fp8";
        }
        return "fp8";
    case QW_NVFP4:
        return w->act_fp4 ? "nvfp4-w4a4" : "nvfp4";
    }
    return "?";
}

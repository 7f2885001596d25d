/* pack: fp32 -> bf16/f16/FP8/NVFP4 quantizers and their dequantizers (see pack.h). Element
 * conversions come from model/dtype.c. */
#include "model/pack.h"

#include "common/err.h"
#include "common/xalloc.h"
#include "model/dtype.h"

#include <math.h>

void pack_bf16(const float *x, int64_t n, uint16_t *out)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = dtype_f32_to_bf16(x[i]);
}

void pack_f16(const float *x, int64_t n, uint16_t *out)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = dtype_f32_to_f16(x[i]);
}

float pack_amax(const float *x, int64_t n)
{
    float m = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (a > m)
            m = a;
    }
    return m;
}

// ---- FP8 ----

int64_t pack_fp8_n_scales(enum pack_fp8_scale kind, int64_t rows, int64_t cols, int block)
{
    switch (kind) {
    case PACK_FP8_TENSOR:
        return 1;
    case PACK_FP8_CHANNEL:
        return rows;
    case PACK_FP8_BLOCK:
        return block > 0 ? CEIL_DIV(rows, block) * CEIL_DIV(cols, block) : 0;
    }
    return 0;
}

static int64_t fp8_scale_index(enum pack_fp8_scale kind, int64_t r, int64_t c, int64_t cols,
                               int block)
{
    switch (kind) {
    case PACK_FP8_TENSOR:
        return 0;
    case PACK_FP8_CHANNEL:
        return r;
    case PACK_FP8_BLOCK:
        return (r / block) * CEIL_DIV(cols, block) + c / block;
    }
    return 0;
}

static float fp8_scale_of(float amax)
{
    float s = amax / PACK_E4M3_MAX;
    return (s > 0.0f && isfinite(s)) ? s : 1.0f;
}

int pack_fp8(const float *w, int64_t rows, int64_t cols, enum pack_fp8_scale kind, int block,
             uint8_t *q, float *scale)
{
    if (rows < 0 || cols < 0 || (kind == PACK_FP8_BLOCK && block < 1))
        return ERR_INVAL;
    int64_t ns = pack_fp8_n_scales(kind, rows, cols, block);
    for (int64_t i = 0; i < ns; i++)
        scale[i] = 0.0f; /* amax first */
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            int64_t si = fp8_scale_index(kind, r, c, cols, block);
            float a = fabsf(w[r * cols + c]);
            if (a > scale[si])
                scale[si] = a;
        }
    for (int64_t i = 0; i < ns; i++)
        scale[i] = fp8_scale_of(scale[i]);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            float s = scale[fp8_scale_index(kind, r, c, cols, block)];
            q[r * cols + c] = dtype_f32_to_e4m3(w[r * cols + c] / s);
        }
    return 0;
}

void pack_fp8_dequant(const uint8_t *q, const float *scale, int64_t rows, int64_t cols,
                      enum pack_fp8_scale kind, int block, float *out)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            out[r * cols + c] = dtype_e4m3_to_f32(q[r * cols + c]) *
                                scale[fp8_scale_index(kind, r, c, cols, block)];
}

// ---- NVFP4 ----

float pack_nvfp4_global(float amax)
{
    float g = PACK_E4M3_MAX * PACK_E2M1_MAX / amax;
    return (amax > 0.0f && isfinite(amax) && isfinite(g) && g > 0.0f) ? g : 1.0f;
}

int pack_nvfp4(const float *w, int64_t rows, int64_t cols, float gs, uint8_t *packed,
               uint8_t *bscale)
{
    if (cols % PACK_NVFP4_GROUP != 0 || !(gs > 0.0f))
        return ERR_INVAL;
    int64_t ng = cols / PACK_NVFP4_GROUP;
    for (int64_t r = 0; r < rows; r++) {
        const float *row = w + r * cols;
        for (int64_t g = 0; g < ng; g++) {
            const float *x = row + g * PACK_NVFP4_GROUP;
            float amax = pack_amax(x, PACK_NVFP4_GROUP);
            uint8_t sc = dtype_f32_to_e4m3(gs * (amax / PACK_E2M1_MAX));
            float s = dtype_e4m3_to_f32(sc);
            bscale[r * ng + g] = sc;
            uint8_t *dst = packed + r * (cols / 2) + g * (PACK_NVFP4_GROUP / 2);
            for (int j = 0; j < PACK_NVFP4_GROUP; j += 2) {
                uint8_t n0 = 0, n1 = 0;
                if (s > 0.0f) {
                    float v0 = fminf(fmaxf(x[j] * gs / s, -PACK_E2M1_MAX), PACK_E2M1_MAX);
                    float v1 = fminf(fmaxf(x[j + 1] * gs / s, -PACK_E2M1_MAX), PACK_E2M1_MAX);
                    n0 = dtype_f32_to_e2m1(v0);
                    n1 = dtype_f32_to_e2m1(v1);
                }
                dst[j / 2] = (uint8_t)(n0 | (n1 << 4));
            }
        }
    }
    return 0;
}

void pack_nvfp4_dequant(const uint8_t *packed, const uint8_t *bscale, float gs, int64_t rows,
                        int64_t cols, float *out)
{
    int64_t ng = cols / PACK_NVFP4_GROUP;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            uint8_t b = packed[r * (cols / 2) + c / 2];
            uint8_t nib = (c & 1) ? (uint8_t)(b >> 4) : (uint8_t)(b & 0xf);
            float s = dtype_e4m3_to_f32(bscale[r * ng + c / PACK_NVFP4_GROUP]);
            out[r * cols + c] = dtype_e2m1_to_f32(nib) * s / gs;
        }
}

void pack_nvfp4_act_fake_quant(const float *x, int64_t n, float g_in, float *out)
{
    for (int64_t b = 0; b + PACK_NVFP4_GROUP <= n; b += PACK_NVFP4_GROUP) {
        float amax = pack_amax(x + b, PACK_NVFP4_GROUP);
        float sv = fminf(fmaxf(g_in * amax / PACK_E2M1_MAX, -PACK_E4M3_MAX), PACK_E4M3_MAX);
        float s = dtype_e4m3_to_f32(dtype_f32_to_e4m3(sv));
        float r = s == 0.0f ? 0.0f : g_in / s;
        for (int j = 0; j < PACK_NVFP4_GROUP; j++) {
            float v = fminf(fmaxf(x[b + j] * r, -PACK_E2M1_MAX), PACK_E2M1_MAX);
            float q = dtype_e2m1_to_f32(dtype_f32_to_e2m1(v));
            out[b + j] = s == 0.0f ? 0.0f : q * s / g_in;
        }
    }
}

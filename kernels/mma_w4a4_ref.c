/* mma_w4a4 reference and the W4A4 activation quantizer. */
#include "mma_w4a4.h"

#include <math.h>

#include "common/err.h"
#include "kdtype.h"

static double fp4_at(const uint8_t *p, const uint8_t *sf, int row, int kk, int k)
{
    uint8_t b = p[(long)row * (k / 2) + kk / 2];
    uint8_t nib = (kk & 1) ? (uint8_t)(b >> 4) : (uint8_t)(b & 0xf);
    return (double)kdtype_e2m1_to_f32(nib) * kdtype_e4m3_to_f32(sf[(long)row * (k / 16) + kk / 16]);
}

int mma_w4a4_ref(float *c, const uint8_t *a, const uint8_t *a_sf, const uint8_t *b,
                 const uint8_t *b_sf, float alpha, int m, int n, int k)
{
    if (m <= 0 || n <= 0 || k <= 0 || k % 16)
        return ERR_INVAL;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double acc = 0;
            for (int kk = 0; kk < k; kk++)
                acc += fp4_at(a, a_sf, i, kk, k) * fp4_at(b, b_sf, j, kk, k);
            c[(long)i * n + j] = (float)(alpha * acc);
        }
    return 0;
}

int mma_w4a4_quant_ref(uint8_t *x_q, uint8_t *x_sf, const float *x, int rows, int cols, float g_in)
{
    if (rows < 0 || cols <= 0 || cols % 16 || !(g_in > 0))
        return ERR_INVAL;
    for (int r = 0; r < rows; r++)
        for (int blk = 0; blk < cols / 16; blk++) {
            const float *v = x + (long)r * cols + blk * 16;
            float amax = 0, s;
            uint8_t sc;
            for (int i = 0; i < 16; i++)
                amax = fabsf(v[i]) > amax ? fabsf(v[i]) : amax;
            sc = kdtype_f32_to_e4m3(g_in * amax / 6.0f);
            s = kdtype_e4m3_to_f32(sc);
            x_sf[(long)r * (cols / 16) + blk] = sc;
            for (int i = 0; i < 16; i += 2) {
                uint8_t lo = s > 0 ? kdtype_f32_to_e2m1(v[i] * g_in / s) : 0;
                uint8_t hi = s > 0 ? kdtype_f32_to_e2m1(v[i + 1] * g_in / s) : 0;
                x_q[(long)r * (cols / 2) + blk * 8 + i / 2] = (uint8_t)(lo | (hi << 4));
            }
        }
    return 0;
}

/* dtype: scalar conversions between checkpoint storage types and fp32 (bf16, f16, fp8 e4m3fn,
 * fp4 e2m1). Every narrowing conversion rounds to nearest, ties to even; e4m3 saturates to
 * +-448 (NaN -> 0x7f), e2m1 saturates to +-6 (CHECKPOINTS.md §1.1). */
#include "model/dtype.h"

#include <math.h>
#include <string.h>

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

float dtype_bf16_to_f32(uint16_t v)
{
    return bits_f32((uint32_t)v << 16);
}

uint16_t dtype_f32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40); /* quiet NaN, keep sign */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float dtype_round_bf16(float f)
{
    return dtype_bf16_to_f32(dtype_f32_to_bf16(f));
}

float dtype_f16_to_f32(uint16_t v)
{
    uint32_t sign = (uint32_t)(v & 0x8000u) << 16;
    uint32_t exp = (v >> 10) & 0x1f;
    uint32_t man = v & 0x3ffu;
    if (exp == 0x1f)
        return bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        float m = ldexpf((float)man, -24); /* subnormal: man * 2^-24 */
        return sign ? -m : m;
    }
    return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t dtype_f32_to_f16(float f)
{
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x477ff000u) /* >= 65520 rounds to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) { /* below 2^-14: subnormal or zero, quantum 2^-24 */
        float m = bits_f32(a);
        float q = rintf(ldexpf(m, 24)); /* exact scaling; rintf is RNE */
        return (uint16_t)(sign | (uint16_t)q);
    }
    /* normal: drop 13 mantissa bits with RNE; a carry into the exponent is correct */
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
    return (uint16_t)(sign | (uint16_t)((r >> 13) - (112u << 10)));
}

float dtype_e4m3_to_f32(uint8_t v)
{
    int exp = (v >> 3) & 0xf;
    int man = v & 7;
    float r;
    if (exp == 0xf && man == 7)
        return NAN;
    if (exp == 0)
        r = ldexpf((float)man, -9);
    else
        r = ldexpf((float)(8 + man), exp - 10);
    return (v & 0x80) ? -r : r;
}

uint8_t dtype_f32_to_e4m3(float f)
{
    if (isnan(f))
        return 0x7f;
    uint8_t sign = signbit(f) ? 0x80 : 0;
    float a = fabsf(f);
    if (a >= 448.0f)
        return sign | 0x7e;
    int e;
    (void)frexpf(a, &e);                   /* a = m * 2^e, m in [0.5, 1): floor(log2 a) = e - 1 */
    int q = (e - 1 < -6) ? -9 : e - 1 - 3; /* log2 of the spacing at a */
    float n = rintf(ldexpf(a, -q));        /* exact scaling, RNE */
    float v = ldexpf(n, q);
    if (v >= 448.0f)
        return sign | 0x7e;
    if (v < 0.015625f) /* below 2^-6: subnormal, code = v / 2^-9 (8 == smallest normal) */
        return sign | (uint8_t)ldexpf(v, 9);
    (void)frexpf(v, &e);
    int ex = e - 1;
    int man = (int)ldexpf(v, 3 - ex) - 8;
    return sign | (uint8_t)(((ex + 7) << 3) | man);
}

static const float E2M1_MAG[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

float dtype_e2m1_to_f32(uint8_t nibble)
{
    float m = E2M1_MAG[nibble & 7];
    return (nibble & 8) ? -m : m;
}

uint8_t dtype_f32_to_e2m1(float f)
{
    if (isnan(f))
        return 0;
    uint8_t sign = signbit(f) ? 8 : 0;
    float a = fabsf(f);
    uint8_t c;
    if (a <= 0.25f)
        c = 0;
    else if (a < 0.75f)
        c = 1;
    else if (a <= 1.25f)
        c = 2;
    else if (a < 1.75f)
        c = 3;
    else if (a <= 2.5f)
        c = 4;
    else if (a < 3.5f)
        c = 5;
    else if (a <= 5.0f)
        c = 6;
    else
        c = 7;
    return sign | c;
}

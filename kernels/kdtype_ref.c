/* kdtype: host scalar conversions for the kernel references (see kdtype.h). */
#include "kdtype.h"

#include <math.h>
#include <string.h>

float kdtype_bf16_to_f32(uint16_t v)
{
    uint32_t u = (uint32_t)v << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t kdtype_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float kdtype_round_bf16(float f)
{
    return kdtype_bf16_to_f32(kdtype_f32_to_bf16(f));
}

float kdtype_e4m3_to_f32(uint8_t v)
{
    int s = v >> 7, e = (v >> 3) & 0xf, m = v & 7;
    float r;
    if (e == 0xf && m == 7)
        return NAN;
    if (e == 0)
        r = ldexpf((float)m / 8.0f, -6);
    else
        r = ldexpf(1.0f + (float)m / 8.0f, e - 7);
    return s ? -r : r;
}

uint8_t kdtype_f32_to_e4m3(float f)
{
    uint8_t s = 0;
    float a;
    int e;
    if (isnan(f))
        return 0x7f;
    if (signbit(f)) {
        s = 0x80;
        f = -f;
    }
    if (f >= 448.0f)
        return s | 0x7e;
    if (f < ldexpf(1.0f, -6)) {
        /* subnormal: multiples of 2^-9, ties to even */
        float q = nearbyintf(f * 512.0f);
        return s | (uint8_t)q; /* q == 8 gives the smallest normal 0x08 */
    }
    e = ilogbf(f);
    a = ldexpf(f, -e);                 /* [1, 2) */
    a = nearbyintf((a - 1.0f) * 8.0f); /* 0..8 */
    if (a >= 8.0f) {
        a = 0.0f;
        e++;
    }
    if (e > 8 || (e == 8 && a > 6.0f))
        return s | 0x7e;
    return s | (uint8_t)(((e + 7) << 3) | (int)a);
}

float kdtype_e2m1_to_f32(uint8_t nibble)
{
    static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    float v = mag[nibble & 7];
    return (nibble & 8) ? -v : v;
}

uint8_t kdtype_f32_to_e2m1(float f)
{
    uint8_t s = signbit(f) ? 8 : 0;
    float a = fabsf(f);
    uint8_t m;
    if (isnan(f))
        return 0;
    if (a <= 0.25f)
        m = 0;
    else if (a < 0.75f)
        m = 1;
    else if (a <= 1.25f)
        m = 2;
    else if (a < 1.75f)
        m = 3;
    else if (a <= 2.5f)
        m = 4;
    else if (a < 3.5f)
        m = 5;
    else if (a <= 5.0f)
        m = 6;
    else
        m = 7;
    return s | m;
}

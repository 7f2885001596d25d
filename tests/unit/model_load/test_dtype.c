/* dtype conversions: known values, RNE ties, saturation, exhaustive round trips. */
#include "model/dtype.h"
#include "test.h"

#include <string.h>

static float bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void test_bf16(void)
{
    CHECK_EQ_INT(dtype_f32_to_bf16(1.0f), 0x3f80);
    CHECK_EQ_INT(dtype_f32_to_bf16(-2.0f), 0xc000);
    CHECK_EQ_INT(dtype_f32_to_bf16(bits(0x3f808000u)), 0x3f80); /* tie -> even */
    CHECK_EQ_INT(dtype_f32_to_bf16(bits(0x3f818000u)), 0x3f82); /* tie -> even (up) */
    CHECK_EQ_INT(dtype_f32_to_bf16(bits(0x3f808001u)), 0x3f81); /* above tie */
    CHECK_EQ_INT(dtype_f32_to_bf16(bits(0x3f807fffu)), 0x3f80);
    CHECK(isnan(dtype_bf16_to_f32(dtype_f32_to_bf16(NAN))));
    CHECK(isinf(dtype_bf16_to_f32(dtype_f32_to_bf16(INFINITY))));
    CHECK_NEAR(dtype_bf16_to_f32(0x4049), 3.140625, 0);
    CHECK_NEAR(dtype_round_bf16(3.14159265f), 3.140625, 0);
    for (uint32_t v = 0; v < 65536; v++) {
        float f = dtype_bf16_to_f32((uint16_t)v);
        if (!isnan(f) && dtype_f32_to_bf16(f) != v) {
            CHECK_EQ_INT(dtype_f32_to_bf16(f), v);
            break;
        }
    }
}

static void test_f16(void)
{
    CHECK_EQ_INT(dtype_f32_to_f16(1.0f), 0x3c00);
    CHECK_EQ_INT(dtype_f32_to_f16(-2.0f), 0xc000);
    CHECK_EQ_INT(dtype_f32_to_f16(65504.0f), 0x7bff);
    CHECK_EQ_INT(dtype_f32_to_f16(65519.0f), 0x7bff);
    CHECK_EQ_INT(dtype_f32_to_f16(65520.0f), 0x7c00);
    CHECK_EQ_INT(dtype_f32_to_f16(0.1f), 0x2e66);
    CHECK_EQ_INT(dtype_f32_to_f16(ldexpf(1.0f, -24)), 0x0001);
    CHECK_EQ_INT(dtype_f32_to_f16(ldexpf(1.0f, -25)), 0x0000); /* tie -> even (0) */
    CHECK_EQ_INT(dtype_f32_to_f16(ldexpf(3.0f, -25)), 0x0002); /* 1.5 quanta -> 2 */
    CHECK_EQ_INT(dtype_f32_to_f16(ldexpf(1.0f, -14)), 0x0400);
    CHECK_EQ_INT(dtype_f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3c00); /* tie -> even */
    CHECK_EQ_INT(dtype_f32_to_f16(1.0f + ldexpf(3.0f, -11)), 0x3c02);
    CHECK_NEAR(dtype_f16_to_f32(0x3555), 0.333251953125, 0);
    CHECK_NEAR(dtype_f16_to_f32(0x0001), ldexp(1.0, -24), 0);
    CHECK(isinf(dtype_f16_to_f32(0x7c00)));
    for (uint32_t v = 0; v < 65536; v++) {
        float f = dtype_f16_to_f32((uint16_t)v);
        if (!isnan(f) && dtype_f32_to_f16(f) != v) {
            CHECK_EQ_INT(dtype_f32_to_f16(f), v);
            break;
        }
    }
}

static void test_e4m3(void)
{
    CHECK_NEAR(dtype_e4m3_to_f32(0x7e), 448.0, 0);
    CHECK_NEAR(dtype_e4m3_to_f32(0xfe), -448.0, 0);
    CHECK(isnan(dtype_e4m3_to_f32(0x7f)));
    CHECK_NEAR(dtype_e4m3_to_f32(0x38), 1.0, 0);
    CHECK_NEAR(dtype_e4m3_to_f32(0x40), 2.0, 0);
    CHECK_NEAR(dtype_e4m3_to_f32(0x08), 1.0 / 64, 0);
    CHECK_NEAR(dtype_e4m3_to_f32(0x01), 1.0 / 512, 0);
    CHECK_NEAR(dtype_e4m3_to_f32(0x07), 7.0 / 512, 0);
    CHECK_NEAR(dtype_e4m3_to_f32(0x3b), 1.375, 0);
    CHECK_EQ_INT(dtype_f32_to_e4m3(448.0f), 0x7e);
    CHECK_EQ_INT(dtype_f32_to_e4m3(500.0f), 0x7e); /* saturate */
    CHECK_EQ_INT(dtype_f32_to_e4m3(1e9f), 0x7e);
    CHECK_EQ_INT(dtype_f32_to_e4m3(-1000.0f), 0xfe);
    CHECK_EQ_INT(dtype_f32_to_e4m3(INFINITY), 0x7e);
    CHECK_EQ_INT(dtype_f32_to_e4m3(NAN), 0x7f);
    CHECK_EQ_INT(dtype_f32_to_e4m3(1.0625f), 0x38); /* tie between 1.0 and 1.125 -> even */
    CHECK_EQ_INT(dtype_f32_to_e4m3(1.1875f), 0x3a); /* tie between 1.125 and 1.25 -> 1.25 */
    CHECK_EQ_INT(dtype_f32_to_e4m3(1.07f), 0x39);
    CHECK_EQ_INT(dtype_f32_to_e4m3(ldexpf(1.5f, -9)), 0x02); /* subnormal tie -> even */
    CHECK_EQ_INT(dtype_f32_to_e4m3(ldexpf(1.0f, -11)), 0x00);
    CHECK_EQ_INT(dtype_f32_to_e4m3(ldexpf(7.5f, -9)),
                 0x08); /* subnormal tie rounds up into the normals */
    CHECK_EQ_INT(dtype_f32_to_e4m3(ldexpf(15.5f, -9)), 0x10); /* tie 15|16 quanta -> 2^-5 */
    CHECK_EQ_INT(dtype_f32_to_e4m3(-0.0f), 0x80);
    CHECK_EQ_INT(dtype_f32_to_e4m3(432.0f), 0x7e); /* tie 416|448: 448 has even mantissa */
    CHECK_EQ_INT(dtype_f32_to_e4m3(420.0f), 0x7d);
    for (int v = 0; v < 256; v++) {
        if ((v & 0x7f) == 0x7f)
            continue;
        float f = dtype_e4m3_to_f32((uint8_t)v);
        if (dtype_f32_to_e4m3(f) != v) {
            CHECK_EQ_INT(dtype_f32_to_e4m3(f), v);
            break;
        }
    }
}

static void test_e2m1(void)
{
    static const float table[16] = {0,     0.5f,  1,  1.5f,  2,  3,  4,  6,
                                    -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    for (int i = 0; i < 16; i++) {
        CHECK_NEAR(dtype_e2m1_to_f32((uint8_t)i), table[i], 0);
        CHECK_EQ_INT(dtype_f32_to_e2m1(table[i]), i);
    }
    CHECK_NEAR(dtype_e2m1_to_f32(0xf7), 6.0, 0); /* high bits ignored */
    struct {
        float x;
        int code;
    } cases[] = {{0.25f, 0}, {0.26f, 1}, {0.74f, 1}, {0.75f, 2}, {1.25f, 2},  {1.26f, 3},
                 {1.74f, 3}, {1.75f, 4}, {2.5f, 4},  {2.51f, 5}, {3.49f, 5},  {3.5f, 6},
                 {5.0f, 6},  {5.01f, 7}, {100.f, 7}, {-0.6f, 9}, {-5.5f, 15}, {-0.1f, 8}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (dtype_f32_to_e2m1(cases[i].x) != cases[i].code) {
            fprintf(stderr, "e2m1(%g)\n", (double)cases[i].x);
            CHECK_EQ_INT(dtype_f32_to_e2m1(cases[i].x), cases[i].code);
        }
    }
}

int main(void)
{
    test_bf16();
    test_f16();
    test_e4m3();
    test_e2m1();
    return test_result();
}

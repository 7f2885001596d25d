/* CPU checks of the kernel references' scalar formats: e2m1 table and rounding thresholds
 * (CHECKPOINTS.md §1.1), e4m3 round trips over all 256 codes, bf16 rounding. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kdtype.h"
#include "test.h"

int main(void)
{
    static const float mag[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    for (int n = 0; n < 16; n++) {
        float v = kdtype_e2m1_to_f32((uint8_t)n);
        CHECK_NEAR(fabsf(v), mag[n & 7], 0);
        CHECK((n & 8) ? signbit(v) : !signbit(v));
        CHECK_EQ_INT(kdtype_f32_to_e2m1(v), n == 8 ? 8 : n);
    }
    /* thresholds: <=0.25 ->0, <0.75 ->0.5, <=1.25 ->1, <1.75 ->1.5, <=2.5 ->2, <3.5 ->3, <=5 ->4 */
    CHECK_EQ_INT(kdtype_f32_to_e2m1(0.25f), 0);
    CHECK_EQ_INT(kdtype_f32_to_e2m1(0.2501f), 1);
    CHECK_EQ_INT(kdtype_f32_to_e2m1(0.75f), 2);
    CHECK_EQ_INT(kdtype_f32_to_e2m1(1.25f), 2);
    CHECK_EQ_INT(kdtype_f32_to_e2m1(1.75f), 4);
    CHECK_EQ_INT(kdtype_f32_to_e2m1(2.5f), 4);
    CHECK_EQ_INT(kdtype_f32_to_e2m1(3.5f), 6);
    CHECK_EQ_INT(kdtype_f32_to_e2m1(5.0f), 6);
    CHECK_EQ_INT(kdtype_f32_to_e2m1(5.01f), 7);
    CHECK_EQ_INT(kdtype_f32_to_e2m1(100.0f), 7);
    CHECK_EQ_INT(kdtype_f32_to_e2m1(-3.2f), 8 | 5);

    /* e4m3: every finite code round-trips; known values */
    for (int c = 0; c < 256; c++) {
        if ((c & 0x7f) == 0x7f)
            continue;
        float v = kdtype_e4m3_to_f32((uint8_t)c);
        if (c == 0x80)
            continue; /* -0 */
        CHECK_EQ_INT(kdtype_f32_to_e4m3(v), c);
    }
    CHECK_NEAR(kdtype_e4m3_to_f32(0x7e), 448.0, 0);
    CHECK_NEAR(kdtype_e4m3_to_f32(0x01), ldexp(1.0, -9), 0);
    CHECK_NEAR(kdtype_e4m3_to_f32(0x38), 1.0, 0);
    CHECK_EQ_INT(kdtype_f32_to_e4m3(1000.0f), 0x7e);
    CHECK_EQ_INT(kdtype_f32_to_e4m3(1.0625f), 0x38); /* tie -> even mantissa */
    CHECK_EQ_INT(kdtype_f32_to_e4m3(1.1875f), 0x3a); /* tie 1.125/1.25 -> 1.25 (even) */
    CHECK(isnan(kdtype_e4m3_to_f32(0x7f)));

    /* bf16 */
    CHECK_NEAR(kdtype_round_bf16(1.0f + 1.0f / 256.0f), 1.0, 0); /* tie to even */
    CHECK_NEAR(kdtype_round_bf16(1.0f + 3.0f / 256.0f), 1.0 + 4.0 / 256.0, 0);
    CHECK_EQ_INT(kdtype_f32_to_bf16(-2.0f), 0xc000);
    CHECK(isnan(kdtype_bf16_to_f32(kdtype_f32_to_bf16(NAN))));
    return test_result();
}

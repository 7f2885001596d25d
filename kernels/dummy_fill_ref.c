/* dummy_fill_ref: the CPU reference of dummy_fill (dummy_fill.h). */
#include "dummy_fill.h"

#include "common/dummy_gen.h"
#include "common/err.h"

int dummy_fill_bytes_ref(uint8_t *out, int64_t n, uint64_t seed, uint8_t mask, uint8_t add)
{
    if ((!out && n > 0) || n < 0)
        return ERR_INVAL;
    for (int64_t i = 0; i < n; i++)
        out[i] = (uint8_t)(((dummy_gen_unit(seed, i / 8) >> (8 * (i % 8))) & mask) + add);
    return 0;
}

int dummy_fill_u16_ref(uint16_t *out, int64_t n, uint64_t seed, const uint16_t *table)
{
    if ((!out && n > 0) || n < 0 || !table)
        return ERR_INVAL;
    for (int64_t i = 0; i < n; i++)
        out[i] = table[(dummy_gen_unit(seed, i / 8) >> (8 * (i % 8))) & 0xff];
    return 0;
}

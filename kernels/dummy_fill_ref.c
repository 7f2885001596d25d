/* dummy_fill_ref: the CPU reference of dummy_fill (dummy_fill.h). */
#include "dummy_fill.h"

#include "common/dummy_gen.h"
#include "common/err.h"

int dummy_fill_bytes_ref(uint8_t *out, int64_t n, uint64_t seed, uint8_t mask, uint8_t add)
{
    if ((!out && n > 0) || n < 0)
        return ERR_INVAL;
    dummy_gen_bytes(out, n, seed, mask, add, 0, dummy_gen_units(n));
    return 0;
}

int dummy_fill_u16_ref(uint16_t *out, int64_t n, uint64_t seed, const uint16_t *table)
{
    if ((!out && n > 0) || n < 0 || !table)
        return ERR_INVAL;
    dummy_gen_u16(out, n, seed, table, 0, dummy_gen_units(n));
    return 0;
}

/* cast_bf16 reference. */
#include "cast_bf16.h"

#include "common/err.h"
#include "kdtype.h"

int cast_bf16_ref(uint16_t *out, const float *x, int64_t n)
{
    if (n < 0)
        return ERR_INVAL;
    for (int64_t i = 0; i < n; i++)
        out[i] = kdtype_f32_to_bf16(x[i]);
    return 0;
}

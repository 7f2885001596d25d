/* fused_add_rmsnorm reference: the unfused references composed. */
#include "fused_add_rmsnorm.h"

#include "common/err.h"
#include "rmsnorm.h"

int fused_add_rmsnorm_ref(float *out, float *resid, const float *x, const float *w, int n_rows,
                          int dim, float eps, float w_offset)
{
    if (n_rows < 0 || dim <= 0)
        return ERR_INVAL;
    for (long i = 0; i < (long)n_rows * dim; i++)
        resid[i] += x[i];
    return rmsnorm_ref(out, resid, w, n_rows, dim, eps, w_offset);
}

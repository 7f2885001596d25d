/* rmsnorm reference: plain loops, double sum of squares. */
#include "rmsnorm.h"

#include <math.h>

#include "common/err.h"

int rmsnorm_ref(float *out, const float *x, const float *w, int n_rows, int dim, float eps,
                float w_offset)
{
    if (n_rows < 0 || dim <= 0)
        return ERR_INVAL;
    for (int r = 0; r < n_rows; r++) {
        const float *xr = x + (long)r * dim;
        float *o = out + (long)r * dim;
        double ss = 0;
        float inv;
        for (int i = 0; i < dim; i++)
            ss += (double)xr[i] * xr[i];
        inv = (float)(1.0 / sqrt(ss / dim + eps));
        for (int i = 0; i < dim; i++)
            o[i] = xr[i] * inv * (w_offset + w[i]);
    }
    return 0;
}

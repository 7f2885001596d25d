/* gemm_bf16 reference: double accumulation. */
#include "gemm_bf16.h"

#include "common/err.h"
#include "kdtype.h"

int gemm_bf16_ref(float *y, const uint16_t *x, const uint16_t *w, int m, int n, int k,
                  int accumulate)
{
    if (m < 0 || n <= 0 || k <= 0)
        return ERR_INVAL;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double acc = accumulate ? y[(long)i * n + j] : 0.0;
            for (int c = 0; c < k; c++)
                acc += (double)kdtype_bf16_to_f32(x[(long)i * k + c]) *
                       kdtype_bf16_to_f32(w[(long)j * k + c]);
            y[(long)i * n + j] = (float)acc;
        }
    return 0;
}

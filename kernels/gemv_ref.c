/* gemv reference: dequantize each row, then a plain double-accumulated dot product. */
#include "gemv.h"

#include <stdlib.h>

#include "common/err.h"
#include "common/xalloc.h"

int gemv_ref(float *y, const struct kweight *w, int expert, const float *x, int n_tok)
{
    float *row;
    if (!w || w->rows <= 0 || w->cols <= 0 || n_tok <= 0)
        return ERR_INVAL;
    row = xmalloc(sizeof(float) * (size_t)w->cols);
    for (int r = 0; r < w->rows; r++) {
        kweight_ref_row(w, expert, r, row);
        for (int t = 0; t < n_tok; t++) {
            double acc = 0.0;
            for (int c = 0; c < w->cols; c++)
                acc += (double)row[c] * x[(int64_t)t * w->cols + c];
            y[(int64_t)t * w->rows + r] = (float)acc;
        }
    }
    free(row);
    return 0;
}

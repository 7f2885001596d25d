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

int gemv_multi_ref(const struct gemv_out *outs, int n, const float *x, int n_tok)
{
    if (!outs || n < 1 || n > GEMV_MULTI_MAX || !x || n_tok < 1)
        return ERR_INVAL;
    for (int i = 0; i < n; i++) {
        if (!outs[i].w || !outs[i].y || outs[i].expert < 0 || outs[i].w->rows <= 0 ||
            outs[i].w->cols != outs[0].w->cols)
            return ERR_INVAL;
        if ((outs[i].w->rows > GEMV_WIDE_MAX_ROWS || n_tok > GEMV_WIDE_MAX_TOK) &&
            (outs[i].w->fmt != KW_FMT_NVFP4 || n < 2 || n > 3 || n_tok > 8))
            return ERR_UNSUPPORTED; // the stream kernel's limits (shared memory) not modelled
    }
    for (int i = 0; i < n; i++) {
        int rc = gemv_ref(outs[i].y, outs[i].w, outs[i].expert, x, n_tok);
        if (rc < 0)
            return rc;
    }
    return 0;
}

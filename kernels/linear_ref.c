/* linear_ref: host references of linear.cu's GEMM path (kernels/linear.h). */
#include "linear.h"

#include <stdlib.h>

#include "common/err.h"
#include "kdtype.h"

const char *linear_path_name(int path)
{
    return path == LINEAR_PATH_GEMV        ? "gemv"
           : path == LINEAR_PATH_GEMM       ? "gemm"
           : path == LINEAR_PATH_GEMM_SPLIT ? "gemm_split"
           : path == LINEAR_PATH_TILES      ? "tiles"
                                            : "?";
}

int linear_dequant_bf16_ref(uint16_t *out, const struct kweight *w, int expert, int r0, int nr)
{
    if (!out || !w || w->cols <= 0 || r0 < 0 || nr < 0 || r0 + nr > w->rows)
        return ERR_INVAL;
    for (int r = 0; r < nr; r++)
        for (int c = 0; c < w->cols; c++)
            out[(int64_t)r * w->cols + c] =
                kdtype_f32_to_bf16(kweight_ref_elem(w, expert, r0 + r, c));
    return 0;
}

int linear_gemm_ref(float *y, const struct kweight *w, int expert, const float *x, int n)
{
    if (!y || !w || !x || n < 0 || w->rows <= 0 || w->cols <= 0)
        return ERR_INVAL;
    const int R = w->rows, C = w->cols;
    float *wr = malloc(sizeof(float) * (size_t)C), *xr = malloc(sizeof(float) * (size_t)n * C);
    if (!wr || !xr) {
        free(wr);
        free(xr);
        return ERR_NOMEM;
    }
    for (int64_t i = 0; i < (int64_t)n * C; i++)
        xr[i] = kdtype_bf16_to_f32(kdtype_f32_to_bf16(x[i]));
    for (int r = 0; r < R; r++) {
        for (int c = 0; c < C; c++)
            wr[c] = kdtype_bf16_to_f32(kdtype_f32_to_bf16(kweight_ref_elem(w, expert, r, c)));
        for (int t = 0; t < n; t++) {
            double acc = 0.0;
            for (int c = 0; c < C; c++)
                acc += (double)wr[c] * (double)xr[(int64_t)t * C + c];
            y[(int64_t)t * R + r] = (float)acc;
        }
    }
    free(wr);
    free(xr);
    return 0;
}

/* gemm_fp8 reference: the activation quantization of the GPU path, then double accumulation. */
#include "gemm_fp8.h"

#include <math.h>
#include <stdlib.h>

#include "common/err.h"
#include "kdtype.h"

static int gemm_fp8_check(const struct kweight *w, int rows)
{
    if (!w || !w->data || w->fmt != KW_FMT_FP8 || rows < 0 || w->rows <= 0 || w->cols <= 0 ||
        w->rows % 16 || w->cols % 16 || w->row_stride % 16 || w->expert_stride % 16 ||
        w->row_stride < w->cols || !w->scale)
        return ERR_INVAL;
    if (w->scale_kind != KW_SCALE_TENSOR && w->scale_kind != KW_SCALE_CHANNEL &&
        w->scale_kind != KW_SCALE_BLOCK)
        return ERR_INVAL;
    if (w->scale_kind == KW_SCALE_BLOCK &&
        (w->block_rows <= 0 || w->block_cols <= 0 || w->block_cols % 16))
        return ERR_INVAL;
    return 0;
}

int gemm_fp8_ref(float *y, const float *x, int rows, const struct kweight *w, int expert,
                 int accumulate)
{
    const int n = w ? w->rows : 0, k = w ? w->cols : 0;
    float *xq, *wrow;
    int rc = gemm_fp8_check(w, rows);
    if (rc < 0 || !y || !x || expert < 0)
        return rc < 0 ? rc : ERR_INVAL;
    xq = malloc(sizeof(float) * (size_t)k);
    wrow = malloc(sizeof(float) * (size_t)k);
    if (!xq || !wrow) {
        free(xq);
        free(wrow);
        return ERR_NOMEM;
    }
    const int blk = w->scale_kind == KW_SCALE_BLOCK;
    const float *sc = w->scale + (int64_t)expert * w->scale_expert_stride;
    for (int t = 0; t < rows; t++) {
        const float *xt = x + (size_t)t * k;
        float st = 1.0f;
        if (blk) {
            for (int c = 0; c < k; c++)
                xq[c] = kdtype_round_bf16(xt[c]);
        } else {
            float amax = 0.0f;
            for (int c = 0; c < k; c++)
                amax = fmaxf(amax, fabsf(xt[c]));
            const float inv = amax > 0.0f ? 448.0f / amax : 0.0f;
            st = amax / 448.0f;
            for (int c = 0; c < k; c++)
                xq[c] = kdtype_e4m3_to_f32(kdtype_f32_to_e4m3(xt[c] * inv));
        }
        for (int r = 0; r < n; r++) {
            const uint8_t *wr = (const uint8_t *)w->data + (int64_t)expert * w->expert_stride +
                                (int64_t)r * w->row_stride;
            double acc = 0.0;
            if (blk) {
                const int nbc = (k + w->block_cols - 1) / w->block_cols;
                for (int c = 0; c < k; c++)
                    wrow[c] = kdtype_round_bf16(
                        kdtype_e4m3_to_f32(wr[c]) *
                        sc[(int64_t)(r / w->block_rows) * nbc + c / w->block_cols]);
                for (int c = 0; c < k; c++)
                    acc += (double)xq[c] * wrow[c];
            } else {
                for (int c = 0; c < k; c++)
                    acc += (double)xq[c] * kdtype_e4m3_to_f32(wr[c]);
                acc *= (double)st * (w->scale_kind == KW_SCALE_CHANNEL ? sc[r] : sc[0]);
            }
            float *o = y + (size_t)t * n + r;
            *o = accumulate ? (float)(*o + acc) : (float)acc;
        }
    }
    free(xq);
    free(wrow);
    return 0;
}

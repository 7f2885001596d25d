/* kweight: host-side element access for the references (definition of the formats in kweight.h). */
#include "kweight.h"

#include "common/xalloc.h"
#include "kdtype.h"

float kweight_ref_elem(const struct kweight *w, int e, int r, int c)
{
    int64_t i = (int64_t)e * w->expert_stride + (int64_t)r * w->row_stride + c;
    if (w->fmt == KW_FMT_BF16)
        return kdtype_bf16_to_f32(((const uint16_t *)w->data)[i]);
    if (w->fmt == KW_FMT_FP8) {
        float v = kdtype_e4m3_to_f32(((const uint8_t *)w->data)[i]);
        const float *s = w->scale + (int64_t)e * w->scale_expert_stride;
        switch (w->scale_kind) {
        case KW_SCALE_TENSOR:
            return v * s[0];
        case KW_SCALE_CHANNEL:
            return v * s[r];
        case KW_SCALE_BLOCK:
            return v *
                   s[(r / w->block_rows) * CEIL_DIV(w->cols, w->block_cols) + c / w->block_cols];
        default:
            return v;
        }
    }
    {
        uint8_t b = ((const uint8_t *)w->data)[i / 2];
        uint8_t nib = (i & 1) ? (uint8_t)(b >> 4) : (uint8_t)(b & 0xf);
        float bs = kdtype_e4m3_to_f32(w->bscale[(int64_t)e * w->bscale_expert_stride +
                                                (int64_t)r * w->bscale_stride + c / 16]);
        float g = w->gscale_e ? w->gscale_e[e] : w->gscale;
        return kdtype_e2m1_to_f32(nib) * bs * g;
    }
}

void kweight_ref_row(const struct kweight *w, int e, int r, float *out)
{
    for (int c = 0; c < w->cols; c++)
        out[c] = kweight_ref_elem(w, e, r, c);
}

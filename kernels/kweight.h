/* kweight: the view of one linear weight [rows=out, cols=in] (or of a stack of experts) that the
 * GEMV and MoE kernels read. Plain C scalars only; the worker fills it from model/qweight.h with
 * device pointers, the references and tests fill it with host pointers.
 *
 * Element W[e][r][c] (e = expert, 0 for a plain weight):
 *   KW_FMT_BF16:  data  (uint16_t) [e*expert_stride + r*row_stride + c]
 *   KW_FMT_FP8:   data  (uint8_t e4m3fn) at the same index, times
 *                 TENSOR: scale[e*scale_expert_stride]; CHANNEL: scale[e*ses + r];
 *                 BLOCK:  scale[e*ses + (r/block_rows)*CEIL_DIV(cols, block_cols) + c/block_cols]
 *   KW_FMT_NVFP4: e2m1 nibble of byte data[(e*expert_stride + r*row_stride + c)/2]
 *                 (element 2j in the low nibble), times e4m3 bscale[e*bscale_expert_stride +
 *                 r*bscale_stride + c/16], times gscale_e ? gscale_e[e] : gscale.
 * Strides are in elements (bytes for bscale). */
#ifndef KERNELS_KWEIGHT_H
#define KERNELS_KWEIGHT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum kw_fmt { KW_FMT_BF16 = 1, KW_FMT_FP8 = 2, KW_FMT_NVFP4 = 3 };
enum kw_scale { KW_SCALE_NONE = 0, KW_SCALE_TENSOR, KW_SCALE_CHANNEL, KW_SCALE_BLOCK };

struct kweight {
    int fmt;               // enum kw_fmt
    int rows;              // out features (per expert)
    int cols;              // in features
    int64_t row_stride;    // elements between row starts (>= cols)
    int64_t expert_stride; // elements between experts; 0 for a plain weight
    const void *data;      // see above
    /* FP8 */
    int scale_kind;              // enum kw_scale
    const float *scale;          // multipliers, see above
    int block_rows;              // BLOCK: rows per scale block (e.g. 128)
    int block_cols;              // BLOCK: cols per scale block (e.g. 128, multiple of 16)
    int64_t scale_expert_stride; // floats between experts' scale arrays
    /* NVFP4 */
    const uint8_t *bscale;        // e4m3 (rows, bscale_stride) per expert
    int64_t bscale_stride;        // bytes between rows of bscale (>= cols/16)
    int64_t bscale_expert_stride; // bytes between experts' bscale
    float gscale;                 // global multiplier when gscale_e is NULL
    const float *gscale_e;        // (n_experts,) per-expert global multipliers, or NULL
};

/* Host references: W[e][r][c] as fp32 (host pointers), and row r of expert e into out[cols]. */
float kweight_ref_elem(const struct kweight *w, int e, int r, int c);
void kweight_ref_row(const struct kweight *w, int e, int r, float *out);

#ifdef __cplusplus
}
#endif

#endif

/* qweight: the in-memory form of one linear weight [rows=out, cols=in], whatever the checkpoint
 * format. The loader (model_load) decodes checkpoint names and scale conventions into this one
 * struct; the CPU forward pass, the CUDA backend and the packers only see qweight.
 *
 * Element value W[r][c] by format (data is row-major, rows contiguous unless row_stride says):
 *   QW_F32 / QW_BF16 / QW_F16: the stored value.
 *   QW_FP8 (e4m3fn):  fp8(data[r][c]) * scale(r, c) where scale_kind selects
 *                     TENSOR: scale[0]; CHANNEL: scale[r];
 *                     BLOCK:  scale[(r / block_rows) * CEIL_DIV(cols, block_cols) + c / block_cols]
 *                     (the loader turns weight_scale / weight_scale_inv into this multiplier).
 *   QW_NVFP4:         e2m1(nibble) * e4m3(bscale[r * cols/16 + c/16]) * gscale
 *                     data holds cols/2 bytes per row, element 2j in the low nibble of byte j.
 *                     gscale is a multiplier: 1/weight_global_scale (compressed-tensors) or
 *                     weight_scale_2 (ModelOpt).
 * W4A4 (act_fp4): before the product the activation row is quantized per 16 elements exactly as
 * CHECKPOINTS.md §1.5 says, with act_gscale = g_in in the compressed-tensors sense (the large
 * number: input_global_scale, or 1/input_scale for ModelOpt), and dequantized again:
 *   s = e4m3(clamp(g_in*amax/6, -448, 448)); xq = e2m1(clamp(x*g_in/s, -6, 6)); x' = xq*s/g_in. */
#ifndef MODEL_QWEIGHT_H
#define MODEL_QWEIGHT_H

#include <stdbool.h>
#include <stdint.h>

struct tpool;

enum qw_format { QW_F32 = 0, QW_BF16, QW_F16, QW_FP8, QW_NVFP4 };
enum qw_scale { QW_SCALE_NONE = 0, QW_SCALE_TENSOR, QW_SCALE_CHANNEL, QW_SCALE_BLOCK };

struct qweight {
    enum qw_format fmt;
    int64_t rows;              // out features
    int64_t cols;              // in features
    int64_t row_stride;        // elements between row starts (== cols when contiguous); for NVFP4 in elements too
    const void *data;          // (rows, cols) in fmt; NULL means "absent"
    /* FP8 */
    enum qw_scale scale_kind;
    const float *scale;        // see above; owned by the model (converted to f32 at load)
    int block_rows;            // BLOCK: e.g. 128
    int block_cols;            // BLOCK: e.g. 128
    /* NVFP4 */
    const uint8_t *bscale;     // (rows, cols/16) e4m3 block scales, row-major
    int64_t bscale_stride;     // bytes between rows of bscale (== cols/16 when contiguous)
    float gscale;              // per-tensor multiplier
    /* W4A4 activation emulation */
    bool act_fp4;
    float act_gscale;          // g_in, compressed-tensors sense
    /* --load-format dummy on the device (model_load_opts.dummy_device): data (and bscale) stay
     * NULL, the GPU runner writes the values (model_dummy_streams) */
    bool dummy;
    uint64_t dummy_seed; // the tensor's stream (common/dummy_gen.h)
    float dummy_amp;     // BF16: values in [-amp, amp)
};

/* True when w->data is set, or w is a dummy weight the device fills (w->dummy). */
bool qweight_present(const struct qweight *w);
/* Dequantize row r into out[cols] (fp32). */
void qweight_dequant_row(const struct qweight *w, int64_t r, float *out);
/* y[t][r] = sum_c W[r][c] * x'[t][c] for t < n_tok (x: (n_tok, cols), y: (n_tok, rows), fp32).
 * x' is x, or its W4A4 emulation when act_fp4. Parallel over rows on tp (may be NULL). */
void qweight_matmul(const struct qweight *w, const float *x, int64_t n_tok, float *y,
                    struct tpool *tp);
/* The same with the activation semantics chosen by the caller: act_quant false runs an act_fp4
 * (W4A4) weight weight-only, x' = x (what a GPU without FP4 tensor cores computes: dequantized
 * weights, unquantized activations); true is qweight_matmul. Other formats ignore it. */
void qweight_matmul_act(const struct qweight *w, const float *x, int64_t n_tok, float *y,
                        struct tpool *tp, bool act_quant);
/* Bytes this weight occupies in memory (data + scales). */
int64_t qweight_bytes(const struct qweight *w);
/* A view of rows [r0, r0+n) of w (same format, shares memory). */
struct qweight qweight_rows(const struct qweight *w, int64_t r0, int64_t n);
/* Human name of the format, e.g. "bf16", "fp8-block128", "nvfp4", "nvfp4-w4a4". */
const char *qweight_format_name(const struct qweight *w);

#endif

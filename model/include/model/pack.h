/* pack: quantizers that turn fp32 weights into checkpoint storage formats, and the matching
 * dequantizers (the definition the loader's qweight must agree with).
 *   bf16 / f16: round to nearest even (model/dtype.h).
 *   FP8 e4m3: scale = amax / 448 per tensor, per output row (channel) or per block of
 *     block x block elements; q = e4m3(w / scale); W = e4m3(q) * scale. The same multiplier is
 *     stored as `weight_scale` (compressed-tensors) or `weight_scale_inv` (Qwen/DeepSeek FP8).
 *   NVFP4 (CHECKPOINTS.md §1.4): global gs = 448*6/amax (compressed-tensors weight_global_scale;
 *     ModelOpt stores weight_scale_2 = 1/gs); per 16 consecutive elements of a row
 *     s = e4m3(gs * (amax16/6)), q = e2m1(clamp(w*gs/s, +-6)) (RNE), two codes per byte, element
 *     2j in the low nibble; W = e2m1(q) * s / gs.
 * All arrays are row-major [rows][cols]; cols must be a multiple of 16 for NVFP4. */
#ifndef MODEL_PACK_H
#define MODEL_PACK_H

#include <stdint.h>

enum pack_fp8_scale { PACK_FP8_TENSOR = 0, PACK_FP8_CHANNEL, PACK_FP8_BLOCK };

#define PACK_NVFP4_GROUP 16
#define PACK_E4M3_MAX 448.0f
#define PACK_E2M1_MAX 6.0f

void pack_bf16(const float *x, int64_t n, uint16_t *out);
void pack_f16(const float *x, int64_t n, uint16_t *out);

/* Max |x| over n values (0 for n == 0). */
float pack_amax(const float *x, int64_t n);

/* Number of fp32 scales pack_fp8 writes: 1, rows, or CEIL_DIV(rows,block)*CEIL_DIV(cols,block). */
int64_t pack_fp8_n_scales(enum pack_fp8_scale kind, int64_t rows, int64_t cols, int block);
/* Quantize w (rows, cols) to e4m3 codes q (rows*cols) and multipliers scale (see
 * pack_fp8_n_scales; block scales row-major [rows/block][cols/block]). A zero amax gives scale 1.
 * Returns 0 or ERR_INVAL (block < 1 for PACK_FP8_BLOCK, bad sizes). */
int pack_fp8(const float *w, int64_t rows, int64_t cols, enum pack_fp8_scale kind, int block,
             uint8_t *q, float *scale);
/* out (rows, cols) = e4m3(q) * scale(r, c). */
void pack_fp8_dequant(const uint8_t *q, const float *scale, int64_t rows, int64_t cols,
                      enum pack_fp8_scale kind, int block, float *out);

/* The compressed-tensors global scale 448*6/amax (1 when amax is 0 or not finite). Also the
 * W4A4 input_global_scale from a calibration activation amax. */
float pack_nvfp4_global(float amax);
/* Quantize w (rows, cols) with global scale gs (pack_nvfp4_global of this tensor's amax, or of a
 * fused group's shared amax): packed (rows, cols/2) bytes, bscale (rows, cols/16) e4m3 codes.
 * Returns 0 or ERR_INVAL (cols % 16 != 0, gs <= 0). */
int pack_nvfp4(const float *w, int64_t rows, int64_t cols, float gs, uint8_t *packed,
               uint8_t *bscale);
/* out (rows, cols) = e2m1(nibble) * e4m3(bscale) / gs. */
void pack_nvfp4_dequant(const uint8_t *packed, const uint8_t *bscale, float gs, int64_t rows,
                        int64_t cols, float *out);

/* W4A4 activation emulation of CHECKPOINTS.md §1.5 for one row x[n] (n % 16 == 0) with input
 * global scale g_in: out = dequant(quant(x)). In place allowed. */
void pack_nvfp4_act_fake_quant(const float *x, int64_t n, float g_in, float *out);

#endif

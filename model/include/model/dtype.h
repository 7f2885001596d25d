/* dtype: scalar conversions between the storage types of checkpoints and fp32.
 * Rounding is round-to-nearest-even everywhere; e4m3 saturates to +-448 (no inf, NaN = 0x7f),
 * e2m1 saturates to +-6 with the thresholds of CHECKPOINTS.md §1.1. */
#ifndef MODEL_DTYPE_H
#define MODEL_DTYPE_H

#include <stdint.h>

float dtype_bf16_to_f32(uint16_t v);
uint16_t dtype_f32_to_bf16(float f);
float dtype_f16_to_f32(uint16_t v);
uint16_t dtype_f32_to_f16(float f);
float dtype_e4m3_to_f32(uint8_t v);
uint8_t dtype_f32_to_e4m3(float f);
float dtype_e2m1_to_f32(uint8_t nibble);   /* low 4 bits used */
uint8_t dtype_f32_to_e2m1(float f);        /* returns a nibble 0..15 */
/* Round an fp32 value through bf16 and back (the bf16 reference's per-op rounding). */
float dtype_round_bf16(float f);

#endif

/* kdtype: host-side scalar conversions used by the kernel references and kernel tests
 * (bf16, e4m3fn, e2m1). kernels/ depends on nothing of model/, so these mirror model/dtype.h.
 * Rounding is round-to-nearest-even; e4m3 saturates to +-448, e2m1 to +-6 with the
 * thresholds of CHECKPOINTS.md §1.1. */
#ifndef KERNELS_KDTYPE_H
#define KERNELS_KDTYPE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

float kdtype_bf16_to_f32(uint16_t v);
uint16_t kdtype_f32_to_bf16(float f);
/* Round an fp32 value through bf16 and back. */
float kdtype_round_bf16(float f);
float kdtype_e4m3_to_f32(uint8_t v);
uint8_t kdtype_f32_to_e4m3(float f);
float kdtype_e2m1_to_f32(uint8_t nibble); /* low 4 bits used */
uint8_t kdtype_f32_to_e2m1(float f);      /* nibble 0..15 */

#ifdef __cplusplus
}
#endif

#endif

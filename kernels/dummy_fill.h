/* dummy_fill: `--load-format dummy` weights written on the device (common/dummy_gen.h: the same
 * bits the loader's host fill writes), so the GPU runner gets the full-size model without host
 * buffers or uploads (the host fill and the upload of the 66 GiB BF16 model took about a
 * minute of every benchmark run on the H200 machine). */
#ifndef KERNELS_DUMMY_FILL_H
#define KERNELS_DUMMY_FILL_H

#include <stdint.h>

#include "kstream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes: out[i] = ((byte i % 8 of dummy_gen_unit(seed, i / 8)) & mask) + add, i < n. */
int dummy_fill_bytes_cuda(uint8_t *out, int64_t n, uint64_t seed, uint8_t mask, uint8_t add,
                          cudaStream_t stream);
int dummy_fill_bytes_ref(uint8_t *out, int64_t n, uint64_t seed, uint8_t mask, uint8_t add);
/* 16-bit values: out[i] = table[byte i % 8 of dummy_gen_unit(seed, i / 8)], i < n (table: 256
 * host values, passed by value). */
int dummy_fill_u16_cuda(uint16_t *out, int64_t n, uint64_t seed, const uint16_t *table,
                        cudaStream_t stream);
int dummy_fill_u16_ref(uint16_t *out, int64_t n, uint64_t seed, const uint16_t *table);

#ifdef __cplusplus
}
#endif

#endif

/* dummy_gen: the value stream of `--load-format dummy` weights, shared by the loader's host fill
 * (model/model_dummy.c) and the GPU runner's on-device fill (kernels/dummy_fill.cu), so a
 * tensor generated on either side holds the same bits. A tensor's unit j (8 bytes, or 8 16-bit
 * values) comes from splitmix64's output j: dummy_gen_unit(seed, j); any range of units is
 * computed alone (no chain), so fills split over threads or CUDA blocks. Byte k of a unit is
 * bits 8k..8k+7 of its word: a byte weight is ((that & mask) + add), a 16-bit weight is
 * table[that] (256 encoded levels). */
#ifndef COMMON_DUMMY_GEN_H
#define COMMON_DUMMY_GEN_H

#include <stdint.h>

#ifdef __CUDACC__
#define DUMMY_GEN_HD static __host__ __device__ __forceinline__
#else
#define DUMMY_GEN_HD static inline
#endif

#define DUMMY_GEN_GOLDEN 0x9e3779b97f4a7c15ull

DUMMY_GEN_HD uint64_t dummy_gen_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* the random word of unit j of a tensor whose seed is seed */
DUMMY_GEN_HD uint64_t dummy_gen_unit(uint64_t seed, int64_t j)
{
    return dummy_gen_mix64(seed + (uint64_t)(j + 1) * DUMMY_GEN_GOLDEN);
}

/* Host fills of units [j0, j1) of a tensor of n elements (the CPU side: the loader's fill over
 * its threads, dummy_fill's reference, tests): bytes ((r & mask) + add), or 16- / 32-bit values
 * table[r], r the unit's byte of the element. */
static inline void dummy_gen_bytes(uint8_t *p, int64_t n, uint64_t seed, uint8_t mask,
                                   uint8_t add, int64_t j0, int64_t j1)
{
    for (int64_t j = j0; j < j1; j++) {
        const uint64_t x = dummy_gen_unit(seed, j);
        for (int64_t k = 0, i = 8 * j; k < 8 && i + k < n; k++)
            p[i + k] = (uint8_t)(((x >> (8 * k)) & mask) + add);
    }
}

static inline void dummy_gen_u16(uint16_t *p, int64_t n, uint64_t seed, const uint16_t *table,
                                 int64_t j0, int64_t j1)
{
    for (int64_t j = j0; j < j1; j++) {
        const uint64_t x = dummy_gen_unit(seed, j);
        for (int64_t k = 0, i = 8 * j; k < 8 && i + k < n; k++)
            p[i + k] = table[(x >> (8 * k)) & 0xff];
    }
}

static inline void dummy_gen_u32(uint32_t *p, int64_t n, uint64_t seed, const uint32_t *table,
                                 int64_t j0, int64_t j1)
{
    for (int64_t j = j0; j < j1; j++) {
        const uint64_t x = dummy_gen_unit(seed, j);
        for (int64_t k = 0, i = 8 * j; k < 8 && i + k < n; k++)
            p[i + k] = table[(x >> (8 * k)) & 0xff];
    }
}

/* the units of n elements */
static inline int64_t dummy_gen_units(int64_t n)
{
    return (n + 7) / 8;
}

#endif

/* dummy_fill: one thread per 8-value unit (dummy_fill.h), a grid-stride loop. */
#include "dummy_fill.h"

#include "common/dummy_gen.h"
#include "common/err.h"
#include "common/xalloc.h"
#include "internal/kcuda.cuh"

#include <string.h>

#define FILL_THREADS 256
#define FILL_MAX_BLOCKS 8192

struct fill_table {
    uint16_t v[256];
};

__global__ void __launch_bounds__(FILL_THREADS)
    dummy_fill_bytes_kernel(uint8_t *out, int64_t n, uint64_t seed, uint8_t mask, uint8_t add)
{
    const int64_t units = (n + 7) / 8;
    for (int64_t j = blockIdx.x * (int64_t)FILL_THREADS + threadIdx.x; j < units;
         j += (int64_t)gridDim.x * FILL_THREADS) {
        const uint64_t x = dummy_gen_unit(seed, j);
        uint8_t b[8];
#pragma unroll
        for (int k = 0; k < 8; k++)
            b[k] = (uint8_t)(((x >> (8 * k)) & mask) + add);
        const int64_t i0 = 8 * j;
        if (i0 + 8 <= n && ((uintptr_t)(out + i0)) % 8 == 0) {
            uint2 w;
            w.x =
                (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
            w.y =
                (uint32_t)b[4] | (uint32_t)b[5] << 8 | (uint32_t)b[6] << 16 | (uint32_t)b[7] << 24;
            *reinterpret_cast<uint2 *>(out + i0) = w;
        } else {
            for (int k = 0; k < 8 && i0 + k < n; k++)
                out[i0 + k] = b[k];
        }
    }
}

__global__ void __launch_bounds__(FILL_THREADS)
    dummy_fill_u16_kernel(uint16_t *out, int64_t n, uint64_t seed, const fill_table t)
{
    __shared__ uint16_t tab[256];
    for (int i = threadIdx.x; i < 256; i += FILL_THREADS)
        tab[i] = t.v[i];
    __syncthreads();
    const int64_t units = (n + 7) / 8;
    for (int64_t j = blockIdx.x * (int64_t)FILL_THREADS + threadIdx.x; j < units;
         j += (int64_t)gridDim.x * FILL_THREADS) {
        const uint64_t x = dummy_gen_unit(seed, j);
        const int64_t i0 = 8 * j;
        if (i0 + 8 <= n && ((uintptr_t)(out + i0)) % 16 == 0) {
            uint4 w;
            w.x = (uint32_t)tab[x & 0xff] | (uint32_t)tab[(x >> 8) & 0xff] << 16;
            w.y = (uint32_t)tab[(x >> 16) & 0xff] | (uint32_t)tab[(x >> 24) & 0xff] << 16;
            w.z = (uint32_t)tab[(x >> 32) & 0xff] | (uint32_t)tab[(x >> 40) & 0xff] << 16;
            w.w = (uint32_t)tab[(x >> 48) & 0xff] | (uint32_t)tab[(x >> 56) & 0xff] << 16;
            *reinterpret_cast<uint4 *>(out + i0) = w;
        } else {
            for (int k = 0; k < 8 && i0 + k < n; k++)
                out[i0 + k] = tab[(x >> (8 * k)) & 0xff];
        }
    }
}

static unsigned fill_blocks(int64_t n)
{
    const int64_t b = CEIL_DIV(CEIL_DIV(n, (int64_t)8), (int64_t)FILL_THREADS);
    return (unsigned)(b < 1 ? 1 : b > FILL_MAX_BLOCKS ? FILL_MAX_BLOCKS : b);
}

int dummy_fill_bytes_cuda(uint8_t *out, int64_t n, uint64_t seed, uint8_t mask, uint8_t add,
                          cudaStream_t stream)
{
    if ((!out && n > 0) || n < 0)
        return ERR_INVAL;
    if (n == 0)
        return 0;
    dummy_fill_bytes_kernel<<<fill_blocks(n), FILL_THREADS, 0, stream>>>(out, n, seed, mask, add);
    return kcuda_launch_status("dummy_fill_bytes");
}

int dummy_fill_u16_cuda(uint16_t *out, int64_t n, uint64_t seed, const uint16_t *table,
                        cudaStream_t stream)
{
    if ((!out && n > 0) || n < 0 || !table)
        return ERR_INVAL;
    if (n == 0)
        return 0;
    fill_table t;
    memcpy(t.v, table, sizeof t.v);
    dummy_fill_u16_kernel<<<fill_blocks(n), FILL_THREADS, 0, stream>>>(out, n, seed, t);
    return kcuda_launch_status("dummy_fill_u16");
}

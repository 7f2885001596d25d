/* cast_bf16: grid-stride elementwise conversion. */
#include "cast_bf16.h"

#include "common/xalloc.h"
#include "internal/kcuda.cuh"

__global__ void cast_bf16_kernel(uint16_t *out, const float *x, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        out[i] = f32_to_bf16_bits(x[i]);
}

int cast_bf16_cuda(uint16_t *out, const float *x, int64_t n, cudaStream_t stream)
{
    if (!out || !x || n < 0)
        return ERR_INVAL;
    if (n == 0)
        return 0;
    int64_t blocks = CEIL_DIV(n, 256);
    cast_bf16_kernel<<<(unsigned)(blocks < 4096 ? blocks : 4096), 256, 0, stream>>>(out, x, n);
    return kcuda_launch_status("cast_bf16");
}

/* rmsnorm: one block per row; the row is read twice (the second read hits L1/L2). */
#include "rmsnorm.h"

#include "common/xalloc.h"
#include "internal/kcuda.cuh"
#include "internal/pdl.cuh"

__global__ void rmsnorm_kernel(float *out, const float *x, const float *w, int dim, float eps,
                               float w_offset)
{
    kcuda_pdl_enter();
    __shared__ float scratch[32];
    const float *xr = x + (int64_t)blockIdx.x * dim;
    float *o = out + (int64_t)blockIdx.x * dim;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x)
        ss += xr[i] * xr[i];
    ss = block_sum(ss, scratch);
    const float inv = rsqrtf(ss / dim + eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x)
        o[i] = xr[i] * inv * (w_offset + w[i]);
}

int rmsnorm_cuda(float *out, const float *x, const float *w, int n_rows, int dim, float eps,
                 float w_offset, cudaStream_t stream)
{
    if (!out || !x || !w || n_rows < 0 || dim <= 0)
        return ERR_INVAL;
    if (n_rows == 0)
        return 0;
    kcuda_launch_pdl(rmsnorm_kernel, n_rows, rmsnorm_threads(dim), 0, stream, out, x, w, dim, eps,
                     w_offset);
    return kcuda_launch_status("rmsnorm");
}

/* fused_add_rmsnorm: one block per row; the summed row is kept in shared memory. */
#include "fused_add_rmsnorm.h"

#include "common/xalloc.h"
#include "internal/kcuda.cuh"

__global__ void fused_add_rmsnorm_kernel(float *out, float *resid, const float *x, const float *w,
                                         int dim, float eps, float w_offset)
{
    extern __shared__ float row[];
    __shared__ float scratch[32];
    const int64_t off = (int64_t)blockIdx.x * dim;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = resid[off + i] + x[off + i];
        resid[off + i] = v;
        row[i] = v;
        ss += v * v;
    }
    ss = block_sum(ss, scratch);
    const float inv = rsqrtf(ss / dim + eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x)
        out[off + i] = row[i] * inv * (w_offset + w[i]);
}

int fused_add_rmsnorm_cuda(float *out, float *resid, const float *x, const float *w, int n_rows,
                           int dim, float eps, float w_offset, cudaStream_t stream)
{
    if (!out || !resid || !x || !w || n_rows < 0 || dim <= 0 || dim > 12288)
        return ERR_INVAL;
    if (n_rows == 0)
        return 0;
    int threads = dim >= 1024 ? 256 : dim >= 256 ? 128 : 64;
    fused_add_rmsnorm_kernel<<<n_rows, threads, sizeof(float) * dim, stream>>>(out, resid, x, w,
                                                                               dim, eps, w_offset);
    return kcuda_launch_status("fused_add_rmsnorm");
}

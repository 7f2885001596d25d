/* fused_add_rmsnorm: one block per row; the summed row is kept in registers (float4, dim % 4 ==
 * 0 and aligned rows: the model's) or in shared memory (any dim). */
#include "fused_add_rmsnorm.h"

#include "common/xalloc.h"
#include "internal/kcuda.cuh"
#include "internal/pdl.cuh"

__global__ void fused_add_rmsnorm_kernel(float *out, float *resid, const float *x, const float *w,
                                         int dim, float eps, float w_offset)
{
    kcuda_pdl_enter();
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

/* The decode step's norms let the kernel after them be placed before they wait (pdl.cuh's
 * kcuda_pdl_enter_early): that kernel (the mixer's input projections after the input norm, the
 * router after the post-mixer norm) loads its weights before its own wait, and with this its
 * blocks are placed while the kernel before the norm (the experts' down stage, the out
 * projection) still runs, instead of only once that kernel has completed. Nothing after a norm
 * reads, before its wait, what the kernel before the norm wrote. -DNORM_PDL_EARLY=0 waits first
 * (an A/B build, tests/gpu/measure.sh normab). */
#ifndef NORM_PDL_EARLY
#define NORM_PDL_EARLY 1
#endif

/* dim % 4 == 0, 16-byte aligned rows: each thread holds C float4 of the summed row in
 * registers (all its loads issued before the reduction, the weight's before the PDL wait), up to
 * 1024 threads */
template <int C>
__global__ void __launch_bounds__(1024)
    fused_add_rmsnorm_v4_kernel(float *out, float *resid, const float *x, const float *w, int dim,
                                float eps, float w_offset)
{
    __shared__ float scratch[32];
    const int64_t off = (int64_t)blockIdx.x * dim;
    const int n4 = dim / 4;
    float4 v[C], wv[C];
#pragma unroll
    for (int c = 0; c < C; c++) {
        const int i = threadIdx.x + c * blockDim.x;
        if (i < n4)
            wv[c] = reinterpret_cast<const float4 *>(w)[i]; /* a weight: before the wait */
    }
    if (NORM_PDL_EARLY)
        kcuda_pdl_enter_early();
    else
        kcuda_pdl_enter();
    const float4 *x4 = reinterpret_cast<const float4 *>(x + off);
    float4 *r4 = reinterpret_cast<float4 *>(resid + off);
    float ss = 0.0f;
#pragma unroll
    for (int c = 0; c < C; c++) {
        const int i = threadIdx.x + c * blockDim.x;
        if (i < n4) {
            const float4 a = x4[i], r = r4[i];
            v[c] = make_float4(r.x + a.x, r.y + a.y, r.z + a.z, r.w + a.w);
            r4[i] = v[c];
            ss += v[c].x * v[c].x + v[c].y * v[c].y + v[c].z * v[c].z + v[c].w * v[c].w;
        }
    }
    ss = block_sum(ss, scratch);
    const float inv = rsqrtf(ss / dim + eps);
    float4 *o4 = reinterpret_cast<float4 *>(out + off);
#pragma unroll
    for (int c = 0; c < C; c++) {
        const int i = threadIdx.x + c * blockDim.x;
        if (i < n4)
            o4[i] = make_float4(v[c].x * inv * (w_offset + wv[c].x),
                                v[c].y * inv * (w_offset + wv[c].y),
                                v[c].z * inv * (w_offset + wv[c].z),
                                v[c].w * inv * (w_offset + wv[c].w));
    }
}

int fused_add_rmsnorm_cuda(float *out, float *resid, const float *x, const float *w, int n_rows,
                           int dim, float eps, float w_offset, cudaStream_t stream)
{
    if (!out || !resid || !x || !w || n_rows < 0 || dim <= 0 || dim > 12288)
        return ERR_INVAL;
    if (n_rows == 0)
        return 0;
    const bool v4 = dim % 4 == 0 && ((uintptr_t)out | (uintptr_t)resid | (uintptr_t)x |
                                     (uintptr_t)w) % 16 == 0;
    if (v4) {
        const int n4 = dim / 4, c = CEIL_DIV(n4, 1024); /* dim <= 12288: c <= 3 */
        const int threads = (int)CEIL_DIV(CEIL_DIV(n4, c), 32) * 32;
        if (c == 1)
            kcuda_launch_pdl(fused_add_rmsnorm_v4_kernel<1>, n_rows, threads, 0, stream, out,
                             resid, x, w, dim, eps, w_offset);
        else if (c == 2)
            kcuda_launch_pdl(fused_add_rmsnorm_v4_kernel<2>, n_rows, threads, 0, stream, out,
                             resid, x, w, dim, eps, w_offset);
        else
            kcuda_launch_pdl(fused_add_rmsnorm_v4_kernel<3>, n_rows, threads, 0, stream, out,
                             resid, x, w, dim, eps, w_offset);
        return kcuda_launch_status("fused_add_rmsnorm");
    }
    int threads = dim >= 1024 ? 256 : dim >= 256 ? 128 : 64;
    kcuda_launch_pdl(fused_add_rmsnorm_kernel, n_rows, threads, sizeof(float) * dim, stream, out,
                     resid, x, w, dim, eps, w_offset);
    return kcuda_launch_status("fused_add_rmsnorm");
}

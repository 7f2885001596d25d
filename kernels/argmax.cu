/* argmax: one 1024-thread block per row (16-byte loads, four in flight per thread); (value, index)
 * pairs reduced with ties -> lower index. */
#include "argmax.h"

#include "common/xalloc.h"
#include "internal/kcuda.cuh"
#include "internal/pdl.cuh"

static __device__ __forceinline__ bool better(float v, int i, float bv, int bi)
{
    /* bi < 0 means "nothing yet" */
    return bi < 0 || v > bv || (v == bv && i < bi);
}

__global__ void __launch_bounds__(1024) argmax_kernel(int32_t *ids, const float *logits, int vocab)
{
    kcuda_pdl_enter();
    __shared__ float sv[32];
    __shared__ int si[32];
    const float *l = logits + (int64_t)blockIdx.x * vocab;
    float bv = -INFINITY;
    int bi = -1;
    /* 16-byte loads, AU of them in flight per thread, when the rows allow (a thread's indices
     * still rise in the order it compares them: ties keep the lower index) */
    constexpr int AU = 4;
    const int n4 = vocab % 4 == 0 && ((uintptr_t)logits) % 16 == 0 ? vocab / 4 : 0;
    const float4 *l4 = reinterpret_cast<const float4 *>(l);
    for (int i0 = threadIdx.x; i0 < n4; i0 += AU * blockDim.x) {
        float4 q[AU];
#pragma unroll
        for (int u = 0; u < AU; u++) {
            const int i = i0 + u * blockDim.x;
            q[u] = i < n4 ? __ldg(l4 + i) : make_float4(NAN, NAN, NAN, NAN);
        }
#pragma unroll
        for (int u = 0; u < AU; u++) {
            const int i = 4 * (i0 + u * blockDim.x);
            const float v[4] = { q[u].x, q[u].y, q[u].z, q[u].w };
#pragma unroll
            for (int j = 0; j < 4; j++)
                if (!isnan(v[j]) && better(v[j], i + j, bv, bi)) {
                    bv = v[j];
                    bi = i + j;
                }
        }
    }
    for (int i = 4 * n4 + threadIdx.x; i < vocab; i += blockDim.x) {
        float v = l[i];
        if (!isnan(v) && better(v, i, bv, bi)) {
            bv = v;
            bi = i;
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (oi >= 0 && better(ov, oi, bv, bi)) {
            bv = ov;
            bi = oi;
        }
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        sv[warp] = bv;
        si[warp] = bi;
    }
    __syncthreads();
    if (warp == 0) {
        const int nw = blockDim.x >> 5;
        bv = lane < nw ? sv[lane] : -INFINITY;
        bi = lane < nw ? si[lane] : -1;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (oi >= 0 && better(ov, oi, bv, bi)) {
                bv = ov;
                bi = oi;
            }
        }
        if (lane == 0)
            ids[blockIdx.x] = bi < 0 ? 0 : bi;
    }
}

int argmax_cuda(int32_t *ids, const float *logits, int n_rows, int vocab, cudaStream_t stream)
{
    if (!ids || !logits || n_rows < 0 || vocab <= 0)
        return ERR_INVAL;
    if (n_rows == 0)
        return 0;
    kcuda_launch_pdl(argmax_kernel, n_rows, 1024, 0, stream, ids, logits, vocab);
    return kcuda_launch_status("argmax");
}

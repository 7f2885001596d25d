/* argmax: one 1024-thread block per row; (value, index) pairs reduced with ties -> lower index. */
#include "argmax.h"

#include "common/xalloc.h"
#include "internal/kcuda.cuh"

static __device__ __forceinline__ bool better(float v, int i, float bv, int bi)
{
    /* bi < 0 means "nothing yet" */
    return bi < 0 || v > bv || (v == bv && i < bi);
}

__global__ void __launch_bounds__(1024) argmax_kernel(int32_t *ids, const float *logits, int vocab)
{
    __shared__ float sv[32];
    __shared__ int si[32];
    const float *l = logits + (int64_t)blockIdx.x * vocab;
    float bv = -INFINITY;
    int bi = -1;
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
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
    argmax_kernel<<<n_rows, 1024, 0, stream>>>(ids, logits, vocab);
    return kcuda_launch_status("argmax");
}

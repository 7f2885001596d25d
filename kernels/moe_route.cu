/* moe_route: one warp per token; probabilities in shared memory, k rounds of a warp argmax. */
#include "moe_route.h"

#include "common/xalloc.h"
#include "internal/kcuda.cuh"

__global__ void moe_route_kernel(int32_t *ids, float *weights, const float *logits, int n_experts,
                                 int top_k)
{
    __shared__ float p[MOE_ROUTE_MAX_EXPERTS];
    __shared__ float selw[MOE_ROUTE_MAX_TOPK];
    const int lane = threadIdx.x;
    const float *l = logits + (int64_t)blockIdx.x * n_experts;
    float mx = -INFINITY;
    for (int e = lane; e < n_experts; e += 32)
        mx = fmaxf(mx, l[e]);
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int e = lane; e < n_experts; e += 32) {
        float v = __expf(l[e] - mx);
        p[e] = v;
        sum += v;
    }
    sum = warp_sum(sum);
    const float inv = 1.0f / sum;
    __syncwarp();
    float tot = 0.0f;
    for (int j = 0; j < top_k; j++) {
        float bv = -1.0f;
        int bi = n_experts;
        for (int e = lane; e < n_experts; e += 32)
            if (p[e] > bv) { /* increasing e: first max wins ties */
                bv = p[e];
                bi = e;
            }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (ov > bv || (ov == bv && oi < bi)) {
                bv = ov;
                bi = oi;
            }
        }
        if (lane == 0) {
            ids[(int64_t)blockIdx.x * top_k + j] = bi;
            selw[j] = bv * inv;
            if (bi < n_experts)
                p[bi] = -2.0f;
        }
        tot += bv * inv;
        __syncwarp();
    }
    for (int j = lane; j < top_k; j += 32)
        weights[(int64_t)blockIdx.x * top_k + j] = selw[j] / tot;
}

int moe_route_cuda(int32_t *ids, float *weights, const float *logits, int n_tok, int n_experts,
                   int top_k, cudaStream_t stream)
{
    if (!ids || !weights || !logits || n_tok < 0 || n_experts <= 0 ||
        n_experts > MOE_ROUTE_MAX_EXPERTS || top_k <= 0 || top_k > n_experts ||
        top_k > MOE_ROUTE_MAX_TOPK)
        return ERR_INVAL;
    if (n_tok == 0)
        return 0;
    moe_route_kernel<<<n_tok, 32, 0, stream>>>(ids, weights, logits, n_experts, top_k);
    return kcuda_launch_status("moe_route");
}

/* moe_route: one warp per token; probabilities in shared memory, k rounds of a warp argmax. */
#include "moe_route.h"

#include "common/xalloc.h"
#include "internal/kcuda.cuh"

/* sh (or NULL): the shared expert's gate logit of token t at sh[t * sh_pitch]; then each token
 * has top_k + 1 slots, the last one (expert n_experts, weight sigmoid(logit)) */
__global__ void moe_route_kernel(int32_t *ids, float *weights, const float *logits, int n_experts,
                                 int top_k, const float *sh, int sh_pitch)
{
    const int stride = top_k + (sh ? 1 : 0);
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
            ids[(int64_t)blockIdx.x * stride + j] = bi;
            selw[j] = bv * inv;
            if (bi < n_experts)
                p[bi] = -2.0f;
        }
        tot += bv * inv;
        __syncwarp();
    }
    for (int j = lane; j < top_k; j += 32)
        weights[(int64_t)blockIdx.x * stride + j] = selw[j] / tot;
    if (sh && lane == 0) {
        ids[(int64_t)blockIdx.x * stride + top_k] = n_experts;
        weights[(int64_t)blockIdx.x * stride + top_k] =
            sigmoid_f32(sh[(int64_t)blockIdx.x * sh_pitch]);
    }
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
    moe_route_kernel<<<n_tok, 32, 0, stream>>>(ids, weights, logits, n_experts, top_k, NULL, 0);
    return kcuda_launch_status("moe_route");
}

int moe_route_shared_cuda(int32_t *ids, float *weights, const float *logits, const float *sh,
                          int sh_pitch, int n_tok, int n_experts, int top_k, cudaStream_t stream)
{
    if (!ids || !weights || !logits || !sh || sh_pitch < 1 || n_tok < 0 || n_experts <= 0 ||
        n_experts > MOE_ROUTE_MAX_EXPERTS || top_k <= 0 || top_k > n_experts ||
        top_k > MOE_ROUTE_MAX_TOPK)
        return ERR_INVAL;
    if (n_tok == 0)
        return 0;
    moe_route_kernel<<<n_tok, 32, 0, stream>>>(ids, weights, logits, n_experts, top_k, sh,
                                              sh_pitch);
    return kcuda_launch_status("moe_route_shared");
}

/* gdn_step: one 128-thread block per (sequence, v-head); thread v keeps column v of the 128x128
 * state in registers, so S is read and written once. */
#include "gdn_step.h"

#include "common/xalloc.h"
#include "internal/kcuda.cuh"

#define D GDN_STEP_HEAD_DIM

__global__ void __launch_bounds__(D)
    gdn_step_kernel(float *out, float *state, const float *qkv, const float *z, const float *a,
                    const float *b, const float *a_log, const float *dt_bias, const float *norm_w,
                    const int32_t *slots, int n_k_heads, int n_v_heads, float eps)
{
    __shared__ float qn[D], kn[D], scratch[32];
    const int s = blockIdx.y, j = blockIdx.x, v = threadIdx.x;
    const int kh = j / (n_v_heads / n_k_heads);
    const int64_t width = (int64_t)(2 * n_k_heads + n_v_heads) * D;
    const float *row = qkv + s * width;
    const float qv = row[(int64_t)kh * D + v];
    const float kv_ = row[(int64_t)(n_k_heads + kh) * D + v];
    const float vv = row[(int64_t)(2 * n_k_heads + j) * D + v];
    const float sq = block_sum(qv * qv, scratch);
    const float sk = block_sum(kv_ * kv_, scratch);
    qn[v] = qv * rsqrtf(sq + 1e-6f) * rsqrtf((float)D);
    kn[v] = kv_ * rsqrtf(sk + 1e-6f);
    const float x = a[(int64_t)s * n_v_heads + j] + dt_bias[j];
    const float sp = x > 20.0f ? x : log1pf(__expf(x));
    const float alpha = __expf(-__expf(a_log[j]) * sp);
    const float beta = sigmoid_f32(b[(int64_t)s * n_v_heads + j]);
    __syncthreads();

    const int64_t slot = slots ? slots[s] : s;
    float *S = state + (slot * n_v_heads + j) * D * D + v;
    float col[D];
    float kv = 0.0f;
#pragma unroll
    for (int k = 0; k < D; k++) {
        col[k] = S[k * D] * alpha;
        kv += col[k] * kn[k];
    }
    const float d = beta * (vv - kv);
    float o = 0.0f;
#pragma unroll
    for (int k = 0; k < D; k++) {
        col[k] += kn[k] * d;
        S[k * D] = col[k];
        o += col[k] * qn[k];
    }
    const float ss = block_sum(o * o, scratch);
    const float zv = z[(int64_t)s * n_v_heads * D + (int64_t)j * D + v];
    out[(int64_t)s * n_v_heads * D + (int64_t)j * D + v] =
        norm_w[v] * (o * rsqrtf(ss / D + eps)) * silu_f32(zv);
}

int gdn_step_cuda(float *out, float *state, const float *qkv, const float *z, const float *a,
                  const float *b, const float *a_log, const float *dt_bias, const float *norm_w,
                  const int32_t *slots, int n_seq, int n_k_heads, int n_v_heads, float eps,
                  cudaStream_t stream)
{
    if (!out || !state || !qkv || !z || !a || !b || !a_log || !dt_bias || !norm_w || n_seq < 0 ||
        n_k_heads <= 0 || n_v_heads <= 0 || n_v_heads % n_k_heads || n_seq > 65535)
        return ERR_INVAL;
    if (n_seq == 0)
        return 0;
    dim3 grid(n_v_heads, n_seq);
    gdn_step_kernel<<<grid, D, 0, stream>>>(out, state, qkv, z, a, b, a_log, dt_bias, norm_w, slots,
                                            n_k_heads, n_v_heads, eps);
    return kcuda_launch_status("gdn_step");
}

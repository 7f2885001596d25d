/* gdn_seq: conv = one thread per (item, channel) with the kc-1 window in registers; step = one
 * 128-thread block per (item, value head), thread v holding column v of S in registers across
 * the item's rows (same arithmetic as gdn_conv / gdn_step per row). */
#include "gdn_seq.h"

#include "common/xalloc.h"
#include "gdn_conv.h"
#include "internal/kcuda.cuh"

#define D GDN_SEQ_HEAD_DIM
#define MAXW (GDN_CONV_MAX_KC - 1)

__global__ void gdn_seq_conv_kernel(float *out, float *state, float *snap, int n_snap,
                                    const float *x, const float *w, const int32_t *items,
                                    int channels, int kc)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= channels)
        return;
    const int32_t *it = items + (int64_t)blockIdx.y * GDN_SEQ_ITEM_INTS;
    const int64_t r0 = it[0];
    const int n = it[1], sn = it[3];
    if (n <= 0)
        return;
    const int kw = kc - 1;
    float *st = state + ((int64_t)it[2] * channels + c) * kw;
    const float *wc = w + (int64_t)c * kc;
    float win[MAXW], wt[MAXW];
#pragma unroll
    for (int j = 0; j < MAXW; j++) {
        win[j] = j < kw ? st[j] : 0.0f;
        wt[j] = j < kw ? wc[j] : 0.0f;
    }
    const float wl = wc[kw];
    for (int t = 0; t < n; t++) {
        const int64_t r = r0 + t;
        const float xv = x[r * channels + c];
        float u = wl * xv;
#pragma unroll
        for (int j = 0; j < MAXW; j++)
            if (j < kw)
                u += wt[j] * win[j];
        out[r * channels + c] = silu_f32(u);
#pragma unroll
        for (int j = 0; j < MAXW - 1; j++)
            if (j < kw - 1)
                win[j] = win[j + 1];
#pragma unroll
        for (int j = 0; j < MAXW; j++)
            if (j == kw - 1)
                win[j] = xv;
        if (snap && sn >= 0 && sn + t < n_snap) {
            float *sp = snap + ((int64_t)(sn + t) * channels + c) * kw;
#pragma unroll
            for (int j = 0; j < MAXW; j++)
                if (j < kw)
                    sp[j] = win[j];
        }
    }
#pragma unroll
    for (int j = 0; j < MAXW; j++)
        if (j < kw)
            st[j] = win[j];
}

__global__ void __launch_bounds__(D)
    gdn_seq_step_kernel(float *out, float *state, float *snap, int n_snap, const float *qkv,
                        const float *z, const float *a, const float *b, const float *a_log,
                        const float *dt_bias, const float *norm_w, const int32_t *items,
                        int n_k_heads, int n_v_heads, float eps)
{
    __shared__ float qn[D], kn[D], scratch[32];
    const int j = blockIdx.x, v = threadIdx.x;
    const int32_t *it = items + (int64_t)blockIdx.y * GDN_SEQ_ITEM_INTS;
    const int64_t r0 = it[0];
    const int n = it[1], sn = it[3];
    if (n <= 0) // uniform over the block: no thread reaches a barrier
        return;
    const int kh = j / (n_v_heads / n_k_heads);
    const int64_t width = (int64_t)(2 * n_k_heads + n_v_heads) * D;
    const int64_t vw = (int64_t)n_v_heads * D;
    const float a_exp = __expf(a_log[j]), dtb = dt_bias[j], nw = norm_w[v];
    float *S = state + ((int64_t)it[2] * n_v_heads + j) * D * D + v;
    float col[D];
#pragma unroll
    for (int k = 0; k < D; k++)
        col[k] = S[k * D];
    for (int t = 0; t < n; t++) {
        const int64_t r = r0 + t;
        const float *row = qkv + r * width;
        const float qv = row[(int64_t)kh * D + v];
        const float kv_ = row[(int64_t)(n_k_heads + kh) * D + v];
        const float vv = row[(int64_t)(2 * n_k_heads + j) * D + v];
        const float sq = block_sum(qv * qv, scratch);
        const float sk = block_sum(kv_ * kv_, scratch);
        qn[v] = qv * rsqrtf(sq + 1e-6f) * rsqrtf((float)D);
        kn[v] = kv_ * rsqrtf(sk + 1e-6f);
        const float xa = a[r * n_v_heads + j] + dtb;
        const float sp = xa > 20.0f ? xa : log1pf(__expf(xa));
        const float alpha = __expf(-a_exp * sp);
        const float beta = sigmoid_f32(b[r * n_v_heads + j]);
        __syncthreads();
        float kv = 0.0f;
#pragma unroll
        for (int k = 0; k < D; k++) {
            col[k] *= alpha;
            kv += col[k] * kn[k];
        }
        const float d = beta * (vv - kv);
        float o = 0.0f;
#pragma unroll
        for (int k = 0; k < D; k++) {
            col[k] += kn[k] * d;
            o += col[k] * qn[k];
        }
        /* block_sum's barriers also keep qn/kn alive until every thread is past its loops */
        const float ss = block_sum(o * o, scratch);
        const float zv = z[r * vw + (int64_t)j * D + v];
        out[r * vw + (int64_t)j * D + v] = nw * (o * rsqrtf(ss / D + eps)) * silu_f32(zv);
        if (snap && sn >= 0 && sn + t < n_snap) {
            float *sp_ = snap + ((int64_t)(sn + t) * n_v_heads + j) * D * D + v;
#pragma unroll
            for (int k = 0; k < D; k++)
                sp_[k * D] = col[k];
        }
    }
#pragma unroll
    for (int k = 0; k < D; k++)
        S[k * D] = col[k];
}

int gdn_seq_conv_cuda(float *out, float *state, float *snap, int n_snap, const float *x,
                      const float *w, const int32_t *items, int n_items, int channels, int kc,
                      cudaStream_t stream)
{
    if (!out || !state || !x || !w || !items || n_items < 0 || n_items > 65535 ||
        channels <= 0 || kc < 2 || kc > GDN_CONV_MAX_KC || n_snap < 0)
        return ERR_INVAL;
    if (n_items == 0)
        return 0;
    dim3 grid(CEIL_DIV(channels, 256), n_items);
    gdn_seq_conv_kernel<<<grid, 256, 0, stream>>>(out, state, snap, n_snap, x, w, items,
                                                  channels, kc);
    return kcuda_launch_status("gdn_seq_conv");
}

int gdn_seq_step_cuda(float *out, float *state, float *snap, int n_snap, const float *qkv,
                      const float *z, const float *a, const float *b, const float *a_log,
                      const float *dt_bias, const float *norm_w, const int32_t *items,
                      int n_items, int n_k_heads, int n_v_heads, float eps, cudaStream_t stream)
{
    if (!out || !state || !qkv || !z || !a || !b || !a_log || !dt_bias || !norm_w || !items ||
        n_items < 0 || n_items > 65535 || n_k_heads <= 0 || n_v_heads <= 0 ||
        n_v_heads % n_k_heads || n_v_heads > 65535 || n_snap < 0)
        return ERR_INVAL;
    if (n_items == 0)
        return 0;
    dim3 grid(n_v_heads, n_items);
    gdn_seq_step_kernel<<<grid, D, 0, stream>>>(out, state, snap, n_snap, qkv, z, a, b, a_log,
                                                dt_bias, norm_w, items, n_k_heads, n_v_heads,
                                                eps);
    return kcuda_launch_status("gdn_seq_step");
}

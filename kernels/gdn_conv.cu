/* gdn_conv: one thread per (sequence, channel). */
#include "gdn_conv.h"

#include "common/xalloc.h"
#include "internal/kcuda.cuh"

__global__ void gdn_conv_kernel(float *out, float *state, const float *x, const float *w,
                                const int32_t *slots, int channels, int kc)
{
    const int s = blockIdx.y;
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= channels)
        return;
    const int64_t slot = slots ? slots[s] : s;
    float *st = state + (slot * channels + c) * (kc - 1);
    const float *wc = w + (int64_t)c * kc;
    const float xv = x[(int64_t)s * channels + c];
    float u = wc[kc - 1] * xv;
    float prev[GDN_CONV_MAX_KC];
#pragma unroll
    for (int j = 0; j < GDN_CONV_MAX_KC - 1; j++)
        if (j < kc - 1) {
            prev[j] = st[j];
            u += wc[j] * prev[j];
        }
    out[(int64_t)s * channels + c] = silu_f32(u);
#pragma unroll
    for (int j = 0; j < GDN_CONV_MAX_KC - 2; j++)
        if (j < kc - 2)
            st[j] = prev[j + 1];
    st[kc - 2] = xv;
}

int gdn_conv_cuda(float *out, float *state, const float *x, const float *w, const int32_t *slots,
                  int n_seq, int channels, int kc, cudaStream_t stream)
{
    if (!out || !state || !x || !w || n_seq < 0 || channels <= 0 || kc < 2 || kc > GDN_CONV_MAX_KC)
        return ERR_INVAL;
    if (n_seq == 0)
        return 0;
    dim3 grid(CEIL_DIV(channels, 256), n_seq);
    gdn_conv_kernel<<<grid, 256, 0, stream>>>(out, state, x, w, slots, channels, kc);
    return kcuda_launch_status("gdn_conv");
}

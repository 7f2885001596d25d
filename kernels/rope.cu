/* rope: one thread per (token, head, rotary pair). */
#include "rope.h"

#include "common/xalloc.h"
#include "internal/kcuda.cuh"

__global__ void rope_kernel(float *x, const int32_t *pos, int n_heads, int rot_dim,
                            int64_t tok_stride, int64_t head_stride, float theta)
{
    const int half = rot_dim / 2;
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n_heads * half)
        return;
    const int h = idx / half, i = idx % half, t = blockIdx.y;
    float *v = x + t * tok_stride + h * head_stride;
    const float inv = (float)(1.0 / pow((double)theta, (double)(2 * i) / rot_dim));
    const float ang = (float)pos[t] * inv;
    double sd, cd;
    sincos((double)ang, &sd, &cd);
    const float c = (float)cd, s = (float)sd;
    const float x1 = v[i], x2 = v[i + half];
    v[i] = x1 * c - x2 * s;
    v[i + half] = x2 * c + x1 * s;
}

int rope_cuda(float *x, const int32_t *pos, int n_tok, int n_heads, int head_dim, int rot_dim,
              int64_t tok_stride, int64_t head_stride, float theta, cudaStream_t stream)
{
    if (!x || !pos || n_tok < 0 || n_heads <= 0 || rot_dim <= 0 || rot_dim % 2 ||
        rot_dim > head_dim || n_tok > 65535)
        return ERR_INVAL;
    if (n_tok == 0)
        return 0;
    dim3 grid(CEIL_DIV(n_heads * rot_dim / 2, 128), n_tok);
    rope_kernel<<<grid, 128, 0, stream>>>(x, pos, n_heads, rot_dim, tok_stride, head_stride, theta);
    return kcuda_launch_status("rope");
}

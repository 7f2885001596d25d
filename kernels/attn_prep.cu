/* attn_prep: grid (n_q_heads + n_kv_heads, n_tok), one thread per dim (blockDim a multiple of 32
 * >= head_dim): the row's head in a register, the block sum of squares, the normed head in
 * shared memory for the rope partner, then the stores. */
#include "attn_prep.h"

#include <math.h>

#include "common/xalloc.h"
#include "internal/kcuda.cuh"
#include "internal/pdl.cuh"
#include "kv_write.h"

__global__ void __launch_bounds__(ATTN_PREP_MAX_HEAD_DIM)
    attn_prep_kernel(float *q, float *gate, const float *qsrc, float *k, const float *v,
                     void *k_cache, void *v_cache, int kv_dtype, float k_inv, float v_inv,
                     const float *q_norm, const float *k_norm, const int32_t *pos,
                     const int32_t *slot_mapping, int n_q_heads, int n_kv_heads, int head_dim,
                     int rot_dim, float eps, float theta)
{
    kcuda_pdl_enter();
    __shared__ float y[ATTN_PREP_MAX_HEAD_DIM];
    __shared__ float scratch[32];
    const int hh = blockIdx.x, i = threadIdx.x;
    const int64_t t = blockIdx.y, hd = head_dim;
    const bool is_q = hh < n_q_heads;
    const int h = is_q ? hh : hh - n_q_heads;
    const float *src = is_q ? qsrc + (t * n_q_heads + h) * (gate ? 2 * hd : hd)
                            : k + (t * n_kv_heads + h) * hd;
    const float *w = is_q ? q_norm : k_norm;
    const float x = i < head_dim ? src[i] : 0.0f;
    const float ss = block_sum(x * x, scratch);
    const float inv = rsqrtf(ss / head_dim + eps);
    float o = i < head_dim ? x * inv * (1.0f + w[i]) : 0.0f;
    if (i < head_dim)
        y[i] = o;
    __syncthreads();
    const int half = rot_dim / 2;
    if (i < rot_dim) { /* as rope_kernel: the pair's angle from an fp32 inv_freq, sincos in double */
        const int pi = i < half ? i : i - half;
        const float invf = (float)(1.0 / pow((double)theta, (double)(2 * pi) / rot_dim));
        const float ang = (float)pos[t] * invf;
        double sd, cd;
        sincos((double)ang, &sd, &cd);
        const float c = (float)cd, s = (float)sd;
        o = i < half ? y[i] * c - y[i + half] * s : y[i] * c + y[i - half] * s;
    }
    if (i >= head_dim)
        return;
    if (is_q) {
        q[(t * n_q_heads + h) * hd + i] = o;
        if (gate)
            gate[(t * n_q_heads + h) * hd + i] = src[hd + i];
        return;
    }
    k[(t * n_kv_heads + h) * hd + i] = o;
    const int64_t slot = slot_mapping[t];
    if (slot < 0)
        return;
    const int64_t at = (slot * n_kv_heads + h) * hd + i;
    const float vv = v[(t * n_kv_heads + h) * hd + i];
    if (kv_dtype == KV_DTYPE_BF16) {
        ((uint16_t *)k_cache)[at] = f32_to_bf16_bits(o);
        ((uint16_t *)v_cache)[at] = f32_to_bf16_bits(vv);
    } else {
        ((uint8_t *)k_cache)[at] = f32_to_e4m3_sat(__fmul_rn(o, k_inv));
        ((uint8_t *)v_cache)[at] = f32_to_e4m3_sat(__fmul_rn(vv, v_inv));
    }
}

int attn_prep_cuda(float *q, float *gate, const float *qsrc, float *k, const float *v,
                   void *k_cache, void *v_cache, int kv_dtype, float k_scale, float v_scale,
                   const float *q_norm, const float *k_norm, const int32_t *pos,
                   const int32_t *slot_mapping, int n_tok, int n_q_heads, int n_kv_heads,
                   int head_dim, int rot_dim, float eps, float theta, cudaStream_t stream)
{
    if (!q || !qsrc || !k || !v || !k_cache || !v_cache || !q_norm || !k_norm || !pos ||
        !slot_mapping || n_tok < 0 || n_tok > 65535 || n_q_heads <= 0 || n_kv_heads <= 0 ||
        head_dim <= 0 || head_dim > ATTN_PREP_MAX_HEAD_DIM || rot_dim <= 0 || rot_dim % 2 ||
        rot_dim > head_dim || !kv_dtype_bytes(kv_dtype) || !(k_scale > 0.0f) ||
        !(v_scale > 0.0f) || isinf(k_scale) || isinf(v_scale))
        return ERR_INVAL;
    if (n_tok == 0)
        return 0;
    const dim3 grid(n_q_heads + n_kv_heads, n_tok);
    kcuda_launch_pdl(attn_prep_kernel, grid, (unsigned)CEIL_DIV(head_dim, 32) * 32, 0, stream, q,
                     gate, qsrc, k, v, k_cache, v_cache, kv_dtype, 1.0f / k_scale, 1.0f / v_scale,
                     q_norm, k_norm, pos, slot_mapping, n_q_heads, n_kv_heads, head_dim, rot_dim,
                     eps, theta);
    return kcuda_launch_status("attn_prep");
}
